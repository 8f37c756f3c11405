package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// Kafka's classic group protocol (package groups, classic.go), run by the
// coordinator on the Raft leader next to its own.
//
// A classic group's rebalance lives in the leader's memory, as in Kafka:
// members join (each join waits until the join phase ends), the
// coordinator bumps the generation, picks the protocol and the leader, the
// leader's SyncGroup brings the assignment, and only then is the group's
// state written through Raft (members, metadata, assignments, generation),
// before any member gets its assignment. A new leader of the offsets Raft
// group loads that state as Stable with fresh session clocks; joins and
// syncs waiting on the old leader fail with NOT_COORDINATOR, and their
// members find the coordinator again and rejoin. Commits are fenced by
// generation both here (in memory) and in the FSM (by the written
// generation), so a member of an older generation cannot commit.

// classicMember is one member of a classic group.
type classicMember struct {
	id, instanceID, clientID, clientHost string
	session, rebalance                   time.Duration
	protocols                            []groups.Protocol
	assignment                           []byte
	partitions                           []groups.TP // assignment, decoded for protocol type "consumer"
	seen                                 time.Time
	waiting                              int // join and sync requests waiting: the member is alive

	joined   bool                 // joined in the current rebalance
	joinResp *groups.JoinResponse // the join phase's answer, until its request takes it
	synced   bool                 // sent SyncGroup in the current generation
	syncResp *groups.SyncResponse // the assignment, until its request takes it
	syncErr  error
}

// protocol returns the member's protocol of name (nil when it has none).
func (m *classicMember) protocol(name string) *groups.Protocol {
	for i := range m.protocols {
		if m.protocols[i].Name == name {
			return &m.protocols[i]
		}
	}
	return nil
}

// classicGroup is a classic group's state on the leader.
type classicGroup struct {
	mu           sync.Mutex
	name         string
	state        string // groups.StateEmpty, StatePreparingRebalance, StateCompletingRebalance, StateStable
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*classicMember
	statics      map[string]string    // instance id -> member id
	pending      map[string]time.Time // ids given with MEMBER_ID_REQUIRED, not joined yet
	version      uint64               // the FSM version this state is written at (0: none)

	rebalanceStart time.Time // when the join phase began
	initialUntil   time.Time // an empty group's join phase lasts until then (zero: not initial)
	syncDeadline   time.Time // the leader must have synced by then

	wake chan struct{} // closed and replaced on every change waiters care about
	gone bool          // dropped from the coordinator: look it up again
}

func (g *classicGroup) broadcast() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// maxRebalance is the longest rebalance timeout of the members.
func (g *classicGroup) maxRebalance() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// classicGroup returns the leader's state of a classic group, loading the
// written state on first use after gaining leadership.
func (c *Coordinator) classicGroup(name string) (*classicGroup, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.classic[name]; g != nil {
		return g, nil
	}
	if len(c.classic) >= c.s.MaxClassicGroups {
		return nil, protocol.CoordinatorNotAvailable.Err("the coordinator holds %d classic groups in rebalance, its limit", len(c.classic))
	}
	g := &classicGroup{name: name, state: groups.StateEmpty, members: map[string]*classicMember{}, statics: map[string]string{},
		pending: map[string]time.Time{}, wake: make(chan struct{})}
	if w, ok := c.fsm.Group(name); ok {
		if !w.Classic() && len(w.Members) > 0 {
			return nil, protocol.InconsistentGroupProtocol.Err("group %s is a consumer group (KIP-848 or SDK) with %d members: a classic member cannot join it", name, len(w.Members))
		}
		g.version = w.Version
		if w.Classic() {
			g.generation, g.protocolType, g.protocol, g.leader = w.Epoch, w.ProtocolType, w.ProtocolName, w.Leader
			now := c.now()
			for id, wm := range w.Members {
				m := &classicMember{id: id, instanceID: wm.InstanceID, clientID: wm.ClientID, clientHost: wm.ClientHost,
					session: time.Duration(wm.SessionTimeoutMs) * time.Millisecond, rebalance: time.Duration(wm.RebalanceTimeoutMs) * time.Millisecond,
					protocols:  []groups.Protocol{{Name: w.ProtocolName, Metadata: wm.Metadata, Topics: wm.Topics}},
					assignment: wm.Assignment, partitions: wm.Assigned, seen: now, synced: true}
				g.members[id] = m
				if m.instanceID != "" {
					g.statics[m.instanceID] = id
				}
			}
			if len(g.members) > 0 {
				g.state = groups.StateStable
			}
		}
	}
	c.classic[name] = g
	return g, nil
}

