package sharefsm

import (
	"math"
	"slices"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// DeadLetters is how a share-partition's archived records go to the
// dead-letter topic exactly once: as idempotent batches of its own producer
// id, whose records and sequence numbers are fixed by a Raft entry (Pending)
// before they are written, so a new leader retrying the write sends the same
// batch and the partition leader recognizes it as a duplicate.
type DeadLetters struct {
	ProducerID int64 `json:"producer_id"`
	// Topic and Partition are where the batches go.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// NextSeq is the sequence number of the next batch's first record.
	NextSeq int32 `json:"next_seq"`
	// Pending is the batch being written (nil: none).
	Pending *DeadLetterBatch `json:"pending,omitempty"`
}

// DeadLetterBatch is a batch of archived records to write to the
// dead-letter topic: Offsets' records, the first with sequence Seq.
type DeadLetterBatch struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Seq       int32   `json:"seq"`
	Offsets   []int64 `json:"offsets"`
}

// DeadLetterBegin fixes a share-partition's next batch for the dead-letter
// topic (or returns the one pending): up to Max records. ProducerID is the
// partition's producer id when it has none yet, Target the dead-letter
// topic's partition its batches go to.
type DeadLetterBegin struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	ProducerID int64  `json:"producer_id"`
	Target     int32  `json:"target"`
	Max        int32  `json:"max"`
}

// DeadLetterDone reports the pending batch of first sequence Seq written.
type DeadLetterDone struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Seq       int32  `json:"seq"`
}

// DeadLettering reports whether the partition has archived records to
// write to the dead-letter topic, or a batch being written.
func (p *Partition) DeadLettering() bool {
	if p.DeadLetters != nil && p.DeadLetters.Pending != nil {
		return true
	}
	for _, r := range p.Records {
		if r.State == Archiving {
			return true
		}
	}
	return false
}

// beginDeadLetters fixes the next batch to write: up to max Archiving
// records not in a batch yet. A batch already pending is returned as it is.
func (p *Partition) beginDeadLetters(b *DeadLetterBegin, cfg shares.Config) (*DeadLetterBatch, error) {
	d := p.DeadLetters
	if d != nil && d.Pending != nil {
		return d.Pending, nil
	}
	var offs []int64
	for i, r := range p.Records {
		if r.State == Archiving && len(offs) < int(b.Max) {
			offs = append(offs, p.Start+int64(i))
		}
	}
	if len(offs) == 0 || cfg.DeadLetterTopic == "" {
		return nil, nil
	}
	if d == nil {
		if b.ProducerID <= 0 {
			return nil, protocol.InvalidRequest.Err("%s-%d: the first dead-letter batch needs a producer id", p.Topic, p.Partition)
		}
		d = &DeadLetters{ProducerID: b.ProducerID}
		p.DeadLetters = d
	}
	if d.Topic != cfg.DeadLetterTopic || d.Partition != b.Target {
		// A new topic: the producer id is new to its partition, which
		// takes any first sequence.
		d.Topic, d.Partition = cfg.DeadLetterTopic, b.Target
	}
	d.Pending = &DeadLetterBatch{Topic: d.Topic, Partition: d.Partition, Seq: d.NextSeq, Offsets: offs}
	if d.NextSeq > math.MaxInt32-int32(len(offs)) {
		d.NextSeq = 0 // sequences wrap, as Kafka's do
	} else {
		d.NextSeq += int32(len(offs))
	}
	return d.Pending, nil
}

// endDeadLetters marks the pending batch of first sequence seq written:
// its records are archived.
func (p *Partition) endDeadLetters(seq int32) error {
	d := p.DeadLetters
	if d == nil || d.Pending == nil || d.Pending.Seq != seq {
		return protocol.InvalidRequest.Err("%s-%d: no dead-letter batch of sequence %d is pending", p.Topic, p.Partition, seq)
	}
	for _, off := range d.Pending.Offsets {
		if off >= p.Start && off < p.End() {
			if r := &p.Records[off-p.Start]; r.State == Archiving {
				*r = Record{State: Archived, Count: r.Count}
				p.Archived++
			}
		}
	}
	d.Pending = nil
	p.compact()
	return nil
}

// dropDeadLetters archives the records waiting for a dead-letter topic the
// group no longer has, but those of the batch being written.
func (p *Partition) dropDeadLetters() bool {
	var pending []int64
	if p.DeadLetters != nil && p.DeadLetters.Pending != nil {
		pending = p.DeadLetters.Pending.Offsets
	}
	changed := false
	for i := range p.Records {
		if r := &p.Records[i]; r.State == Archiving && !slices.Contains(pending, p.Start+int64(i)) {
			*r = Record{State: Archived, Count: r.Count}
			p.Archived++
			changed = true
		}
	}
	p.compact()
	return changed
}
