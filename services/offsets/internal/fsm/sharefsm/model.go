package sharefsm

import (
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/sluicemq/sluice/libs/groups"
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
	// Archiving: archived, waiting to be written to the group's
	// dead-letter topic (Reason says why); it counts as archived once
	// written.
	Archiving
)

// Record is one in-flight record's state. It holds no pointer (its
// member is an index into its partition's Members, the reason an archiving
// record was archived is in its partition's Reasons), so a partition's
// window of records is copied and scanned as plain memory.
type Record struct {
	State RecordState
	// Count is how many times the record was delivered.
	Count int16
	// member is 1 + the index in the partition's Members of the member
	// holding an Acquired record (0: none); Partition.MemberOf reads it.
	member      int32
	LockUntilMs int64
	// NotBeforeMs is when an available record deferred by a reader
	// (shares.AckDefer) may be acquired again.
	NotBeforeMs int64
}

// done reports whether the record needs nothing more.
func (r Record) done() bool { return r.State == Acknowledged || r.State == Archived }

// acquirable reports whether a consumer may take the record at nowMs.
func (r Record) acquirable(nowMs int64) bool {
	return (r.State == Available && r.NotBeforeMs <= nowMs) || (r.State == Acquired && r.LockUntilMs <= nowMs)
}

// Partition is a share group's state of one partition: Records[i] is
// the state of offset Start+i, and End() = Start+len(Records) is the first
// offset never delivered. Invariant: Records is empty or starts with a record
// that is not done.
type Partition struct {
	Topic     string
	Partition int32
	Start     int64
	Records   []Record
	// Members names the members records were acquired by (Record's
	// member indexes it); names no record refers to are dropped when it
	// grows past maxMemberNames. Copies share it up to its length.
	Members []string
	// Reasons holds, by offset, why an Archiving record was archived.
	Reasons map[int64]string
	// Running totals.
	Accepted, Archived, Deliveries int64
	// DeadLetters is the partition's writer to the dead-letter topic (nil
	// before its first record to write).
	DeadLetters *DeadLetters
}

// End is the first offset never delivered.
func (p *Partition) End() int64 { return p.Start + int64(len(p.Records)) }

// maxMemberNames is how many member names a partition keeps before it
// drops those no record refers to.
const maxMemberNames = 64

// MemberOf returns the member holding r ("" for none).
func (p *Partition) MemberOf(r Record) string {
	if r.member == 0 {
		return ""
	}
	return p.Members[r.member-1]
}

// ReasonOf returns why the record at off was archived ("" when not told).
func (p *Partition) ReasonOf(off int64) string { return p.Reasons[off] }

// memberRef returns name's reference for a record, adding it to Members.
// It is called on a partition this entry may change (a copy).
func (p *Partition) memberRef(name string) int32 {
	if i := slices.Index(p.Members, name); i >= 0 {
		return int32(i + 1)
	}
	if len(p.Members) >= maxMemberNames {
		p.dropUnusedMembers()
	}
	p.Members = append(p.Members, name)
	return int32(len(p.Members))
}

// lookupMember returns name's reference, 0 when no record can hold it.
func (p *Partition) lookupMember(name string) int32 {
	return int32(slices.Index(p.Members, name) + 1)
}

// dropUnusedMembers keeps the names records refer to, in their order, and
// renumbers the records.
func (p *Partition) dropUnusedMembers() {
	renum := make([]int32, len(p.Members)+1)
	var kept []string
	for i := range p.Records {
		r := &p.Records[i]
		if r.member == 0 {
			continue
		}
		if renum[r.member] == 0 {
			kept = append(kept, p.Members[r.member-1])
			renum[r.member] = int32(len(kept))
		}
		r.member = renum[r.member]
	}
	p.Members = kept
}

// setReason notes why the record at off was archived.
func (p *Partition) setReason(off int64, reason string) {
	if p.Reasons == nil {
		p.Reasons = map[int64]string{}
	}
	p.Reasons[off] = reason
}

// Clone returns a deep copy.
func (p *Partition) Clone() *Partition {
	c := *p
	c.Records = slices.Clone(p.Records)
	c.Members = slices.Clip(p.Members) // an append to the copy's reallocates
	if p.Reasons != nil {
		c.Reasons = maps.Clone(p.Reasons)
	}
	if p.DeadLetters != nil {
		d := *p.DeadLetters
		if d.Pending != nil {
			b := *d.Pending
			b.Offsets = slices.Clone(b.Offsets)
			d.Pending = &b
		}
		c.DeadLetters = &d
	}
	return &c
}

