package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/groupcommit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/keylock"
)

// ErrNotLeader: this replica does not lead the offsets Raft group (or has
// just become leader and is still catching up); the request belongs to the
// leader.
var ErrNotLeader = errors.New("this offsets replica is not the coordinator")

// Raft is what the coordinator needs of this replica's Raft node.
type Raft interface {
	IsLeader() bool
	// ApplyLocal proposes a command on this member, which must lead, and
	// returns the FSM's answer once applied.
	ApplyLocal(ctx context.Context, data []byte) (any, error)
	// Barrier waits until every committed entry is applied.
	Barrier(ctx context.Context) error
}

// Topics gives the cluster's partition count per topic; ok is false until
// the first metadata snapshot arrived.
type Topics interface {
	Partitions() (counts map[string]int32, ok bool)
}

type memberKey struct{ group, member string }

// Coordinator runs the groups on the Raft leader: it turns heartbeats into
// membership changes (Raft entries only when something changed), tracks
// sessions and revocation deadlines in memory, and proposes commits, resets
// and deletions. Session clocks restart when a replica becomes leader, so
// every member gets a full session timeout to find the new leader.
type Coordinator struct {
	fsm    *fsm.FSM
	raft   Raft
	topics Topics
	s      Settings
	log    *slog.Logger
	now    func() time.Time

	ready atomic.Bool // leader and caught up (a barrier passed since it became leader)

	locks keylock.Locks // per group: one membership change at a time (lockGroup)

	// Lock order: a classic group's mu (classic.go), then a group lock
	// (lockGroup), then mu; mu is only ever held briefly and never while
	// taking another.
	mu          sync.Mutex // guards the fields below
	seen        map[memberKey]time.Time
	revokeSince map[memberKey]time.Time
	classic     map[string]*classicGroup // classic groups' state on the leader (classic.go)
	term        uint64                   // leadership changes seen, so a stale barrier cannot set ready
	stopped     bool                     // set by Stop: no goroutine may start after it

	entries *groupcommit.Batcher[[]byte, *fsm.Result] // group commit of the proposals (ProposeResult)

	stop chan struct{}
	wg   sync.WaitGroup
}

// Group commit bounds: the commands and encoded bytes of one Raft entry.
const (
	maxEntryCommands = 512
	maxEntryBytes    = 1 << 20
)

// New returns a coordinator; Start runs its expiry loop.
func New(f *fsm.FSM, r Raft, topics Topics, s Settings, log *slog.Logger) *Coordinator {
	c := &Coordinator{fsm: f, raft: r, topics: topics, s: s, log: log, now: time.Now,
		classic: map[string]*classicGroup{}, seen: map[memberKey]time.Time{}, revokeSince: map[memberKey]time.Time{},
		stop: make(chan struct{})}
	c.entries = groupcommit.New(c.applyEntry, maxEntryCommands, maxEntryBytes, func(b []byte) int { return len(b) })
	return c
}

// ObserveEntries has each entry's command count and duration (proposal to
// answer) reported to fn; it is set before the coordinator starts.
func (c *Coordinator) ObserveEntries(fn func(commands int, d time.Duration)) { c.entries.Observe(fn) }

// EntryCounts reports the Raft entries the coordinators proposed since this
// process started and the commands they held (group commit puts many in
// one entry).
func (c *Coordinator) EntryCounts() (entries, commands int64) {
	return c.entries.Counts()
}

// Start starts the expiry loops (members, and idle groups unless
// Settings.OffsetsRetention is 0); Stop ends them.
func (c *Coordinator) Start() {
	c.every(c.s.ExpiryCheckInterval, c.expire)
	c.every(c.s.ExpiryCheckInterval, c.expireClassic)
	if c.s.OffsetsRetention > 0 {
		c.every(c.s.RetentionCheckInterval, c.expireGroups)
	}
}