// withClassic runs fn on the group's state under its lock, looking the group
// up again if it was dropped meanwhile.
func (c *Coordinator) withClassic(name string, fn func(g *classicGroup) error) error {
	if err := groups.ValidateGroupID(name); err != nil {
		return protocol.InvalidGroupID.Err("%v", err)
	}
	for {
		if !c.Ready() {
			return ErrNotLeader
		}
		g, err := c.classicGroup(name)
		if err != nil {
			return err
		}
		g.mu.Lock()
		if g.gone {
			g.mu.Unlock()
			continue
		}
		err = fn(g)
		g.mu.Unlock()
		return err
	}
}

// dropClassic forgets every classic group (leadership changed): waiting
// requests answer NOT_COORDINATOR.
func (c *Coordinator) dropClassic() {
	c.mu.Lock()
	all := c.classic
	c.classic = map[string]*classicGroup{}
	c.mu.Unlock()
	for _, g := range all {
		g.mu.Lock()
		g.gone = true
		g.broadcast()
		g.mu.Unlock()
	}
}

// await waits, without the group's lock, until take finds the member's
// answer, the member is removed, the group is dropped or ctx ends.
func await[T any](c *Coordinator, ctx context.Context, g *classicGroup, id string, take func(m *classicMember) (T, bool, error)) (T, error) {
	var zero T
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.members[id]; m != nil {
		defer func() {
			if m := g.members[id]; m != nil && m.waiting > 0 {
				m.waiting--
				m.seen = c.now()
			}
		}()
	}
	for {
		if g.gone {
			return zero, fmt.Errorf("%w: group %s moved with the coordinator", ErrNotLeader, g.name)
		}
		m := g.members[id]
		if m == nil {
			return zero, protocol.UnknownMemberID.Err("member %s was removed from group %s while it waited (its session or the rebalance timed out, or it was fenced)", id, g.name)
		}
		if v, ok, err := take(m); ok || err != nil {
			return v, err
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
			g.mu.Lock()
		case <-ctx.Done():
			g.mu.Lock()
			return zero, protocol.RequestTimedOut.Err("group %s: the rebalance did not reach this member in time: %v", g.name, ctx.Err())
		}
	}
}