// compact moves the start offset past the records that are done.
func (p *Partition) compact() {
	i := 0
	for i < len(p.Records) && p.Records[i].done() {
		i++
	}
	if i > 0 {
		p.Start += int64(i)
		p.Records = slices.Delete(p.Records, 0, i)
	}
	for off := range p.Reasons {
		if off < p.Start {
			delete(p.Reasons, off)
		}
	}
}

// skipTo drops the records before offset (deleted by retention, or a
// reset): they are done without being delivered again.
func (p *Partition) skipTo(offset int64) {
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

// makeAvailable gives the acquired record r at off back, archiving it when
// it has been delivered the limit's number of times.
func (p *Partition) makeAvailable(off int64, r *Record, cfg shares.Config) {
	r.member, r.LockUntilMs, r.NotBeforeMs = 0, 0, 0
	if int32(r.Count) >= cfg.DeliveryLimit {
		p.archive(off, r, "delivery count limit "+strconv.Itoa(int(cfg.DeliveryLimit))+" reached", cfg)
		return
	}
	r.State = Available
}

// archive archives the record r at off: at once, or once written to the
// group's dead-letter topic when it has one.
func (p *Partition) archive(off int64, r *Record, reason string, cfg shares.Config) {
	if cfg.DeadLetterTopic != "" {
		*r = Record{State: Archiving, Count: r.Count}
		p.setReason(off, reason)
		return
	}
	*r = Record{State: Archived, Count: r.Count}
	p.Archived++
}

// acquire takes up to max records for member at nowMs, below hw and
// within maxLocks records of the start: first those released or expired,
// in offset order, then new ones from End on. It returns the acquired
// ranges, and whether it changed the state: an expired lock at the
// delivery limit archives its record even when nothing is taken.
func (p *Partition) acquire(member string, max int32, hw, nowMs int64, cfg shares.Config) ([]shares.Acquired, bool) {
	var out []shares.Acquired
	changed := false
	lock := nowMs + cfg.LockDurationMs
	ref := int32(0) // member's reference, once a record is taken
	take := func(off int64, r *Record) {
		changed = true
		if ref == 0 {
			ref = p.memberRef(member)
		}
		r.State, r.member, r.LockUntilMs = Acquired, ref, lock
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
			p.makeAvailable(p.Start+int64(i), r, cfg)
			changed = true
			if r.State != Available {
				continue
			}
		}
		if max > 0 {
			take(p.Start+int64(i), r)
		}
	}
	for max > 0 && p.End() < hw && len(p.Records) < int(cfg.MaxRecordLocks) {
		p.Records = append(p.Records, Record{})
		take(p.End()-1, &p.Records[len(p.Records)-1])
	}
	p.compact()
	return out, changed
}

// wouldAcquire reports whether skipTo(logStart) and then acquire(max, hw,
// nowMs) would change p: the log start passed its start, a lock expired
// (which makes its record available or archives it), or, with max above 0,
// a record waits or the log holds records past End that the window has
// room for. An acquisition visits every partition of the topic, and one
// that would change nothing is not copied.
func (p *Partition) wouldAcquire(max int32, logStart, hw, nowMs int64, cfg shares.Config) bool {
	if logStart > p.Start || max > 0 && p.End() < hw && len(p.Records) < int(cfg.MaxRecordLocks) {
		return true
	}
	for i := range p.Records {
		r := &p.Records[i]
		if r.State == Acquired && r.LockUntilMs <= nowMs || max > 0 && r.acquirable(nowMs) {
			return true
		}
	}
	return false
}

