package sharefsm

import (
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// Stage holds what a batch of Raft entries changes of the share groups,
// inside the batch's bbolt transaction. The FSM makes one per batch
// (NewStage), applies each share command of the batch through it (Apply),
// writes the partitions they changed before the transaction commits
// (Flush), and makes the changes its own once it committed (Commit). It is
// used under the FSM's lock, from one goroutine.
type Stage struct {
	committed     map[string]*Group // as of the last batch committed; changed only by Commit
	consumerGroup func(name string) bool
	// groups holds the groups the batch's commands changed; nil deletes.
	groups map[string]*Group
	// private holds the partitions copied by the batch's commands: not yet
	// visible outside it, a later command of the batch changes them in
	// place rather than copying them again.
	private map[*Partition]bool
	// dirty holds the partitions changed, with their group's name: written
	// once, by Flush.
	dirty map[*Partition]string
}

// NewStage returns the stage of a batch over committed, the share groups
// as of the last batch (Load's, then each Commit's). consumerGroup reports
// whether a consumer group has the name, as of the batch's transaction: a
// share group may not take it.
func NewStage(committed map[string]*Group, consumerGroup func(name string) bool) *Stage {
	return &Stage{committed: committed, consumerGroup: consumerGroup, groups: map[string]*Group{}, private: map[*Partition]bool{},
		dirty: map[*Partition]string{}}
}

// Commit applies the batch's changes to the committed groups NewStage was
// given, once the batch's transaction committed.
func (s *Stage) Commit() {
	for name, g := range s.groups {
		if g == nil {
			delete(s.committed, name)
		} else {
			s.committed[name] = g
		}
	}
}

// group returns a share group's state as of the batch's transaction.
func (s *Stage) group(name string) *Group {
	if g, ok := s.groups[name]; ok {
		return g
	}
	return s.committed[name]
}

// Apply applies c inside the batch's transaction tx and returns its answer
// (none for a deletion). It validates first: a refusal is the command's
// answer and changes nothing, in memory or in the file; an error fails the
// transaction. Acknowledgements are all or none per partition; every other
// operation all or none.
func (s *Stage) Apply(tx *bolt.Tx, c *Command) (res *Result, refusal, err error) {
	if refusal = c.validate(); refusal != nil {
		return nil, refusal, nil
	}
	cur, refusal, err := s.groupFor(tx, c)
	if refusal != nil || err != nil {
		return nil, refusal, err
	}
	if c.Delete {
		refusal, err = s.deleteShareGroup(tx, c, cur)
		return nil, refusal, err
	}
	g := cur.clone()
	var changed []*Partition
	out := &Result{}
	switch {
	case c.Config != nil:
		changed, err = configureShareGroup(tx, g, *c.Config)
	case c.DeadLetterBegin != nil, c.DeadLetterDone != nil:
		changed, refusal = stepDeadLetters(g, c, out)
	case c.Acquire != nil || c.Ack != nil:
		if c.Ack != nil {
			out.Acks, changed = ackShare(g, c.Group, c.Ack, c.NowMs, s.private)
			out.LockDurationMs = g.Config.LockDurationMs
		}
		if c.Acquire != nil {
			out.Acquire, changed = acquireShare(g, c.Acquire, c.NowMs, s.private, changed)
		}
	case c.Leave != "":
		changed = leaveShareGroup(g, c.Leave)
	case c.Reset != nil:
		changed, refusal, err = resetShareGroup(tx, g, c)
	}
	if refusal != nil || err != nil {
		return nil, refusal, err
	}
	s.groups[c.Group] = g
	for _, p := range changed {
		s.dirty[p] = c.Group
	}
	return out, nil, nil
}

// groupFor is the group a share operation acts on, as of the batch's
// transaction: a configuration or a first acquisition creates it (an
// acquisition stores its configuration), other operations on a group that
// does not exist are refused, as is a share operation on a consumer
// group's name.
func (s *Stage) groupFor(tx *bolt.Tx, c *Command) (g *Group, refusal, err error) {
	if g = s.group(c.Group); g != nil {
		return g, nil, nil
	}
	if c.Config == nil && c.Acquire == nil {
		return nil, protocol.GroupIDNotFound.Err("no share group %q", c.Group), nil
	}
	if s.consumerGroup(c.Group) {
		return nil, protocol.InconsistentGroupProtocol.Err("%s is a consumer group, not a share group", c.Group), nil
	}
	g = &Group{Name: c.Group, Config: shares.DefaultConfig(), Partitions: map[string]*Partition{}}
	if c.Acquire != nil {
		if err := putConfig(tx, g); err != nil {
			return nil, nil, err
		}
	}
	return g, nil, nil
}

// deleteShareGroup removes a group none of whose records is acquired or
// waiting to be dead-lettered.
func (s *Stage) deleteShareGroup(tx *bolt.Tx, c *Command, g *Group) (refusal, err error) {
	for _, p := range g.Partitions {
		if why := p.busy(c.NowMs); why != "" {
			return protocol.NonEmptyGroup.Err("share group %s has %s (%s-%d); its consumers must stop first", c.Group, why, p.Topic, p.Partition), nil
		}
	}
	s.groups[c.Group] = nil
	err = tx.Bucket(bucket).DeleteBucket([]byte(c.Group))
	if errors.Is(err, berrors.ErrBucketNotFound) {
		err = nil
	}
	return nil, err
}

// configureShareGroup sets g's configuration; without a dead-letter topic
// the records waiting for one are archived instead.
func configureShareGroup(tx *bolt.Tx, g *Group, cfg shares.Config) ([]*Partition, error) {
	var changed []*Partition
	g.Config = cfg
	if g.Config.DeadLetterTopic == "" {
		for k, p := range g.Partitions {
			if q := p.Clone(); q.dropDeadLetters() {
				g.Partitions[k] = q
				changed = append(changed, q)
			}
		}
	}
	return changed, putConfig(tx, g)
}

// stepDeadLetters begins or ends a partition's dead-letter write.
func stepDeadLetters(g *Group, c *Command, out *Result) ([]*Partition, error) {
	topic, part := "", int32(0)
	if b := c.DeadLetterBegin; b != nil {
		topic, part = b.Topic, b.Partition
	} else {
		topic, part = c.DeadLetterDone.Topic, c.DeadLetterDone.Partition
	}
	k := partkey.String(groups.TP{Topic: topic, Partition: part})
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
	return []*Partition{p}, nil
}

// leaveShareGroup releases what a leaving member holds.
func leaveShareGroup(g *Group, member string) []*Partition {
	var changed []*Partition
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
func resetShareGroup(tx *bolt.Tx, g *Group, c *Command) (changed []*Partition, refusal, err error) {
	r := c.Reset
	for _, p := range g.Partitions {
		if why := p.busy(c.NowMs); p.Topic == r.Topic && why != "" {
			return nil, protocol.NonEmptyGroup.Err("share group %s has %s of %s (partition %d); its consumers must stop first", c.Group, why, p.Topic, p.Partition), nil
		}
	}
	if r.Drop {
		b := tx.Bucket(bucket).Bucket([]byte(c.Group))
		for k, p := range g.Partitions {
			if p.Topic != r.Topic {
				continue
			}
			delete(g.Partitions, k)
			if b != nil {
				if err := b.Delete(partkey.Bytes(p.Topic, p.Partition)); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	for _, rp := range r.Partitions {
		k := partkey.String(groups.TP{Topic: r.Topic, Partition: rp.Partition})
		p := &Partition{Topic: r.Topic, Partition: rp.Partition, Start: rp.Offset}
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

// ackShare applies a consumer's acknowledgements to g, all or none per
// partition, and returns each partition's result and the partitions it
// changed.
func ackShare(g *Group, group string, req *shares.AckRequest, nowMs int64, private map[*Partition]bool) ([]shares.AckResult, []*Partition) {
	byPart := map[string][]shares.Ack{}
	var order []string
	for _, a := range req.Acks {
		k := partkey.String(groups.TP{Topic: a.Topic, Partition: a.Partition})
		if _, ok := byPart[k]; !ok {
			order = append(order, k)
		}
		byPart[k] = append(byPart[k], a)
	}
	var results []shares.AckResult
	var changed []*Partition
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
func acquireShare(g *Group, a *Acquire, nowMs int64, private map[*Partition]bool, changed []*Partition) (*shares.AcquireResponse, []*Partition) {
	max := g.Config.MaxFetchRecords
	if a.Max > 0 && a.Max < max {
		max = a.Max
	}
	resp := &shares.AcquireResponse{Acquired: []shares.Acquired{}}
	for _, b := range a.Partitions {
		k := partkey.String(groups.TP{Topic: a.Topic, Partition: b.Partition})
		p := g.Partitions[k]
		fresh := p == nil
		switch {
		case fresh:
			start := b.HighWatermark
			if g.Config.AutoOffsetReset == "earliest" {
				start = b.LogStart
			}
			p = &Partition{Topic: a.Topic, Partition: b.Partition, Start: start}
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
