package sharecoord

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// LogBounds looks up a partition's log offsets at its leader: ts is
// protocol.TimestampEarliest (the log start offset) or TimestampLatest (the
// high watermark).
type LogBounds interface {
	ListOffset(ctx context.Context, topic string, partition int32, ts int64) (int64, error)
}

// Coordinator runs the share groups on the Raft leader. Their state is the
// FSM's (package fsm, share.go): every acquisition and acknowledgement is a
// Raft entry, decided by the FSM with the proposer's clock, so a new leader
// continues exactly where the old one stopped. What the Coordinator adds is
// the partitions' log bounds (cached for BoundsTTL, looked up at the
// leaders), the order in which an acquisition visits partitions, and the
// long poll of an acquisition that finds nothing.
type Coordinator struct {
	co     coordinator.Plane
	bounds LogBounds
	dlt    DeadLetterIO // nil: no dead-letter writer
	ttl    time.Duration

	homes   homes        // the partition each member's acquisitions visit first
	waiting atomic.Int32 // acquisitions waiting for records

	mu    sync.Mutex // guards cache and freed
	cache map[groups.TP]bound
	// freed is closed (and replaced) when records may have been given
	// back to a group here (acknowledged, released, a member gone, a
	// reset or a new configuration): the acquisitions waiting for room,
	// of every group, look again.
	freed chan struct{}

	base   context.Context // cancelled by Stop: the writer's requests end
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type bound struct {
	logStart, hw int64
	at           time.Time
}

// BoundsTTL is how long a partition's looked-up log bounds serve
// acquisitions; an acquisition that finds nothing waits this long before it
// looks again, unless records are given back first.
const BoundsTTL = 20 * time.Millisecond

// DeadLetterInterval is how often the leader looks for archived records to
// write to dead-letter topics.
const DeadLetterInterval = 100 * time.Millisecond

// New returns the share-group coordinator of co's replica (the group
// coordinator, *coordinator.Coordinator); with dlt set, Start runs its
// dead-letter writer.
func New(co coordinator.Plane, bounds LogBounds, dlt DeadLetterIO) *Coordinator {
	base, cancel := context.WithCancel(context.Background())
	return &Coordinator{co: co, bounds: bounds, dlt: dlt, ttl: BoundsTTL, cache: map[groups.TP]bound{}, freed: make(chan struct{}), base: base, cancel: cancel}
}

// Start starts the dead-letter writer; Stop ends it.
func (s *Coordinator) Start() {
	if s.dlt == nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(DeadLetterInterval)
		defer t.Stop()
		for {
			select {
			case <-s.base.Done():
				return
			case <-t.C:
				s.writeDeadLetters()
			}
		}
	}()
}

// Stop stops the dead-letter writer and waits for it.
func (s *Coordinator) Stop() {
	s.cancel()
	s.wg.Wait()
}

// bound returns a partition's log bounds, looking them up when the cached
// ones are older than the TTL.
func (s *Coordinator) bound(ctx context.Context, tp groups.TP) (bound, error) {
	now := time.Now()
	s.mu.Lock()
	b, ok := s.cache[tp]
	s.mu.Unlock()
	if ok && now.Sub(b.at) < s.ttl {
		return b, nil
	}
	start, err := s.bounds.ListOffset(ctx, tp.Topic, tp.Partition, protocol.TimestampEarliest)
	if err != nil {
		return b, err
	}
	hw, err := s.bounds.ListOffset(ctx, tp.Topic, tp.Partition, protocol.TimestampLatest)
	if err != nil {
		return b, err
	}
	b = bound{logStart: start, hw: hw, at: now}
	s.mu.Lock()
	s.cache[tp] = b
	s.mu.Unlock()
	return b, nil
}

// freedSignal returns the channel closed the next time records are given
// back.
func (s *Coordinator) freedSignal() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freed
}

