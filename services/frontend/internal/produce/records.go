package produce

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// RecordsResult is the outcome of one partition's batches.
type RecordsResult struct {
	BaseOffset     int64
	LogStartOffset int64
	Err            error
}

// ProduceRecords is the Kafka produce path: one partition's record batches
// (one or more RecordBatch v2, concatenated, as Kafka producers send them)
// go to its leader in one storage produce request, as they are (the leader
// checks them and the producers' sequences), resent after a retriable error
// once metadata is refreshed, as ProduceBatches does. timeout bounds the
// call (at most Config.Timeout). The error is ErrUnknownTopic or
// ErrMetadataUnavailable for the topic, or the partition's.
func (p *Producer) ProduceRecords(ctx context.Context, topic string, acks int8, timeout time.Duration, partition int32, records []byte) RecordsResult {
	if timeout <= 0 || timeout > p.cfg.Timeout {
		timeout = p.cfg.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	failed := func(err error) RecordsResult { return RecordsResult{BaseOffset: -1, LogStartOffset: -1, Err: err} }
	route, err := p.route(ctx, topic)
	if err != nil {
		return failed(err)
	}
	if partition < 0 || int(partition) >= route.Partitions() {
		return failed(protocol.UnknownTopicOrPartition.Err("partition %d does not exist (the topic has %d)", partition, route.Partitions()))
	}
	n, _ := record.Count(records)
	resp, err := p.sendWithRetry(ctx, partRequest{dest: dest{topic, acks, route}, partition: partition, batch: records})
	if err = p.settle(ctx, partition, err); err != nil {
		p.countRecords(0, n)
		return failed(err)
	}
	p.metrics.Bytes.Add(float64(len(records)))
	p.countRecords(n, 0)
	return RecordsResult{BaseOffset: resp.BaseOffset, LogStartOffset: resp.LogStartOffset}
}
