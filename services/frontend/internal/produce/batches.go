package produce

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// ErrBadBatch: a batch of a batches body is not one whole RecordBatch v2 by
// its header (HTTP 400, CORRUPT_RECORD). Nothing of such a body is sent.
var ErrBadBatch = errors.New("bad record batch")

// CheckBatches checks each batch without decoding its records: the header is
// there, the magic is 2, the codec known, the CRC-32C matches, and the bin
// holds exactly the bytes the header's length states. It returns the records
// the batches declare, and whether any batch is transactional.
func CheckBatches(batches []frontendapi.PartitionBatch) (records int64, transactional bool, err error) {
	if len(batches) == 0 {
		return 0, false, fmt.Errorf("%w: the body holds no batch", ErrMalformed)
	}
	for i := range batches {
		b := batches[i].Batch
		// Validate checks the CRC-32C too (hardware-assisted, a few GB/s):
		// a corrupt batch is refused here with a 400 and a reason, and
		// never reaches a leader. The records stay undecoded.
		h, err := record.Validate(b)
		if err != nil {
			return 0, false, fmt.Errorf("%w %d (partition %d): %w", ErrBadBatch, i, batches[i].Partition, err)
		}
		if h.Size() != len(b) {
			return 0, false, fmt.Errorf("%w %d (partition %d): %d bytes, its header says %d (send one whole batch per entry)",
				ErrBadBatch, i, batches[i].Partition, len(b), h.Size())
		}
		records += int64(h.RecordCount)
		transactional = transactional || h.IsTransactional()
	}
	return records, transactional, nil
}

// ProduceBatches sends ready-made record batches (already checked with
// CheckBatches) to their partitions' leaders and returns one result per
// batch in body order. The batches' bytes go to the leader as they are.
// The batches of one partition are sent in body order, each only after the
// previous one was acknowledged (retries included, after a metadata
// refresh); once one fails for good, the partition's later batches are not
// sent (sending them would reorder the partition, or break an idempotent
// producer's sequence) and carry the same error code. Different partitions
// go concurrently. The error is as for Produce.
func (p *Producer) ProduceBatches(ctx context.Context, topic string, acks int8, batches []frontendapi.PartitionBatch) ([]frontendapi.BatchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	route, err := p.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	send := &batchesSend{topic: topic, acks: acks, partitions: route.Partitions(), batches: batches,
		results: make([]frontendapi.BatchResult, len(batches))}
	queues := queueBatches(batches)
	if len(queues) == 1 {
		p.produceQueue(ctx, send, &queues[0])
	} else {
		var wg sync.WaitGroup
		for qi := range queues {
			wg.Go(func() { p.produceQueue(ctx, send, &queues[qi]) })
		}
		wg.Wait()
	}
	results := send.results
	var ok, failed int
	timedOut := false
	for i := range results {
		n := batchRecords(batches[i].Batch)
		if results[i].ErrorCode == 0 {
			ok += n
			continue
		}
		failed += n
		timedOut = timedOut || results[i].ErrorCode == int16(protocol.RequestTimedOut)
	}
	p.countRecords(ok, failed)
	if timedOut {
		return results, p.timedOut()
	}
	return results, nil
}

// batchesSend is one ProduceBatches call: the batches, their topic and
// acks, the topic's partition count when it began, and the results the
// partitions' queues fill in.
type batchesSend struct {
	topic      string
	acks       int8
	partitions int
	batches    []frontendapi.PartitionBatch
	results    []frontendapi.BatchResult
}

// queueBatches groups batch positions by partition, in body order.
func queueBatches(batches []frontendapi.PartitionBatch) []group {
	var queues []group
	pos := make(map[int32]int, 4)
	for i := range batches {
		part := batches[i].Partition
		q, ok := pos[part]
		if !ok {
			q = len(queues)
			pos[part] = q
			queues = append(queues, group{partition: part})
		}
		queues[q].index = append(queues[q].index, i)
	}
	return queues
}

// produceQueue sends one partition's batches one after the other and fills
// their results; it writes only results[q.index...].
func (p *Producer) produceQueue(ctx context.Context, s *batchesSend, q *group) {
	topic, partitions, batches, results := s.topic, s.partitions, s.batches, s.results
	part := q.partition
	if int(part) >= partitions {
		err := protocol.UnknownTopicOrPartition.Err("partition %d does not exist (the topic has %d)", part, partitions)
		for _, i := range q.index {
			results[i] = errorResult(part, err)
		}
		return
	}
	for k, i := range q.index {
		// The newest view: an earlier batch's retry may have moved on to a
		// new leader.
		route, ok := p.meta.Route(topic)
		if !ok {
			p.failRest(q.index[k:], part, protocol.UnknownTopicOrPartition.Err("topic %q was deleted", topic), results)
			return
		}
		resp, err := p.sendWithRetry(ctx, partRequest{dest: dest{topic, s.acks, route}, partition: part, batch: batches[i].Batch})
		if err = p.settle(ctx, part, err); err != nil {
			results[i] = errorResult(part, err)
			p.failRest(q.index[k+1:], part, notSent(i, part, err), results)
			return
		}
		results[i] = frontendapi.BatchResult{Partition: part, BaseOffset: resp.BaseOffset}
		p.metrics.Bytes.Add(float64(len(batches[i].Batch)))
	}
}

// failRest gives the batches at positions rest the error err.
func (p *Producer) failRest(rest []int, part int32, err error, results []frontendapi.BatchResult) {
	for _, i := range rest {
		results[i] = errorResult(part, err)
	}
}

// notSent is the error of a batch left unsent because batch i of the same
// partition failed with err first: err's code (so a client retries it as it
// retries batch i), and a message saying it was not sent.
func notSent(i int, part int32, err error) error {
	return protocol.CodeOf(err).Err("not sent: batch %d of partition %d before it in this request failed: %v", i, part, err)
}

func errorResult(part int32, err error) frontendapi.BatchResult {
	return frontendapi.BatchResult{Partition: part, BaseOffset: -1, ErrorCode: int16(protocol.CodeOf(err)), Error: err.Error()}
}

// batchRecords reads a checked batch's record count from its header.
func batchRecords(b []byte) int {
	h, err := record.ParseHeader(b)
	if err != nil {
		return 0
	}
	return int(h.RecordCount)
}