// propose runs a share operation and returns its answer; one that may have
// given records back wakes the acquisitions waiting for room.
func (s *Coordinator) propose(ctx context.Context, op sharefsm.Command) (*sharefsm.Result, error) {
	if !s.co.Ready() {
		return nil, coordinator.ErrNotLeader
	}
	op.NowMs = s.co.Now().UnixMilli()
	res, err := s.co.ProposeResult(ctx, fsm.Command{Type: fsm.TypeShare, Share: &op})
	if op.Ack != nil || op.Leave != "" || op.Reset != nil || op.Config != nil {
		s.mu.Lock()
		close(s.freed)
		s.freed = make(chan struct{})
		s.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return res.Share, nil
}

// Acquire acquires records of a topic for a consumer, waiting up to
// req.WaitMs (bounded by ctx) for some when none are available. A request
// with acknowledgements applies them first, in the same step, and is
// answered at once.
func (s *Coordinator) Acquire(ctx context.Context, group string, req shares.AcquireRequest) (*shares.AcquireResponse, error) {
	if !s.co.Ready() {
		return nil, coordinator.ErrNotLeader
	}
	counts, ok := s.co.PartitionCounts()
	if !ok {
		return nil, protocol.CoordinatorNotAvailable.Err("the offsets service has no metadata yet")
	}
	count, ok := counts[req.Topic]
	if !ok || count <= 0 {
		return nil, protocol.UnknownTopicOrPartition.Err("no topic %q", req.Topic)
	}
	visit := make([]int32, 0, count)
	for p := range count {
		if len(req.Partitions) == 0 || slices.Contains(req.Partitions, p) {
			visit = append(visit, p)
		}
	}
	for _, p := range req.Partitions {
		if p < 0 || p >= count {
			return nil, protocol.UnknownTopicOrPartition.Err("topic %s has no partition %d", req.Topic, p)
		}
	}
	n := int32(len(visit))
	deadline := time.Now().Add(time.Duration(req.WaitMs) * time.Millisecond)
	first := s.homes.visitFirst(group, req.MemberID, n, s.co.Now())
	acquire := func(parts []sharefsm.Bounds) *sharefsm.Acquire {
		return &sharefsm.Acquire{MemberID: req.MemberID, Topic: req.Topic, Max: req.MaxRecords, Partitions: parts}
	}
	if len(req.Acks) > 0 {
		// The acknowledgements apply first, in one entry with an
		// acquisition (which takes at once what they freed), and are
		// answered without waiting for records, so the consumer learns
		// their outcome (a refusal above all) without delay.
		parts, _ := s.partitionBounds(ctx, group, req.Topic, visit, first)
		out, err := s.propose(ctx, sharefsm.Command{Group: group, Ack: &shares.AckRequest{MemberID: req.MemberID, Acks: req.Acks}, Acquire: acquire(parts)})
		if err != nil {
			return nil, err
		}
		out.Acquire.AckResults = out.Acks
		return out.Acquire, nil
	}
	for {
		freed := s.freedSignal() // taken before looking: a give-back after the look wakes the wait
		parts, worth := s.partitionBounds(ctx, group, req.Topic, visit, first)
		if worth {
			out, err := s.propose(ctx, sharefsm.Command{Group: group, Acquire: acquire(parts)})
			if err != nil {
				return nil, err
			}
			if len(out.Acquire.Acquired) > 0 {
				return out.Acquire, nil
			}
		}
		if len(parts) == 0 && time.Now().After(deadline) {
			return nil, protocol.LeaderNotAvailable.Err("no partition of %s could be reached", req.Topic)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return &shares.AcquireResponse{Acquired: []shares.Acquired{}}, nil
		}
		t := time.NewTimer(min(wait, s.ttl))
		s.waiting.Add(1)
		select {
		case <-ctx.Done():
			t.Stop()
			s.waiting.Add(-1)
			return &shares.AcquireResponse{Acquired: []shares.Acquired{}}, nil
		case <-freed:
			t.Stop()
		case <-t.C:
		}
		s.waiting.Add(-1)
	}
}

// partitionBounds looks up the log bounds of the partitions to visit,
// from the first'th on, and reports whether an acquisition could take
// something. A partition whose leader cannot be reached is left out: the
// others may serve.
func (s *Coordinator) partitionBounds(ctx context.Context, group, topic string, visit []int32, first int32) ([]sharefsm.Bounds, bool) {
	n := int32(len(visit))
	parts := make([]sharefsm.Bounds, 0, n)
	worth := false
	g, _ := s.co.FSM().Share(group)
	nowMs := s.co.Now().UnixMilli()
	for i := range n {
		p := visit[(first+i)%n]
		b, err := s.bound(ctx, groups.TP{Topic: topic, Partition: p})
		if err != nil {
			continue
		}
		parts = append(parts, sharefsm.Bounds{Partition: p, LogStart: b.logStart, HighWatermark: b.hw})
		worth = worth || acquirable(g, topic, p, b, nowMs)
	}
	return parts, worth
}

// acquirable reports whether an acquisition of partition p could take
// something: the group has no state of it yet (the first acquisition
// fixes where it starts), records are released or their locks expired, or
// the log holds records past the in-flight window's end and the window has
// room.
func acquirable(g *sharefsm.Group, topic string, p int32, b bound, nowMs int64) bool {
	if g == nil {
		return true
	}
	sp := g.Partitions[partkey.String(groups.TP{Topic: topic, Partition: p})]
	if sp == nil {
		return true
	}
	if sp.End() < b.hw && len(sp.Records) < int(g.Config.MaxRecordLocks) || sp.Start < b.logStart {
		return true
	}
	st := sp.State(b.hw, nowMs)
	return st.Available > 0
}

// Ack acknowledges records: one result per partition.
func (s *Coordinator) Ack(ctx context.Context, group string, req shares.AckRequest) (*shares.AckResponse, error) {
	out, err := s.propose(ctx, sharefsm.Command{Group: group, Ack: &req})
	if err != nil {
		return nil, err
	}
	return &shares.AckResponse{Results: out.Acks, LockDurationMs: out.LockDurationMs}, nil
}

// Leave releases every record a consumer holds.
func (s *Coordinator) Leave(ctx context.Context, group, member string) error {
	if member == "" {
		return protocol.UnknownMemberID.Err("leaving needs a member id")
	}
	_, err := s.propose(ctx, sharefsm.Command{Group: group, Leave: member})
	s.homes.leave(group, member)
	return err
}

// Configure sets configuration values on the group's current (or the
// default) configuration.
func (s *Coordinator) Configure(ctx context.Context, group string, set map[string]string) error {
	cfg := shares.DefaultConfig()
	if g, ok := s.co.FSM().Share(group); ok {
		cfg = g.Config
	}
	for k, v := range set {
		if err := cfg.Set(k, v); err != nil {
			return protocol.InvalidConfig.Err("%v", err)
		}
	}
	_, err := s.propose(ctx, sharefsm.Command{Group: group, Config: &cfg})
	return err
}

// Reset moves partitions of a group without records of the topic under
// lock.
func (s *Coordinator) Reset(ctx context.Context, group string, req sharefsm.Reset) error {
	_, err := s.propose(ctx, sharefsm.Command{Group: group, Reset: &req})
	return err
}

// Delete deletes a group without records under lock.
func (s *Coordinator) Delete(ctx context.Context, group string) error {
	_, err := s.propose(ctx, sharefsm.Command{Group: group, Delete: true})
	return err
}

// Describe describes a group, with each partition's high watermark where
// its leader answers (-1 where not).
func (s *Coordinator) Describe(ctx context.Context, group string) (*shares.Description, error) {
	g, ok := s.co.FSM().Share(group)
	if !ok {
		return nil, protocol.GroupIDNotFound.Err("no share group %q", group)
	}
	nowMs := s.co.Now().UnixMilli()
	d := &shares.Description{Group: group, Config: g.Config.Map(), Members: g.Members(nowMs), Partitions: []shares.PartitionState{}}
	for _, p := range g.SortedPartitions() {
		hw := int64(-1)
		if b, err := s.bound(ctx, groups.TP{Topic: p.Topic, Partition: p.Partition}); err == nil {
			hw = b.hw
		}
		d.Partitions = append(d.Partitions, p.State(hw, nowMs))
	}
	return d, nil
}

// List lists the share groups.
func (s *Coordinator) List() []shares.Listing {
	nowMs := s.co.Now().UnixMilli()
	out := []shares.Listing{}
	for _, name := range s.co.FSM().ShareNames() {
		g, ok := s.co.FSM().Share(name)
		if !ok {
			continue
		}
		topics := map[string]bool{}
		for _, p := range g.Partitions {
			topics[p.Topic] = true
		}
		out = append(out, shares.Listing{Group: name, Topics: len(topics), Members: len(g.Members(nowMs))})
	}
	return out
}
