package produce

import (
	"context"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// PartitionRecords are one partition's record batches as a Kafka producer
// sent them (one or more RecordBatch v2, concatenated).
type PartitionRecords struct {
	Partition int32
	Records   []byte
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
		if part < 0 || int(part) >= route.Partitions() {
			results[i].Err = protocol.UnknownTopicOrPartition.Err("partition %d does not exist (the topic has %d)", part, route.Partitions())
			return
		}
		resp, err := p.sendWithRetry(ctx, topic, acks, route, part, parts[i].Records, nil)
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
