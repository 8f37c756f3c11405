// Package txnjoin brings a transactional produce request's partitions into
// its producer's transaction before its batches go to the partitions'
// leaders, for the Kafka listener (Produce with a transactional id) and the
// HTTP API (a batches body with transactional_id) alike.
//
// Under transaction version 2 a partition joins the transaction by its
// first produce: the frontend adds it at the coordinator. Under version 1
// the producer added it itself, and the frontend checks that it is in the
// open transaction (KIP-890 part 1). Either way a late write of an ended
// transaction cannot open a transaction on a partition that nothing would
// end.
package txnjoin

import (
	"context"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/txns"
)

// Request gathers a transactional produce request's partitions and its
// producer, which every batch must carry.
type Request struct {
	add txns.AddPartitionsRequest
}

// NewRequest starts a request's check; v2 is transaction version 2.
func NewRequest(v2 bool) *Request {
	return &Request{add: txns.AddPartitionsRequest{Producer: txns.Producer{ProducerID: -1, ProducerEpoch: -1}, VerifyOnly: !v2, V2: v2}}
}

// Add takes one partition's batch. It answers CORRUPT_RECORD for a batch
// without a readable header, and INVALID_RECORD for one that is not
// transactional or whose producer is not the request's.
func (r *Request) Add(topic string, partition int32, batch []byte) error {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return protocol.CorruptRecord.Err("partition %s-%d: %v", topic, partition, err)
	}
	if !h.IsTransactional() || h.ProducerID < 0 {
		return protocol.InvalidRecord.Err("partition %s-%d: a transactional request holds a batch that is not transactional", topic, partition)
	}
	if r.add.ProducerID >= 0 && (h.ProducerID != r.add.ProducerID || h.ProducerEpoch != r.add.ProducerEpoch) {
		return protocol.InvalidRecord.Err("partition %s-%d: batches of producers %d/%d and %d/%d in one transactional request",
			topic, partition, r.add.ProducerID, r.add.ProducerEpoch, h.ProducerID, h.ProducerEpoch)
	}
	r.add.ProducerID, r.add.ProducerEpoch = h.ProducerID, h.ProducerEpoch
	tp := groups.TP{Topic: topic, Partition: partition}
	if n := len(r.add.Partitions); n == 0 || r.add.Partitions[n-1] != tp {
		r.add.Partitions = append(r.add.Partitions, tp)
	}
	return nil
}

// Joiner adds (version 2) or verifies (version 1) the partitions of
// transactional produce requests at the coordinator. Under version 2 every
// transaction has its own epoch, so (producer id, epoch) names one
// transaction: the Joiner remembers the partitions it added to each
// transactional id's current one and asks the coordinator only for a
// partition's first produce of a transaction. Once the transaction ends,
// or the coordinator aborts it, the partitions refuse that epoch
// themselves (its markers carry the next one). Version 1 transactions
// share an epoch and are never remembered. It is safe for concurrent use.
type Joiner struct {
	mu  sync.Mutex
	ids map[string]*joined
}

type joined struct {
	producer txns.Producer
	parts    map[groups.TP]struct{}
}

// maxJoined bounds the transactional ids remembered; past it the memory is
// dropped (each id then asks once more).
const maxJoined = 100000

// Join brings r's partitions into id's transaction through c, waiting
// while the producer's previous transaction completes (WhileConcurrent).
// A refusal for a fenced producer is answered as what a produce request's
// producer understands as fenced: INVALID_PRODUCER_EPOCH.
func (j *Joiner) Join(ctx context.Context, c *txns.Client, id string, r *Request) error {
	add := r.add
	if add.V2 {
		add.Partitions = j.missing(id, add.Producer, add.Partitions)
	}
	if len(add.Partitions) == 0 {
		return nil
	}
	err := WhileConcurrent(ctx, func() error { return c.AddPartitions(ctx, id, add) })
	switch protocol.CodeOf(err) {
	case protocol.None:
		if add.V2 {
			j.added(id, add.Producer, add.Partitions)
		}
		return nil
	case protocol.ProducerFenced, protocol.InvalidProducerIDMapping:
		return protocol.InvalidProducerEpoch.Err("%v", err)
	}
	return err
}

// missing returns the partitions not yet added to id's transaction at p.
func (j *Joiner) missing(id string, p txns.Producer, parts []groups.TP) []groups.TP {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.ids[id]
	if t == nil || t.producer != p {
		return parts
	}
	var out []groups.TP
	for _, tp := range parts {
		if _, ok := t.parts[tp]; !ok {
			out = append(out, tp)
		}
	}
	return out
}

// added records partitions the coordinator added to id's transaction at p.
func (j *Joiner) added(id string, p txns.Producer, parts []groups.TP) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ids == nil || len(j.ids) >= maxJoined {
		j.ids = map[string]*joined{}
	}
	t := j.ids[id]
	if t == nil || t.producer != p {
		t = &joined{producer: p, parts: map[groups.TP]struct{}{}}
		j.ids[id] = t
	}
	for _, tp := range parts {
		t.parts[tp] = struct{}{}
	}
}

// WhileConcurrent runs f again while the coordinator answers
// CONCURRENT_TRANSACTIONS (the producer's previous transaction is still
// writing its markers, a few milliseconds), backing off from 5 ms to 100
// ms, until ctx ends: under transaction version 2 a producer starts its
// next transaction right after EndTxn, and Kafka's brokers likewise wait
// for the coordinator rather than send the producer into its own, much
// longer, retry backoff.
func WhileConcurrent(ctx context.Context, f func() error) error {
	backoff := 5 * time.Millisecond
	for {
		err := f()
		if protocol.CodeOf(err) != protocol.ConcurrentTransactions {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}
