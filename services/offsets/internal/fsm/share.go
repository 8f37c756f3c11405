package fsm

import (
	"slices"
	"sort"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// RecordState is a share-partition record's state.
type RecordState uint8

// The record states. A record is in flight from its first acquisition until
// it is acknowledged or archived; the start offset moves past every record
// that is done.
const (
	// Available: released (or its lock expired), waiting for a consumer.
	Available RecordState = iota
	// Acquired by Member until LockUntilMs.
	Acquired
	// Acknowledged: accepted, or a gap.
	Acknowledged
	// Archived: rejected, or past the delivery limit.
	Archived
)

// ShareRecord is one in-flight record's state.
type ShareRecord struct {
	State RecordState
	// Count is how many times the record was delivered.
	Count       int16
	LockUntilMs int64
	Member      string
}

// done reports whether the record needs nothing more.
func (r ShareRecord) done() bool { return r.State == Acknowledged || r.State == Archived }

// acquirable reports whether a consumer may take the record at nowMs.
func (r ShareRecord) acquirable(nowMs int64) bool {
	return r.State == Available || (r.State == Acquired && r.LockUntilMs <= nowMs)
}

// SharePartition is a share group's state of one partition: Records[i] is
// the state of offset Start+i, and End() = Start+len(Records) is the first
// offset never delivered. Invariant: Records is empty or starts with a record
// that is not done.
type SharePartition struct {
	Topic     string
	Partition int32
	Start     int64
	Records   []ShareRecord
	// Running totals.
	Accepted, Archived, Deliveries int64
}

// End is the first offset never delivered.
func (p *SharePartition) End() int64 { return p.Start + int64(len(p.Records)) }

// Clone returns a deep copy.
func (p *SharePartition) Clone() *SharePartition {
	c := *p
	c.Records = slices.Clone(p.Records)
	return &c
}

// compact moves the start offset past the records that are done.
func (p *SharePartition) compact() {
	i := 0
	for i < len(p.Records) && p.Records[i].done() {
		i++
	}
	if i > 0 {
		p.Start += int64(i)
		p.Records = slices.Delete(p.Records, 0, i)
	}
}

// skipTo drops the records before offset (deleted by retention, or a
// reset): they are done without being delivered again.
func (p *SharePartition) skipTo(offset int64) {
	switch {
	case offset <= p.Start:
	case offset >= p.End():
		p.Start, p.Records = offset, p.Records[:0]
	default:
		p.Records = slices.Delete(p.Records, 0, int(offset-p.Start))
		p.Start = offset
	}
	p.compact()
}

// makeAvailable gives an acquired record back, archiving it when it has
// been delivered limit times.
func (p *SharePartition) makeAvailable(r *ShareRecord, limit int32) {
	r.Member, r.LockUntilMs = "", 0
	if int32(r.Count) >= limit {
		r.State = Archived
		p.Archived++
		return
	}
	r.State = Available
}

// acquire takes up to max records for member at nowMs, below hw and
// within maxLocks records of the start: first those released or expired,
// in offset order, then new ones from End on. It returns the acquired
// ranges.
func (p *SharePartition) acquire(member string, max int32, hw, nowMs int64, cfg shares.Config) []shares.Acquired {
	var out []shares.Acquired
	lock := nowMs + cfg.LockDurationMs
	take := func(off int64, r *ShareRecord) {
		r.State, r.Member, r.LockUntilMs = Acquired, member, lock
		r.Count++
		p.Deliveries++
		max--
		if n := len(out); n > 0 && out[n-1].LastOffset == off-1 && out[n-1].DeliveryCount == r.Count {
			out[n-1].LastOffset = off
			return
		}
		out = append(out, shares.Acquired{Topic: p.Topic, Partition: p.Partition, FirstOffset: off, LastOffset: off, DeliveryCount: r.Count})
	}
	for i := range p.Records {
		r := &p.Records[i]
		if !r.acquirable(nowMs) {
			continue
		}
		if r.State == Acquired {
			// An expired lock: the record was not acknowledged in time.
			p.makeAvailable(r, cfg.DeliveryLimit)
			if r.State == Archived {
				continue
			}
		}
		if max > 0 {
			take(p.Start+int64(i), r)
		}
	}
	for max > 0 && p.End() < hw && len(p.Records) < int(cfg.MaxRecordLocks) {
		p.Records = append(p.Records, ShareRecord{})
		take(p.End()-1, &p.Records[len(p.Records)-1])
	}
	p.compact()
	return out
}

// checkAcks checks that every offset acknowledged is acquired by member
// under a live lock, and that no offset is acknowledged twice.
func (p *SharePartition) checkAcks(member string, acks []shares.Ack, nowMs int64) error {
	seen := make([]bool, len(p.Records))
	for _, a := range acks {
		switch {
		case a.LastOffset < a.FirstOffset:
			return protocol.InvalidRequest.Err("%s-%d: acknowledgement range %d-%d is empty", p.Topic, p.Partition, a.FirstOffset, a.LastOffset)
		case a.Type > shares.AckReject:
			return protocol.InvalidRequest.Err("%s-%d: unknown acknowledgement type %d", p.Topic, p.Partition, a.Type)
		case a.FirstOffset < p.Start || a.LastOffset >= p.End():
			return protocol.InvalidRecordState.Err("%s-%d: offsets %d-%d are not all in flight (in flight: %d to %d): never acquired, or already done",
				p.Topic, p.Partition, a.FirstOffset, a.LastOffset, p.Start, p.End()-1)
		}
		for off := a.FirstOffset; off <= a.LastOffset; off++ {
			if seen[off-p.Start] {
				return protocol.InvalidRequest.Err("%s-%d: offset %d is acknowledged twice in one request", p.Topic, p.Partition, off)
			}
			seen[off-p.Start] = true
			r := p.Records[off-p.Start]
			switch {
			case r.State != Acquired:
				return protocol.InvalidRecordState.Err("%s-%d: offset %d is %s, not acquired", p.Topic, p.Partition, off, r.State)
			case r.Member != member:
				return protocol.InvalidRecordState.Err("%s-%d: offset %d is acquired by another consumer", p.Topic, p.Partition, off)
			case r.LockUntilMs <= nowMs:
				return protocol.InvalidRecordState.Err("%s-%d: the lock on offset %d expired %d ms ago", p.Topic, p.Partition, off, nowMs-r.LockUntilMs)
			}
		}
	}
	return nil
}

// ack applies acknowledgements checkAcks accepted.
func (p *SharePartition) ack(acks []shares.Ack, limit int32) {
	for _, a := range acks {
		for off := a.FirstOffset; off <= a.LastOffset; off++ {
			r := &p.Records[off-p.Start]
			switch a.Type {
			case shares.AckAccept:
				*r = ShareRecord{State: Acknowledged, Count: r.Count}
				p.Accepted++
			case shares.AckGap:
				*r = ShareRecord{State: Acknowledged, Count: r.Count}
			case shares.AckRelease:
				p.makeAvailable(r, limit)
			case shares.AckReject:
				*r = ShareRecord{State: Archived, Count: r.Count}
				p.Archived++
			}
		}
	}
	p.compact()
}

// release gives back every record member holds; it reports whether any.
func (p *SharePartition) release(member string, limit int32) bool {
	any := false
	for i := range p.Records {
		if r := &p.Records[i]; r.State == Acquired && r.Member == member {
			p.makeAvailable(r, limit)
			any = true
		}
	}
	p.compact()
	return any
}

// locked reports whether a record is acquired under a live lock at nowMs.
func (p *SharePartition) locked(nowMs int64) bool {
	for _, r := range p.Records {
		if r.State == Acquired && r.LockUntilMs > nowMs {
			return true
		}
	}
	return false
}

// String names the state.
func (s RecordState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return "unknown"
}

// ShareGroup is a share group's replicated state.
type ShareGroup struct {
	Name   string
	Config shares.Config
	// Partitions by GrantKey.
	Partitions map[string]*SharePartition
}

// clone copies the group; partitions are copied by the caller when changed.
func (g *ShareGroup) clone() *ShareGroup {
	c := *g
	c.Partitions = make(map[string]*SharePartition, len(g.Partitions))
	for k, p := range g.Partitions {
		c.Partitions[k] = p
	}
	return &c
}

// SortedPartitions returns the partitions by topic and partition.
func (g *ShareGroup) SortedPartitions() []*SharePartition {
	out := make([]*SharePartition, 0, len(g.Partitions))
	for _, p := range g.Partitions {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Members returns the consumers holding records under a live lock.
func (g *ShareGroup) Members(nowMs int64) []string {
	seen := map[string]bool{}
	for _, p := range g.Partitions {
		for _, r := range p.Records {
			if r.State == Acquired && r.LockUntilMs > nowMs {
				seen[r.Member] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// State describes a partition at nowMs with its high watermark.
func (p *SharePartition) State(hw, nowMs int64) shares.PartitionState {
	s := shares.PartitionState{Topic: p.Topic, Partition: p.Partition, StartOffset: p.Start, EndOffset: p.End(), HighWatermark: hw,
		Accepted: p.Accepted, Archived: p.Archived, Deliveries: p.Deliveries}
	for _, r := range p.Records {
		switch {
		case r.State == Acquired && r.LockUntilMs > nowMs:
			s.Acquired++
		case r.acquirable(nowMs):
			s.Available++
		}
		if !r.done() {
			s.Lag++
		}
	}
	if hw > p.End() {
		s.Lag += hw - p.End()
	}
	return s
}

// Share returns a share group's state (ok false when there is none). The
// state is shared: the caller must not change it.
func (f *FSM) Share(name string) (*ShareGroup, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g, ok := f.shares[name]
	return g, ok
}

// ShareNames lists the share groups.
func (f *FSM) ShareNames() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.shares))
	for name := range f.shares {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