// every runs fn every interval on a goroutine of its own until Stop.
func (c *Coordinator) every(interval time.Duration, fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// expireGroups deletes the groups without members that were idle (no member,
// no commit) for longer than Settings.OffsetsRetention, with their offsets,
// as Kafka expires an empty group's offsets after offsets.retention.minutes.
// The deletion is conditional (fsm.DeleteGroup.IdleBeforeMs): a member or a
// commit that arrives meanwhile keeps the group.
func (c *Coordinator) expireGroups() {
	if !c.Ready() {
		return
	}
	cutoff := c.now().Add(-c.s.OffsetsRetention).UnixMilli()
	for _, name := range c.fsm.GroupNames() {
		idle, err := c.fsm.IdleSince(name)
		if err != nil {
			c.log.Warn("reading a group's activity failed", "group", name, "err", err)
			continue
		}
		if idle == 0 || idle >= cutoff {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.Propose(ctx, fsm.Command{Type: fsm.TypeDeleteGroup, DeleteGroup: &fsm.DeleteGroup{Group: name, IdleBeforeMs: cutoff}})
		cancel()
		if err != nil {
			c.log.Info("expiring an idle group did not apply", "group", name, "err", err)
			continue
		}
		c.log.Info("idle group expired with its offsets", "group", name, "idle_since", time.UnixMilli(idle).UTC(), "retention", c.s.OffsetsRetention)
	}
}

// Stop stops the expiry loop and any leadership catch-up and waits for them.
func (c *Coordinator) Stop() {
	c.mu.Lock()
	already := c.stopped
	c.stopped = true
	c.mu.Unlock()
	if !already {
		close(c.stop)
	}
	c.wg.Wait()
	c.entries.Wait()
}

// OnLeadership is the Raft node's leadership callback. On gaining leadership
// it forgets every session clock (they restart from now) and becomes ready
// once a barrier shows the FSM has applied everything committed.
func (c *Coordinator) OnLeadership(isLeader bool) {
	c.ready.Store(false)
	c.dropClassic()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.term++
	term := c.term
	c.seen = map[memberKey]time.Time{}
	c.revokeSince = map[memberKey]time.Time{}
	if !isLeader || c.stopped {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-c.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			if ctx.Err() != nil {
				return // stopping: no barrier passed
			}
			if err := c.raft.Barrier(ctx); err == nil {
				break
			}
			if !c.raft.IsLeader() {
				return
			}
		}
		c.mu.Lock()
		if c.term == term && c.raft.IsLeader() {
			c.ready.Store(true)
			c.log.Info("group coordinator ready")
		}
		c.mu.Unlock()
	}()
}

// Ready reports whether this replica coordinates now: it leads, has caught
// up, and its state file takes writes (a replica whose state write failed
// stops coordinating and hands Raft leadership over, raftgroup.WithHealth;
// its failing readiness check asks for a restart).
func (c *Coordinator) Ready() bool {
	return c.ready.Load() && c.raft.IsLeader() && c.fsm.Ready() == nil
}

// lockGroup takes the group's lock and returns its release.
func (c *Coordinator) lockGroup(group string) (unlock func()) { return c.locks.Lock(group) }

func (c *Coordinator) partitions(g *fsm.Group) map[string]int32 {
	if p, ok := c.topics.Partitions(); ok {
		return p
	}
	return g.Partitions // no metadata yet: keep the counts the target was computed from
}

// Heartbeat handles one member heartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, group string, req groups.HeartbeatRequest) (*groups.HeartbeatResponse, error) {
	if err := groups.ValidateGroupID(group); err != nil {
		return nil, protocol.InvalidGroupID.Err("%v", err)
	}
	if !c.Ready() {
		return nil, ErrNotLeader
	}
	if state, n, ok := c.ClassicState(group); ok && n > 0 {
		return nil, protocol.GroupIDNotFound.Err("group %s is a classic group with %d members (%s): members of Kafka's consumer protocol cannot join it", group, n, state)
	}
	defer c.lockGroup(group)()
	for attempt := 0; ; attempt++ {
		resp, err := c.heartbeatLocked(ctx, group, req)
		// A compare-and-set conflict means the state read was stale (a
		// proposal that timed out committed meanwhile): read again once.
		if protocol.CodeOf(err) == protocol.InvalidUpdateVersion && attempt == 0 {
			continue
		}
		if protocol.CodeOf(err) == protocol.InvalidUpdateVersion {
			err = fmt.Errorf("%w: group %s changed under the coordinator: %w", ErrNotLeader, group, err)
		}
		return resp, err
	}
}

