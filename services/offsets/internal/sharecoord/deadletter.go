package sharecoord

import (
	"context"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// DeadLetterIO is what the dead-letter writer needs of the cluster.
type DeadLetterIO interface {
	// ReadRecords returns the records at the given offsets of a
	// partition; an offset that holds none (deleted by retention,
	// compacted) is missing from the answer.
	ReadRecords(ctx context.Context, topic string, partition int32, offsets []int64) (map[int64]record.Record, error)
	// ProduceBatch appends a batch with acks=all.
	ProduceBatch(ctx context.Context, topic string, partition int32, batch []byte) error
	// NewProducerID allocates a producer id.
	NewProducerID(ctx context.Context) (int64, error)
}

// deadLetterBatch is the most records one dead-letter batch carries.
const deadLetterBatch = 500

// writeDeadLetters runs on the leader every DeadLetterInterval: for every
// share-partition with archived records waiting for the dead-letter topic it
// fixes a batch in the Raft log, writes it, and reports it written. A batch
// fixed by an earlier leader is written again as it was, with the same
// producer id and sequence numbers, so the partition leader drops it as a
// duplicate if it was written before: each record reaches the topic once.
func (s *Coordinator) writeDeadLetters() {
	if s.dlt == nil || !s.co.Ready() {
		return
	}
	for _, name := range s.co.FSM().ShareNames() {
		g, ok := s.co.FSM().Share(name)
		if !ok || g.Config.DeadLetterTopic == "" && !pendingDeadLetters(g) {
			continue // without a dead-letter topic, archived records are archived at once
		}
		for _, p := range g.SortedPartitions() {
			if !p.DeadLettering() {
				continue
			}
			ctx, cancel := context.WithTimeout(s.base, 30*time.Second)
			err := s.deadLetter(ctx, g, p)
			cancel()
			if err != nil && s.base.Err() == nil {
				s.co.Logger().Warn("writing archived records to the dead-letter topic failed; retrying", "group", name,
					"partition", p.Topic+"-"+strconv.Itoa(int(p.Partition)), "dead_letter_topic", g.Config.DeadLetterTopic, "err", err)
			}
		}
	}
}

// pendingDeadLetters reports whether a partition of g has a dead-letter
// batch fixed and not reported written.
func pendingDeadLetters(g *sharefsm.Group) bool {
	for _, p := range g.Partitions {
		if p.DeadLetters != nil && p.DeadLetters.Pending != nil {
			return true
		}
	}
	return false
}

// deadLetter writes one batch of a share-partition's archived records.
func (s *Coordinator) deadLetter(ctx context.Context, g *sharefsm.Group, p *sharefsm.Partition) error {
	b := &sharefsm.DeadLetterBegin{Topic: p.Topic, Partition: p.Partition, Max: deadLetterBatch}
	if p.DeadLetters == nil || p.DeadLetters.Pending == nil {
		topic := g.Config.DeadLetterTopic
		if topic == "" {
			return nil
		}
		counts, _ := s.co.PartitionCounts()
		n, ok := counts[topic]
		if !ok || n <= 0 {
			return protocol.UnknownTopicOrPartition.Err("dead-letter topic %q does not exist", topic)
		}
		// Each source partition writes to one partition of the topic, so
		// its dead letters keep their order.
		b.Target = p.Partition % n
		if d := p.DeadLetters; d != nil && d.Topic == topic && d.Partition < n {
			b.Target = d.Partition
		}
		if p.DeadLetters == nil {
			id, err := s.dlt.NewProducerID(ctx)
			if err != nil {
				return err
			}
			b.ProducerID = id
		}
	}
	out, err := s.propose(ctx, sharefsm.Command{Group: g.Name, DeadLetterBegin: b})
	if err != nil || out.DeadLetter == nil {
		return err
	}
	batch := out.DeadLetter
	// The batch's records as the state holds them (count and reason): the
	// state a retry sees is the same until the batch is reported written.
	cur, ok := s.co.FSM().Share(g.Name)
	if !ok {
		return nil
	}
	sp := cur.Partitions[partkey.String(p.TP())]
	if sp == nil || sp.DeadLetters == nil {
		return nil
	}
	recs, err := s.dlt.ReadRecords(ctx, p.Topic, p.Partition, batch.Offsets)
	if err != nil {
		return err
	}
	bld := record.NewBuilder(record.CodecNone)
	bld.SetProducer(sp.DeadLetters.ProducerID, 0, batch.Seq)
	for _, off := range batch.Offsets {
		reason, count := "", int16(0)
		if off >= sp.Start && off < sp.End() {
			reason, count = sp.ReasonOf(off), sp.Records[off-sp.Start].Count
		}
		rec, found := recs[off]
		if !found {
			reason += " (the record was no longer in the log)"
		}
		rec.Headers = append(rec.Headers[:len(rec.Headers):len(rec.Headers)],
			shares.DeadLetterHeaders(p.Topic, p.Partition, off, int(count), g.Name, reason)...)
		bld.Append(rec)
	}
	bytes, err := bld.Build()
	if err != nil {
		return err
	}
	err = s.dlt.ProduceBatch(ctx, batch.Topic, batch.Partition, bytes)
	if protocol.CodeOf(err) == protocol.DuplicateSequenceNumber {
		err = nil // written by an earlier attempt, too long ago to answer its offsets
	}
	if err != nil {
		return err
	}
	_, err = s.propose(ctx, sharefsm.Command{Group: g.Name, DeadLetterDone: &sharefsm.DeadLetterDone{Topic: p.Topic, Partition: p.Partition, Seq: batch.Seq}})
	return err
}
