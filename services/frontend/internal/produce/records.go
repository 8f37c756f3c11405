package produce

import (
	"context"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// PartitionRecords are one partition's record batches as a Kafka producer
// sent them (one or more RecordBatch v2, concatenated).
type PartitionRecords struct {
	Partition int32
	Records   []byte
	// After, when set, holds the first attempt back until it is closed;
	// Sent, when set, is called once the first attempt was written to the
	// leader's connection, or failed before: together they keep the
	// partition's batches of consecutive requests in order while the
	// requests are served at once (a Kafka connection's pipeline). Sent is
	// called at least once whatever happens, and may be called again.
	After <-chan struct{}
	Sent  func()
}

// RecordsResult is the outcome of one partition's batches.
type RecordsResult struct {
	BaseOffset     int64
	LogStartOffset int64
	Err            error
}

// ProduceRecords is the Kafka produce path: each partition's bytes go to
// its leader in one storage produce request, as they are (the leader checks
// them and the producer's sequences), partitions concurrently, each resent
// after a retriable error once metadata is refreshed, as ProduceBatches
// does. timeout bounds the whole call (the Kafka request's timeout, at most
// Config.Timeout). The error is for the whole topic: ErrUnknownTopic or
// ErrMetadataUnavailable.
func (p *Producer) ProduceRecords(ctx context.Context, topic string, acks int8, timeout time.Duration, parts []PartitionRecords) ([]RecordsResult, error) {
	defer func() { // whatever went, nothing waits behind this request
		for _, pr := range parts {
			if pr.Sent != nil {
				pr.Sent()
			}
		}
	}()
	if timeout <= 0 || timeout > p.cfg.Timeout {
		timeout = p.cfg.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	route, err := p.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	results := make([]RecordsResult, len(parts))
	one := func(i int) {
		part := parts[i].Partition
		if sent := parts[i].Sent; sent != nil {
			defer sent()
		}
		if part < 0 || int(part) >= route.Partitions() {
			results[i].Err = protocol.UnknownTopicOrPartition.Err("partition %d does not exist (the topic has %d)", part, route.Partitions())
			return
		}
		pctx, rt := ctx, route
		if parts[i].Sent != nil {
			pctx = storageclient.WithWritten(ctx, parts[i].Sent)
		}
		if parts[i].After != nil {
			select {
			case <-parts[i].After:
			case <-ctx.Done():
				results[i] = RecordsResult{BaseOffset: -1, LogStartOffset: -1, Err: protocol.RequestTimedOut.Err("not sent: the partition's batches of the request before were not sent in time")}
				return
			}
			if r, ok := p.meta.Route(topic); ok { // it may have moved meanwhile
				rt = r
			}
		}
		resp, err := p.sendWithRetry(pctx, topic, acks, rt, part, parts[i].Records, nil)
		if err = p.settle(ctx, part, err); err != nil {
			results[i] = RecordsResult{BaseOffset: -1, LogStartOffset: -1, Err: err}
			p.countRecords(0, countRecords(parts[i].Records))
			return
		}
		results[i] = RecordsResult{BaseOffset: resp.BaseOffset, LogStartOffset: resp.LogStartOffset}
		p.metrics.Bytes.Add(float64(len(parts[i].Records)))
		p.countRecords(countRecords(parts[i].Records), 0)
	}
	if len(parts) == 1 {
		one(0)
		return results, nil
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one(i)
		}()
	}
	wg.Wait()
	return results, nil
}

// countRecords adds up the record counts of the batches' headers (what
// parses; the leader judges the rest).
func countRecords(b []byte) int {
	n := 0
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return n
		}
		n += int(h.RecordCount)
		b = b[h.Size():]
	}
	return n
}