// heartbeatLocked runs one heartbeat with the group's lock held.
func (c *Coordinator) heartbeatLocked(ctx context.Context, group string, req groups.HeartbeatRequest) (*groups.HeartbeatResponse, error) {
	g, ok := c.fsm.Group(group)
	if !ok {
		g = &fsm.Group{Name: group}
	}
	ng := g.Clone()
	resp, err := Heartbeat(ng, req, c.partitions(g), func() string { return groups.NewMemberID(req.ClientID) }, c.s)
	if err != nil {
		return nil, err
	}
	if changed(g, ng) {
		if err := c.put(ctx, g.Version, ng); err != nil {
			return nil, err
		}
		switch before, after := g.Members[resp.MemberID], ng.Members[resp.MemberID]; {
		case req.MemberEpoch == groups.JoinEpoch && before == nil && staticMember(g, req.InstanceID) != nil:
			c.log.Info("static member rejoined", "group", group, "member", resp.MemberID, "instance_id", req.InstanceID, "client_id", req.ClientID, "member_epoch", after.Epoch)
		case req.MemberEpoch == groups.JoinEpoch:
			c.log.Info("member joined", "group", group, "member", resp.MemberID, "client_id", req.ClientID, "instance_id", req.InstanceID, "group_epoch", ng.Epoch)
		case after != nil && after.Away:
			c.log.Info("static member away", "group", group, "member", req.MemberID, "instance_id", after.InstanceID)
		case req.MemberEpoch < 0:
			c.log.Info("member left", "group", group, "member", req.MemberID, "group_epoch", ng.Epoch)
		}
	}
	c.track(group, resp.MemberID, g.Members[resp.MemberID], ng.Members[resp.MemberID])
	return resp, nil
}

// track renews a member's session clock after a heartbeat and restarts its
// rebalance clock whenever its revoking set changed (a new revocation, or a
// partial release: the member is making progress).
func (c *Coordinator) track(group, id string, before, after *fsm.Member) {
	k := memberKey{group, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	if after == nil {
		delete(c.seen, k)
		delete(c.revokeSince, k)
		return
	}
	now := c.now()
	c.seen[k] = now
	switch {
	case len(after.Revoking) == 0:
		delete(c.revokeSince, k)
	case before == nil || !slices.Equal(before.Revoking, after.Revoking):
		c.revokeSince[k] = now
	default:
		if _, ok := c.revokeSince[k]; !ok {
			c.revokeSince[k] = now
		}
	}
}

func changed(a, b *fsm.Group) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) != string(jb)
}

func (c *Coordinator) put(ctx context.Context, expect uint64, g *fsm.Group) error {
	switch {
	case len(g.Members) > 0:
		g.EmptySinceMs = 0
	case g.EmptySinceMs == 0:
		g.EmptySinceMs = c.now().UnixMilli()
	}
	return c.Propose(ctx, fsm.Command{Type: fsm.TypePutGroup, PutGroup: &fsm.PutGroup{ExpectVersion: expect, Group: g}})
}

// Propose proposes cmd and returns the FSM's refusal (its Result.Err) or a
// failure to commit, as ProposeResult.
func (c *Coordinator) Propose(ctx context.Context, cmd fsm.Command) error {
	res, err := c.ProposeResult(ctx, cmd)
	if err != nil {
		return err
	}
	return res.Err
}

