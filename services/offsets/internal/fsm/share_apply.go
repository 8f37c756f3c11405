package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// bucketShares holds one sub-bucket per share group: its configuration
// under keyShareConfig and each partition's state under key(topic,
// partition).
var (
	bucketShares   = []byte("shares")
	keyShareConfig = []byte("config") // never a partition key: those have a NUL 5 bytes from the end
)

// Share is one operation on a share group; exactly one of its parts is
// set. NowMs is the proposer's clock: lock expiry is decided by it, so
// every replica decides alike.
type Share struct {
	Group   string             `json:"group"`
	NowMs   int64              `json:"now_ms"`
	Config  *shares.Config     `json:"config,omitempty"`
	Acquire *ShareAcquire      `json:"acquire,omitempty"`
	Ack     *shares.AckRequest `json:"ack,omitempty"`
	Leave   string             `json:"leave,omitempty"`
	Reset   *ShareReset        `json:"reset,omitempty"`
	Delete  bool               `json:"delete,omitempty"`
	// The dead-letter writer's steps (coordinator/deadletter.go).
	DeadLetterBegin *DeadLetterBegin `json:"dead_letter_begin,omitempty"`
	DeadLetterDone  *DeadLetterDone  `json:"dead_letter_done,omitempty"`
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

// ShareAcquire acquires up to Max records of a topic for a consumer, from
// Partitions in their order. The proposer gives each partition's log start
// offset and high watermark as it last saw them.
type ShareAcquire struct {
	MemberID   string        `json:"member_id"`
	Topic      string        `json:"topic"`
	Max        int32         `json:"max"`
	Partitions []ShareBounds `json:"partitions"`
}

// ShareReset moves partitions of a topic to new start offsets or, with
// Drop, removes the group's state of the topic's partitions (Kafka's
// DeleteShareGroupOffsets): the next acquisition starts them again as the
// group's share.auto.offset.reset says.
type ShareReset struct {
	Topic      string                  `json:"topic"`
	Partitions []shares.PartitionReset `json:"partitions"`
	Drop       bool                    `json:"drop,omitempty"`
}

// ShareBounds is a partition's log start offset and high watermark.
type ShareBounds struct {
	Partition     int32 `json:"partition"`
	LogStart      int64 `json:"log_start"`
	HighWatermark int64 `json:"high_watermark"`
}

// ShareResult is a share operation's answer.
type ShareResult struct {
	Acquire *shares.AcquireResponse
	Acks    []shares.AckResult
	// LockDurationMs is the group's lock duration (with Acks).
	LockDurationMs int64
	// DeadLetter is the batch DeadLetterBegin fixed (nil: nothing to write).
	DeadLetter *DeadLetterBatch
}

// validate checks the parts that do not depend on the state.
func (c *Share) validate() error {
	if err := groups.ValidateGroupID(c.Group); err != nil {
		return protocol.InvalidGroupID.Err("%v", err)
	}
	if err := c.oneOperation(); err != nil {
		return err
	}
	switch {
	case c.Config != nil:
		if err := c.Config.Validate(); err != nil {
			return protocol.InvalidConfig.Err("%v", err)
		}
	case c.Acquire != nil || c.Ack != nil:
		return c.validateTake()
	case c.Reset != nil:
		return c.Reset.validate()
	}
	return nil
}

// oneOperation checks that exactly one part is set (or an acquisition
// with its member's acknowledgements, which ride on it).
func (c *Share) oneOperation() error {
	n := 0
	for _, set := range []bool{c.Config != nil, c.Acquire != nil, c.Ack != nil, c.Leave != "", c.Reset != nil, c.Delete,
		c.DeadLetterBegin != nil, c.DeadLetterDone != nil} {
		if set {
			n++
		}
	}
	if c.Ack != nil && c.Acquire != nil {
		n-- // a consumer's acknowledgements ride on its next acquisition
		if c.Ack.MemberID != c.Acquire.MemberID {
			return protocol.InvalidRequest.Err("acknowledgements of member %q with an acquisition of member %q", c.Ack.MemberID, c.Acquire.MemberID)
		}
	}
	if n != 1 {
		return protocol.InvalidRequest.Err("a share operation has %d parts; it needs exactly one (or an acquisition and acknowledgements)", n)
	}
	return nil
}

// validateTake checks an acquisition and acknowledgements: a member each,
// a valid topic to acquire from.
func (c *Share) validateTake() error {
	if c.Acquire != nil {
		if c.Acquire.MemberID == "" {
			return protocol.UnknownMemberID.Err("an acquisition needs a member id")
		}
		if err := cluster.ValidateTopicName(c.Acquire.Topic); err != nil {
			return protocol.InvalidTopic.Err("%v", err)
		}
	}
	if c.Ack != nil && c.Ack.MemberID == "" {
		return protocol.UnknownMemberID.Err("an acknowledgement needs a member id")
	}
	return nil
}

// validate checks a reset: a valid topic, offsets not negative, none when
// it drops the topic's state.
func (r *ShareReset) validate() error {
	if err := cluster.ValidateTopicName(r.Topic); err != nil {
		return protocol.InvalidTopic.Err("%v", err)
	}
	if r.Drop && len(r.Partitions) > 0 {
		return protocol.InvalidRequest.Err("a reset that drops %s's state names no offsets", r.Topic)
	}
	for _, p := range r.Partitions {
		if p.Partition < 0 || p.Offset < 0 {
			return protocol.InvalidRequest.Err("%s-%d: negative partition or offset %d", r.Topic, p.Partition, p.Offset)
		}
	}
	return nil
}

// applyShare applies a share operation. Acknowledgements are all or none per
// partition; every other operation all or none.
func (f *FSM) applyShare(tx *bolt.Tx, st *stage, c *Share, res *Result) error {
	if res.Err = c.validate(); res.Err != nil {
		return nil
	}
	cur, refusal, err := f.shareGroupFor(tx, st, c)
	if refusal != nil || err != nil {
		res.Err = refusal
		return err
	}
	if c.Delete {
		res.Err, err = deleteShareGroup(tx, st, c, cur)
		return err
	}
	g := cur.clone()
	var changed []*SharePartition
	out := &ShareResult{}
	switch {
	case c.Config != nil:
		changed, err = configureShareGroup(tx, g, *c.Config)
	case c.DeadLetterBegin != nil, c.DeadLetterDone != nil:
		changed, refusal = stepDeadLetters(g, c, out)
	case c.Acquire != nil || c.Ack != nil:
		if c.Ack != nil {
			out.Acks, changed = ackShare(g, c.Group, c.Ack, c.NowMs, st.private)
			out.LockDurationMs = g.Config.LockDurationMs
		}
		if c.Acquire != nil {
			out.Acquire, changed = acquireShare(g, c.Acquire, c.NowMs, st.private, changed)
		}
	case c.Leave != "":
		changed = leaveShareGroup(g, c.Leave)
	case c.Reset != nil:
		changed, refusal, err = resetShareGroup(tx, g, c)
	}
	if refusal != nil || err != nil {
		res.Err = refusal
		return err
	}
	res.Share = out
	st.shares[c.Group] = g
	for _, p := range changed {
		st.dirty[p] = c.Group
	}
	return nil
}

// shareGroupFor is the group a share operation acts on, as of the
// transaction in progress: a configuration or a first acquisition creates
// it (an acquisition stores its configuration), other operations on a group
// that does not exist are refused, as is a share operation on a consumer
// group's name.
func (f *FSM) shareGroupFor(tx *bolt.Tx, st *stage, c *Share) (g *ShareGroup, refusal, err error) {
	if g = f.shareLocked(st, c.Group); g != nil {
		return g, nil, nil
	}
	if c.Config == nil && c.Acquire == nil {
		return nil, protocol.GroupIDNotFound.Err("no share group %q", c.Group), nil
	}
	if f.groupLocked(st.groups, c.Group) != nil {
		return nil, protocol.InconsistentGroupProtocol.Err("%s is a consumer group, not a share group", c.Group), nil
	}
	g = &ShareGroup{Name: c.Group, Config: shares.DefaultConfig(), Partitions: map[string]*SharePartition{}}
	if c.Acquire != nil {
		if err := putShareConfig(tx, g); err != nil {
			return nil, nil, err
		}
	}
	return g, nil, nil
}

// deleteShareGroup removes a group none of whose records is acquired or
// waiting to be dead-lettered.
func deleteShareGroup(tx *bolt.Tx, st *stage, c *Share, g *ShareGroup) (refusal, err error) {
	for _, p := range g.Partitions {
		if why := p.busy(c.NowMs); why != "" {
			return protocol.NonEmptyGroup.Err("share group %s has %s (%s-%d); its consumers must stop first", c.Group, why, p.Topic, p.Partition), nil
		}
	}
	st.shares[c.Group] = nil
	err = tx.Bucket(bucketShares).DeleteBucket([]byte(c.Group))
	if errors.Is(err, berrors.ErrBucketNotFound) {
		err = nil
	}
	return nil, err
}

// configureShareGroup sets g's configuration; without a dead-letter topic
// the records waiting for one are archived instead.
func configureShareGroup(tx *bolt.Tx, g *ShareGroup, cfg shares.Config) ([]*SharePartition, error) {
	var changed []*SharePartition
	g.Config = cfg
	if g.Config.DeadLetterTopic == "" {
		for k, p := range g.Partitions {
			if q := p.Clone(); q.dropDeadLetters() {
				g.Partitions[k] = q
				changed = append(changed, q)
			}
		}
	}
	return changed, putShareConfig(tx, g)
}

// stepDeadLetters begins or ends a partition's dead-letter write.
func stepDeadLetters(g *ShareGroup, c *Share, out *ShareResult) ([]*SharePartition, error) {
	topic, part := "", int32(0)
	if b := c.DeadLetterBegin; b != nil {
		topic, part = b.Topic, b.Partition
	} else {
		topic, part = c.DeadLetterDone.Topic, c.DeadLetterDone.Partition
	}
	k := GrantKey(groups.TP{Topic: topic, Partition: part})
	p := g.Partitions[k]
	if p == nil {
		return nil, protocol.UnknownTopicOrPartition.Err("share group %s has no state of %s", c.Group, k)
	}
	p = p.Clone()
	var err error
	if c.DeadLetterBegin != nil {
		out.DeadLetter, err = p.beginDeadLetters(c.DeadLetterBegin, g.Config)
	} else {
		err = p.endDeadLetters(c.DeadLetterDone.Seq)
	}
	if err != nil {
		return nil, err
	}
	g.Partitions[k] = p
	return []*SharePartition{p}, nil
}

// leaveShareGroup releases what a leaving member holds.
func leaveShareGroup(g *ShareGroup, member string) []*SharePartition {
	var changed []*SharePartition
	for k, p := range g.Partitions {
		if p.lookupMember(member) == 0 {
			continue // it holds nothing here
		}
		q := p.Clone()
		if q.release(member, g.Config) {
			g.Partitions[k] = q
			changed = append(changed, q)
		}
	}
	return changed
}

// resetShareGroup moves a topic's partitions to new start offsets (Drop:
// forgets the topic's state first), refused while records of the topic
// are acquired; the counters and the dead-letter producer's sequence go on.
func resetShareGroup(tx *bolt.Tx, g *ShareGroup, c *Share) (changed []*SharePartition, refusal, err error) {
	r := c.Reset
	for _, p := range g.Partitions {
		if why := p.busy(c.NowMs); p.Topic == r.Topic && why != "" {
			return nil, protocol.NonEmptyGroup.Err("share group %s has %s of %s (partition %d); its consumers must stop first", c.Group, why, p.Topic, p.Partition), nil
		}
	}
	if r.Drop {
		b := tx.Bucket(bucketShares).Bucket([]byte(c.Group))
		for k, p := range g.Partitions {
			if p.Topic != r.Topic {
				continue
			}
			delete(g.Partitions, k)
			if b != nil {
				if err := b.Delete(key(p.Topic, p.Partition)); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	for _, rp := range r.Partitions {
		k := GrantKey(groups.TP{Topic: r.Topic, Partition: rp.Partition})
		p := &SharePartition{Topic: r.Topic, Partition: rp.Partition, Start: rp.Offset}
		if old := g.Partitions[k]; old != nil {
			p.Accepted, p.Archived, p.Deliveries = old.Accepted, old.Archived, old.Deliveries
			if old.DeadLetters != nil {
				d := *old.DeadLetters // the producer's sequence goes on
				p.DeadLetters = &d
			}
		}
		g.Partitions[k] = p
		changed = append(changed, p)
	}
	return changed, nil, nil
}

// shareLocked returns a share group's state as of the transaction in
// progress.
func (f *FSM) shareLocked(st *stage, name string) *ShareGroup {
	if g, ok := st.shares[name]; ok {
		return g
	}
	return f.shares[name]
}

func putShareConfig(tx *bolt.Tx, g *ShareGroup) error {
	b, err := tx.Bucket(bucketShares).CreateBucketIfNotExists([]byte(g.Name))
	if err != nil {
		return err
	}
	v, err := json.Marshal(g.Config)
	if err != nil {
		return err
	}
	return b.Put(keyShareConfig, v)
}

// putSharePartitions writes the share-partitions the entry's commands
// changed, once each however many commands changed them: those still their
// group's (a later command may have deleted the group or replaced the
// partition, which it then wrote or removed itself).
func putSharePartitions(tx *bolt.Tx, st *stage) error {
	for p, group := range st.dirty {
		g := st.shares[group]
		if g == nil || g.Partitions[GrantKey(p.TP())] != p {
			continue
		}
		b, err := tx.Bucket(bucketShares).CreateBucketIfNotExists([]byte(group))
		if err != nil {
			return err
		}
		v, err := json.Marshal(encodePartition(p))
		if err != nil {
			return err
		}
		if err := b.Put(key(p.Topic, p.Partition), v); err != nil {
			return err
		}
	}
	return nil
}

// storedPartition is a share-partition as stored: its records run-length
// encoded (consecutive records alike make one run).
type storedPartition struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Start       int64        `json:"start"`
	Runs        []storedRun  `json:"runs,omitempty"`
	Accepted    int64        `json:"accepted,omitempty"`
	Archived    int64        `json:"archived,omitempty"`
	Deliveries  int64        `json:"deliveries,omitempty"`
	DeadLetters *DeadLetters `json:"dead_letters,omitempty"`
}

type storedRun struct {
	N         int         `json:"n"`
	State     RecordState `json:"s"`
	Count     int16       `json:"c,omitempty"`
	Lock      int64       `json:"l,omitempty"`
	Member    string      `json:"m,omitempty"`
	Reason    string      `json:"r,omitempty"`
	NotBefore int64       `json:"nb,omitempty"`
}

func encodePartition(p *SharePartition) storedPartition {
	s := storedPartition{Topic: p.Topic, Partition: p.Partition, Start: p.Start, Accepted: p.Accepted, Archived: p.Archived, Deliveries: p.Deliveries,
		DeadLetters: p.DeadLetters}
	for i, r := range p.Records {
		member, reason := p.MemberOf(r), ""
		if r.State == Archiving {
			reason = p.ReasonOf(p.Start + int64(i))
		}
		if n := len(s.Runs); n > 0 {
			last := &s.Runs[n-1]
			if last.State == r.State && last.Count == r.Count && last.Lock == r.LockUntilMs && last.Member == member && last.Reason == reason &&
				last.NotBefore == r.NotBeforeMs {
				last.N++
				continue
			}
		}
		s.Runs = append(s.Runs, storedRun{N: 1, State: r.State, Count: r.Count, Lock: r.LockUntilMs, Member: member, Reason: reason, NotBefore: r.NotBeforeMs})
	}
	return s
}

func decodePartition(v []byte) (*SharePartition, error) {
	var s storedPartition
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	p := &SharePartition{Topic: s.Topic, Partition: s.Partition, Start: s.Start, Accepted: s.Accepted, Archived: s.Archived, Deliveries: s.Deliveries,
		DeadLetters: s.DeadLetters}
	for _, r := range s.Runs {
		if r.N <= 0 || r.N > 1_000_000 || len(p.Records)+r.N > 1_000_000 || r.State > Archiving {
			return nil, fmt.Errorf("run of %d records in state %d is not valid", r.N, r.State)
		}
		var ref int32
		if r.Member != "" {
			ref = p.memberRef(r.Member)
		}
		for range r.N {
			if r.Reason != "" {
				p.setReason(p.End(), r.Reason)
			}
			p.Records = append(p.Records, ShareRecord{State: r.State, Count: r.Count, LockUntilMs: r.Lock, member: ref, NotBeforeMs: r.NotBefore})
		}
	}
	return p, nil
}

// loadShares reads every share group of the state file.
func loadShares(tx *bolt.Tx) (map[string]*ShareGroup, error) {
	out := map[string]*ShareGroup{}
	err := tx.Bucket(bucketShares).ForEachBucket(func(name []byte) error {
		b := tx.Bucket(bucketShares).Bucket(name)
		g := &ShareGroup{Name: string(name), Config: shares.DefaultConfig(), Partitions: map[string]*SharePartition{}}
		err := b.ForEach(func(k, v []byte) error {
			if string(k) == string(keyShareConfig) {
				if err := json.Unmarshal(v, &g.Config); err != nil {
					return fmt.Errorf("share group %s: corrupt configuration: %w", name, err)
				}
				return nil
			}
			p, err := decodePartition(v)
			if err != nil {
				return fmt.Errorf("share group %s: corrupt partition state %q: %w", name, k, err)
			}
			g.Partitions[GrantKey(groups.TP{Topic: p.Topic, Partition: p.Partition})] = p
			return nil
		})
		out[g.Name] = g
		return err
	})
	return out, err
}

// ackShare applies a consumer's acknowledgements to g, all or none per
// partition, and returns each partition's result and the partitions it
// changed.
func ackShare(g *ShareGroup, group string, req *shares.AckRequest, nowMs int64, private map[*SharePartition]bool) ([]shares.AckResult, []*SharePartition) {
	byPart := map[string][]shares.Ack{}
	var order []string
	for _, a := range req.Acks {
		k := GrantKey(groups.TP{Topic: a.Topic, Partition: a.Partition})
		if _, ok := byPart[k]; !ok {
			order = append(order, k)
		}
		byPart[k] = append(byPart[k], a)
	}
	var results []shares.AckResult
	var changed []*SharePartition
	for _, k := range order {
		acks := byPart[k]
		r := shares.AckResult{Topic: acks[0].Topic, Partition: acks[0].Partition}
		p := g.Partitions[k]
		var err error
		if p == nil {
			err = protocol.InvalidRecordState.Err("share group %s has no records of %s in flight", group, k)
		} else {
			err = p.checkAcks(req.MemberID, acks, nowMs) // changes nothing
		}
		if err != nil {
			r.ErrorCode, r.Error = int16(protocol.CodeOf(err)), protocol.MessageOf(err)
		} else {
			if !private[p] {
				p = p.Clone()
				private[p] = true
			}
			p.ack(acks, g.Config, nowMs)
			g.Partitions[k] = p
			changed = append(changed, p)
		}
		results = append(results, r)
	}
	return results, changed
}

// acquireShare acquires records of g for a consumer and returns them with
// changed, the partitions the command changed so far, and those it changes
// added. It copies a partition it changes unless private holds it (a copy
// this entry made already), and then changes it in place.
func acquireShare(g *ShareGroup, a *ShareAcquire, nowMs int64, private map[*SharePartition]bool, changed []*SharePartition) (*shares.AcquireResponse, []*SharePartition) {
	max := g.Config.MaxFetchRecords
	if a.Max > 0 && a.Max < max {
		max = a.Max
	}
	resp := &shares.AcquireResponse{Acquired: []shares.Acquired{}}
	for _, b := range a.Partitions {
		k := GrantKey(groups.TP{Topic: a.Topic, Partition: b.Partition})
		p := g.Partitions[k]
		fresh := p == nil
		switch {
		case fresh:
			start := b.HighWatermark
			if g.Config.AutoOffsetReset == "earliest" {
				start = b.LogStart
			}
			p = &SharePartition{Topic: a.Topic, Partition: b.Partition, Start: start}
			private[p] = true
		case !p.wouldAcquire(max, b.LogStart, b.HighWatermark, nowMs, g.Config):
			continue
		case !private[p]:
			p = p.Clone()
			private[p] = true
		}
		before := p.Start
		p.skipTo(b.LogStart)
		got, took := p.acquire(a.MemberID, max, b.HighWatermark, nowMs, g.Config)
		for _, r := range got {
			max -= int32(r.LastOffset - r.FirstOffset + 1)
		}
		resp.Acquired = append(resp.Acquired, got...)
		if (fresh || took || p.Start != before) && !slices.Contains(changed, p) {
			g.Partitions[k] = p
			changed = append(changed, p)
		}
	}
	if len(resp.Acquired) > 0 {
		resp.LockUntilMs = nowMs + g.Config.LockDurationMs
	}
	return resp, changed
}