// persistClassic writes the group's state through Raft (compare-and-set on
// the version it was loaded or last written at). A conflict means another
// writer changed the group (it was deleted, or taken over by the consumer
// protocol): the state here is dropped and its members rejoin.
func (c *Coordinator) persistClassic(ctx context.Context, g *classicGroup) error {
	w := &fsm.Group{Name: g.name, Protocol: groups.ProtocolClassic, ProtocolType: g.protocolType, ProtocolName: g.protocol,
		Leader: g.leader, Epoch: g.generation, Members: map[string]*fsm.Member{}}
	if g.state == groups.StateEmpty {
		w.Members = nil
	}
	for id, m := range g.members {
		if g.state == groups.StateEmpty {
			break
		}
		fm := &fsm.Member{ID: id, ClientID: m.clientID, Epoch: g.generation, InstanceID: m.instanceID, ClientHost: m.clientHost,
			SessionTimeoutMs: int32(m.session.Milliseconds()), RebalanceTimeoutMs: int32(m.rebalance.Milliseconds()),
			Assignment: m.assignment, Assigned: m.partitions}
		if p := m.protocol(g.protocol); p != nil {
			fm.Metadata, fm.Topics = p.Metadata, sortedTopics(p.Topics)
		}
		w.Members[id] = fm
	}
	unlock := c.lockGroup(g.name)
	defer unlock()
	cur, _ := c.fsm.Group(g.name)
	var have uint64
	if cur != nil {
		have = cur.Version
	}
	if have != g.version {
		c.dropGroup(g)
		return fmt.Errorf("%w: group %s was changed by another writer (version %d, this state was read at %d)", ErrNotLeader, g.name, have, g.version)
	}
	if err := c.put(ctx, g.version, w); err != nil {
		if protocol.CodeOf(err) == protocol.InvalidUpdateVersion {
			c.dropGroup(g)
		}
		return err
	}
	if now, ok := c.fsm.Group(g.name); ok {
		g.version = now.Version
	}
	return nil
}

// dropGroup forgets one group's state here (g.mu held): it is read again
// from the FSM on its next request.
func (c *Coordinator) dropGroup(g *classicGroup) {
	g.gone = true
	g.broadcast()
	c.mu.Lock()
	if c.classic[g.name] == g {
		delete(c.classic, g.name)
	}
	c.mu.Unlock()
}

// member finds a classic member and checks the request's instance id and
// generation against it.
func (g *classicGroup) member(id, instanceID string, generation int32) (*classicMember, error) {
	m := g.members[id]
	if m == nil && instanceID != "" && g.statics[instanceID] != "" {
		return nil, protocol.FencedInstanceID.Err("instance %s of group %s rejoined as member %s; member %s is fenced", instanceID, g.name, g.statics[instanceID], id)
	}
	if m == nil {
		return nil, protocol.UnknownMemberID.Err("member %s is not in group %s (it left or its session expired); join again", id, g.name)
	}
	if m.instanceID != instanceID {
		return nil, protocol.FencedInstanceID.Err("member %s of group %s has instance id %q, not %q", id, g.name, m.instanceID, instanceID)
	}
	if generation != g.generation {
		return nil, protocol.IllegalGeneration.Err("member %s of group %s is in generation %d; the group is in generation %d: join again", id, g.name, generation, g.generation)
	}
	return m, nil
}

// checkClassicCommit applies the classic protocol's rules to a commit on the
// leader's state: a member of the current generation, not while its group
// waits for the leader's assignment. ok is false when the group is not a
// classic group held here.
func (c *Coordinator) checkClassicCommit(group, member string, generation int32) (ok bool, err error) {
	c.mu.Lock()
	g := c.classic[group]
	c.mu.Unlock()
	if g == nil {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return false, nil
	}
	if member == "" {
		if len(g.members) > 0 {
			return true, protocol.UnknownMemberID.Err("group %s has %d active members: commit as one of them", group, len(g.members))
		}
		return true, nil
	}
	m, err := g.member(member, g.members[member].instanceIDOr(), generation)
	if err != nil {
		return true, err
	}
	if g.state == groups.StateCompletingRebalance {
		return true, protocol.RebalanceInProgress.Err("group %s is waiting for its leader's assignment; commit after it", group)
	}
	m.seen = c.now()
	return true, nil
}

func (m *classicMember) instanceIDOr() string {
	if m == nil {
		return ""
	}
	return m.instanceID
}

// ClassicState returns a classic group's state as the leader holds it, and
// whether it holds it (members in a rebalance are not written yet).
func (c *Coordinator) ClassicState(group string) (state string, members int, ok bool) {
	c.mu.Lock()
	g := c.classic[group]
	c.mu.Unlock()
	if g == nil {
		return "", 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return "", 0, false
	}
	return g.state, len(g.members), true
}