// ProposeResult proposes cmd and returns the FSM's answer; the error is a
// failure to commit. Commands proposed while an entry is in flight go
// together into the next entry (group commit, c.entries), each with its own
// answer.
func (c *Coordinator) ProposeResult(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	b, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	res, err := c.entries.Do(ctx, b)
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		// The wait ended before the entry's answer: it may still commit.
		return nil, protocol.RequestTimedOut.Err("the offsets raft group did not commit in time: %v", err)
	}
	return res, err
}

// applyEntry proposes the encoded commands as one Raft entry and returns
// their answers in order.
func (c *Coordinator) applyEntry(ctx context.Context, cmds [][]byte) ([]*fsm.Result, error) {
	b, err := fsm.EncodeBatch(cmds)
	if err != nil {
		return nil, err
	}
	out, err := c.raft.ApplyLocal(ctx, b)
	switch {
	case errors.Is(err, raftgroup.ErrTimeout):
		// The entry may still commit: the client retries here, and the
		// retry sees the outcome.
		return nil, protocol.RequestTimedOut.Err("the offsets raft group did not commit in time: %v", err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	res, ok := out.(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("offsets raft apply: unexpected FSM answer %T", out)
	}
	if len(cmds) == 1 {
		return []*fsm.Result{res}, nil
	}
	if res.Err != nil && res.Batch == nil {
		// The FSM refused the entry as a whole (its state file failed):
		// the same answer for each command.
		out := make([]*fsm.Result, len(cmds))
		for i := range out {
			out[i] = res
		}
		return out, nil
	}
	if len(res.Batch) != len(cmds) {
		return nil, fmt.Errorf("offsets raft apply: %d answers to a batch of %d commands", len(res.Batch), len(cmds))
	}
	return res.Batch, nil
}

// Commit commits offsets for a member (or, with no member id, for a group
// without members). The FSM applies the fencing rule in log order; checking it
// here first keeps zombies' commits out of the log.
func (c *Coordinator) Commit(ctx context.Context, group string, req groups.CommitRequest) error {
	if !c.Ready() {
		return ErrNotLeader
	}
	cmd := &fsm.Commit{Group: group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, Offsets: req.Offsets, TimeMs: c.now().UnixMilli()}
	g, _ := c.fsm.Group(group)
	err := fsm.CheckCommit(g, cmd)
	if classic, cerr := c.checkClassicCommit(group, req.MemberID, req.MemberEpoch); classic && cerr != nil {
		err = cerr // the rebalance's state here is newer than the written one
	}
	if err != nil {
		if req.MemberID != "" {
			c.log.Warn("commit rejected", "group", group, "member", req.MemberID, "epoch", req.MemberEpoch, "err", err)
		}
		return err
	}
	return c.Propose(ctx, fsm.Command{Type: fsm.TypeCommit, Commit: cmd})
}

// busyClassic refuses an operation that needs the group empty while a
// classic rebalance holds members not written yet.
func (c *Coordinator) busyClassic(group string) error {
	if state, n, ok := c.ClassicState(group); ok && n > 0 {
		return protocol.NonEmptyGroup.Err("group %s has %d classic members (%s); stop them first", group, n, state)
	}
	return nil
}

// Reset overwrites offsets of a group without members.
func (c *Coordinator) Reset(ctx context.Context, group string, offs []groups.Offset) error {
	if !c.Ready() {
		return ErrNotLeader
	}
	if err := c.busyClassic(group); err != nil {
		return err
	}
	return c.Propose(ctx, fsm.Command{Type: fsm.TypeReset, Reset: &fsm.Reset{Group: group, Offsets: offs, TimeMs: c.now().UnixMilli()}})
}

// Delete deletes a group without members.
func (c *Coordinator) Delete(ctx context.Context, group string) error {
	if !c.Ready() {
		return ErrNotLeader
	}
	if err := c.busyClassic(group); err != nil {
		return err
	}
	return c.Propose(ctx, fsm.Command{Type: fsm.TypeDeleteGroup, DeleteGroup: &fsm.DeleteGroup{Group: group}})
}

// DeleteOffsets removes a group's committed offsets of a topic, unless a
// member reads it.
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, req groups.DeleteOffsetsRequest) error {
	if !c.Ready() {
		return ErrNotLeader
	}
	return c.Propose(ctx, fsm.Command{Type: fsm.TypeDeleteOffsets, DeleteOffsets: &fsm.DeleteOffsets{Group: group, Topic: req.Topic, Partitions: req.Partitions}})
}

// expire removes members whose session expired or who did not release
// revoked partitions within their rebalance timeout.
func (c *Coordinator) expire() {
	if !c.Ready() {
		return
	}
	live := map[memberKey]bool{}
	for _, g := range c.fsm.GroupsWithMembers() {
		if g.Classic() {
			continue // the classic groups' clocks are their own (classic.go)
		}
		for id, m := range g.Members {
			k := memberKey{g.Name, id}
			live[k] = true
			// Decide on the copy first: only a member whose clock ran out
			// costs the group's lock and a fresh copy of the group, where
			// expireMember decides again (a heartbeat may have renewed it).
			// Checking every member under the lock cloned a group of n
			// members n times per sweep.
			if c.expiredReason(k, m) != "" {
				c.expireMember(g.Name, id)
			}
		}
	}
	c.forgetClocks(live)
}

// forgetClocks drops the clocks of members no longer in the state: a removal
// whose proposal timed out but committed later leaves its member's clocks
// behind. A member that joined after live was read loses its clock too, which
// only restarts it (expiredReason starts clocks it has not seen), so a member
// is never expired early.
func (c *Coordinator) forgetClocks(live map[memberKey]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.seen {
		if !live[k] {
			delete(c.seen, k)
		}
	}
	for k := range c.revokeSince {
		if !live[k] {
			delete(c.revokeSince, k)
		}
	}
}

// expireMember removes one member if its session or rebalance clock ran out.
// It decides under the group's lock, so a heartbeat that renewed the member
// meanwhile is seen and the member stays.
func (c *Coordinator) expireMember(group, id string) {
	defer c.lockGroup(group)()
	g, ok := c.fsm.Group(group)
	if !ok || g.Members[id] == nil {
		return
	}
	reason := c.expiredReason(memberKey{group, id}, g.Members[id])
	if reason == "" {
		return
	}
	ng := g.Clone()
	RemoveMember(ng, id, c.partitions(g))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.put(ctx, g.Version, ng); err != nil {
		c.log.Warn("removing a member failed; will retry", "group", group, "member", id, "reason", reason, "err", err)
		return
	}
	c.track(group, id, g.Members[id], nil)
	c.log.Info("member removed", "group", group, "member", id, "reason", reason, "group_epoch", ng.Epoch)
}

// expiredReason says why a member must go ("" when it may stay). Clocks a
// new leader has not seen yet start now.
func (c *Coordinator) expiredReason(k memberKey, m *fsm.Member) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	seen, ok := c.seen[k]
	if !ok {
		seen, c.seen[k] = now, now
	}
	if now.Sub(seen) > time.Duration(m.SessionTimeoutMs)*time.Millisecond {
		return "session expired"
	}
	if len(m.Revoking) == 0 {
		delete(c.revokeSince, k)
		return ""
	}
	since, ok := c.revokeSince[k]
	if !ok {
		since, c.revokeSince[k] = now, now
	}
	if now.Sub(since) > time.Duration(m.RebalanceTimeoutMs)*time.Millisecond {
		return "did not release revoked partitions within its rebalance timeout"
	}
	return ""
}