// checkAcks checks that every offset acknowledged is acquired by member
// under a live lock, and that no offset is acknowledged twice.
func (p *Partition) checkAcks(member string, acks []shares.Ack, nowMs int64) error {
	seen := make([]bool, len(p.Records))
	for _, a := range acks {
		switch {
		case a.LastOffset < a.FirstOffset:
			return protocol.InvalidRequest.Err("%s-%d: acknowledgement range %d-%d is empty", p.Topic, p.Partition, a.FirstOffset, a.LastOffset)
		case !a.Type.Valid():
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
			case p.MemberOf(r) != member:
				return protocol.InvalidRecordState.Err("%s-%d: offset %d is acquired by another consumer", p.Topic, p.Partition, off)
			case r.LockUntilMs <= nowMs:
				return protocol.InvalidRecordState.Err("%s-%d: the lock on offset %d expired %d ms ago", p.Topic, p.Partition, off, nowMs-r.LockUntilMs)
			}
		}
	}
	return nil
}

// ack applies acknowledgements checkAcks accepted, at nowMs.
func (p *Partition) ack(acks []shares.Ack, cfg shares.Config, nowMs int64) {
	for _, a := range acks {
		for off := a.FirstOffset; off <= a.LastOffset; off++ {
			r := &p.Records[off-p.Start]
			switch a.Type {
			case shares.AckAccept:
				*r = Record{State: Acknowledged, Count: r.Count}
				p.Accepted++
			case shares.AckGap:
				*r = Record{State: Acknowledged, Count: r.Count}
			case shares.AckRelease:
				p.makeAvailable(off, r, cfg)
			case shares.AckRenew:
				r.LockUntilMs = nowMs + cfg.LockDurationMs
			case shares.AckDefer:
				// Read before its delivery time: it waits, and this
				// delivery does not count.
				*r = Record{State: Available, Count: r.Count - 1, NotBeforeMs: a.NotBeforeMs}
				p.Deliveries--
			case shares.AckReject:
				reason := a.Reason
				if reason == "" {
					reason = "rejected by the consumer"
				}
				p.archive(off, r, reason, cfg)
			}
		}
	}
	p.compact()
}

// release gives back every record member holds; it reports whether any.
func (p *Partition) release(member string, cfg shares.Config) bool {
	any := false
	ref := p.lookupMember(member)
	if ref == 0 {
		return false
	}
	for i := range p.Records {
		if r := &p.Records[i]; r.State == Acquired && r.member == ref {
			p.makeAvailable(p.Start+int64(i), r, cfg)
			any = true
		}
	}
	p.compact()
	return any
}

// busy says why the partition's state may not be dropped at nowMs: a
// record under a live lock, or one waiting for the dead-letter topic ("":
// neither).
func (p *Partition) busy(nowMs int64) string {
	for _, r := range p.Records {
		switch {
		case r.State == Acquired && r.LockUntilMs > nowMs:
			return "records under lock"
		case r.State == Archiving:
			return "records waiting for the dead-letter topic"
		}
	}
	return ""
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
	case Archiving:
		return "archiving"
	}
	return "unknown"
}

// Group is a share group's replicated state.
type Group struct {
	Name   string
	Config shares.Config
	// Partitions by partkey.String.
	Partitions map[string]*Partition
}

// clone copies the group; partitions are copied by the caller when changed.
func (g *Group) clone() *Group {
	c := *g
	c.Partitions = make(map[string]*Partition, len(g.Partitions))
	for k, p := range g.Partitions {
		c.Partitions[k] = p
	}
	return &c
}

// SortedPartitions returns the partitions by topic and partition.
func (g *Group) SortedPartitions() []*Partition {
	out := make([]*Partition, 0, len(g.Partitions))
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
func (g *Group) Members(nowMs int64) []string {
	seen := map[string]bool{}
	for _, p := range g.Partitions {
		for _, r := range p.Records {
			if r.State == Acquired && r.LockUntilMs > nowMs {
				seen[p.MemberOf(r)] = true
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
func (p *Partition) State(hw, nowMs int64) shares.PartitionState {
	s := shares.PartitionState{Topic: p.Topic, Partition: p.Partition, StartOffset: p.Start, EndOffset: p.End(), HighWatermark: hw,
		Accepted: p.Accepted, Archived: p.Archived, Deliveries: p.Deliveries}
	for _, r := range p.Records {
		switch {
		case r.State == Acquired && r.LockUntilMs > nowMs:
			s.Acquired++
		case r.acquirable(nowMs):
			s.Available++
		case r.State == Available:
			s.Delayed++
		case r.State == Archiving:
			s.DeadLetterPending++
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

// TP is the partition's topic and number.
func (p *Partition) TP() groups.TP { return groups.TP{Topic: p.Topic, Partition: p.Partition} }
