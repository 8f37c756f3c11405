package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
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

// validateJoin checks a join's fields.
func (c *Coordinator) validateJoin(req *groups.JoinRequest) error {
	session := time.Duration(req.SessionTimeoutMs) * time.Millisecond
	if session < c.s.MinSessionTimeout || session > c.s.MaxSessionTimeout {
		return protocol.InvalidSessionTimeout.Err("session timeout %v is outside [%v, %v]", session, c.s.MinSessionTimeout, c.s.MaxSessionTimeout)
	}
	if req.RebalanceTimeoutMs <= 0 {
		req.RebalanceTimeoutMs = req.SessionTimeoutMs // JoinGroup v0 has none: Kafka uses the session timeout
	}
	if r := time.Duration(req.RebalanceTimeoutMs) * time.Millisecond; r > c.s.MaxRebalanceTimeout {
		return protocol.InvalidRequest.Err("rebalance timeout %v is longer than the coordinator's limit %v", r, c.s.MaxRebalanceTimeout)
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return protocol.InconsistentGroupProtocol.Err("a join must name a protocol type and at least one protocol")
	}
	size := 0
	for _, p := range req.Protocols {
		if p.Name == "" {
			return protocol.InconsistentGroupProtocol.Err("a protocol without a name")
		}
		size += len(p.Name) + len(p.Metadata)
	}
	if size > c.s.MaxMemberMetadata {
		return protocol.InvalidRequest.Err("the member's protocol metadata is %d bytes, over the coordinator's limit of %d", size, c.s.MaxMemberMetadata)
	}
	if req.MemberID != "" {
		if err := groups.ValidateMemberID(req.MemberID); err != nil {
			return protocol.InvalidRequest.Err("%v", err)
		}
	}
	if len(req.InstanceID) > groups.MaxMemberIDLen {
		return protocol.InvalidRequest.Err("group instance id is longer than %d characters", groups.MaxMemberIDLen)
	}
	return nil
}

// Join handles a classic JoinGroup: it returns when the join phase of the
// rebalance the member takes part in is over, or at once when nothing needs
// to change (a known member of a stable group) or a member id must be
// handed out first.
func (c *Coordinator) Join(ctx context.Context, group string, req groups.JoinRequest) (*groups.JoinResponse, error) {
	if err := c.validateJoin(&req); err != nil {
		return nil, err
	}
	var (
		g    *classicGroup
		id   string
		resp *groups.JoinResponse
	)
	err := c.withClassic(group, func(cg *classicGroup) error {
		g = cg
		var err error
		id, resp, err = c.joinLocked(ctx, cg, req)
		if id != "" && resp == nil && err == nil {
			cg.members[id].waiting++
		}
		return err
	})
	if err != nil || resp != nil {
		return resp, err
	}
	return await(c, ctx, g, id, func(m *classicMember) (*groups.JoinResponse, bool, error) {
		if r := m.joinResp; r != nil {
			m.joinResp = nil
			return r, true, nil
		}
		return nil, false, nil
	})
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

// joinLocked applies a join. It returns the member's id and either an answer
// now, or none: the member waits for the join phase's end.
func (c *Coordinator) joinLocked(ctx context.Context, g *classicGroup, req groups.JoinRequest) (string, *groups.JoinResponse, error) {
	now := c.now()
	if g.state == groups.StateEmpty {
		g.protocolType = req.ProtocolType
	} else {
		if req.ProtocolType != g.protocolType {
			return "", nil, protocol.InconsistentGroupProtocol.Err("group %s has protocol type %q; the member asks for %q", g.name, g.protocolType, req.ProtocolType)
		}
		if !c.sharesProtocol(g, req.MemberID, req.Protocols) {
			return "", nil, protocol.InconsistentGroupProtocol.Err("the member supports none of the protocols every member of group %s supports", g.name)
		}
	}
	if req.MemberID == "" {
		if req.InstanceID != "" {
			if old, ok := g.statics[req.InstanceID]; ok && g.members[old] != nil {
				return c.replaceStatic(ctx, g, old, req, now)
			}
		} else if req.RequireKnownMemberID {
			if err := c.roomFor(g); err != nil {
				return "", nil, err
			}
			id := groups.NewMemberID(req.ClientID)
			g.pending[id] = now
			return id, &groups.JoinResponse{ErrorCode: int16(protocol.MemberIDRequired), MemberID: id, Generation: -1}, nil
		}
		if err := c.roomFor(g); err != nil {
			return "", nil, err
		}
		return c.addMember(g, groups.NewMemberID(req.ClientID), req, now), nil, nil
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		if req.InstanceID != "" {
			if old, ok := g.statics[req.InstanceID]; ok && g.members[old] != nil {
				return c.replaceStatic(ctx, g, old, req, now)
			}
		}
		return c.addMember(g, req.MemberID, req, now), nil, nil
	}
	m := g.members[req.MemberID]
	if m == nil {
		return "", nil, protocol.UnknownMemberID.Err("member %s is not in group %s (it left or its session expired); join with an empty member id", req.MemberID, g.name)
	}
	if m.instanceID != req.InstanceID {
		return "", nil, protocol.FencedInstanceID.Err("member %s of group %s has instance id %q, not %q", m.id, g.name, m.instanceID, req.InstanceID)
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	update(m, req, now)
	switch g.state {
	case groups.StateCompletingRebalance, groups.StateStable:
		if !changed && (g.state == groups.StateCompletingRebalance || m.id != g.leader) {
			// A repeated join (its answer was lost) or a follower's rejoin
			// that changes nothing: the current generation stands.
			return m.id, c.joinAnswer(g, m, false), nil
		}
		c.prepareRebalance(g, now, "member "+m.id+" rejoined")
	}
	m.joined = true
	c.maybeCompleteJoin(ctx, g, now)
	return m.id, nil, nil
}

// roomFor refuses a new member past the group's size limit.
func (c *Coordinator) roomFor(g *classicGroup) error {
	if len(g.members)+len(g.pending) >= c.s.MaxGroupSize {
		return protocol.GroupMaxSizeReached.Err("group %s has %d members and joining members, the coordinator's limit", g.name, len(g.members)+len(g.pending))
	}
	return nil
}

// addMember adds a member that waits for the join phase.
func (c *Coordinator) addMember(g *classicGroup, id string, req groups.JoinRequest, now time.Time) string {
	m := &classicMember{id: id, instanceID: req.InstanceID}
	update(m, req, now)
	g.members[id] = m
	if m.instanceID != "" {
		g.statics[m.instanceID] = id
	}
	if g.state != groups.StatePreparingRebalance {
		c.prepareRebalance(g, now, "member "+id+" joined")
	} else if !g.initialUntil.IsZero() {
		// Each member joining an empty group's first rebalance extends it
		// a little, so a fleet starting together lands in one generation.
		g.initialUntil = now.Add(c.s.InitialRebalanceDelay)
	}
	m.joined = true
	c.maybeCompleteJoin(context.Background(), g, now)
	return id
}

// replaceStatic hands a static member's place to its new incarnation (the
// same group.instance.id, a new member id); the old one is fenced. A stable
// group whose member comes back with the group's protocol keeps its
// assignment: no rebalance, the member syncs and gets it.
func (c *Coordinator) replaceStatic(ctx context.Context, g *classicGroup, old string, req groups.JoinRequest, now time.Time) (string, *groups.JoinResponse, error) {
	m := g.members[old]
	// As Kafka: only a change of the group's protocol makes the return of
	// a static member rebalance a stable group; new metadata does not (a
	// restarted member owns nothing yet, and says so in its metadata).
	changed := !slices.ContainsFunc(req.Protocols, func(p groups.Protocol) bool { return p.Name == g.protocol })
	delete(g.members, old)
	m.id = groups.NewMemberID(req.ClientID)
	m.joinResp, m.syncResp, m.syncErr, m.waiting = nil, nil, nil, 0
	update(m, req, now)
	g.members[m.id] = m
	g.statics[m.instanceID] = m.id
	wasLeader := g.leader == old
	if wasLeader {
		g.leader = m.id
	}
	g.broadcast() // the old incarnation's waiting requests end
	c.log.Info("static member replaced", "group", g.name, "instance_id", m.instanceID, "old_member", old, "member", m.id)
	if g.state == groups.StateStable && !changed {
		if err := c.persistClassic(ctx, g); err != nil {
			return "", nil, err
		}
		return m.id, c.joinAnswer(g, m, wasLeader), nil
	}
	if g.state != groups.StatePreparingRebalance {
		c.prepareRebalance(g, now, "static member "+m.instanceID+" rejoined with other protocols")
	}
	m.joined = true
	c.maybeCompleteJoin(ctx, g, now)
	return m.id, nil, nil
}

// update copies a join's member settings.
func update(m *classicMember, req groups.JoinRequest, now time.Time) {
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.session = time.Duration(req.SessionTimeoutMs) * time.Millisecond
	m.rebalance = time.Duration(req.RebalanceTimeoutMs) * time.Millisecond
	m.protocols = slices.Clone(req.Protocols)
	m.seen = now
}

func sameProtocols(a, b []groups.Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y groups.Protocol) bool { return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata) })
}

// sharesProtocol reports whether protocols has one that every other member
// (all but the one with id self) supports.
func (c *Coordinator) sharesProtocol(g *classicGroup, self string, protocols []groups.Protocol) bool {
	for _, p := range protocols {
		all := true
		for id, m := range g.members {
			if id != self && m.protocol(p.Name) == nil {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// prepareRebalance starts a join phase: every member must join again.
func (c *Coordinator) prepareRebalance(g *classicGroup, now time.Time, reason string) {
	if g.state == groups.StateCompletingRebalance {
		for _, m := range g.members {
			if m.synced && m.syncResp == nil {
				m.syncErr = protocol.RebalanceInProgress.Err("group %s is rebalancing again (%s); join again", g.name, reason)
			}
		}
	}
	g.initialUntil = time.Time{}
	if g.state == groups.StateEmpty {
		g.initialUntil = now.Add(c.s.InitialRebalanceDelay)
	}
	for _, m := range g.members {
		m.joined, m.joinResp = false, nil
	}
	g.state = groups.StatePreparingRebalance
	g.rebalanceStart = now
	g.broadcast()
	c.log.Info("classic group rebalancing", "group", g.name, "generation", g.generation, "reason", reason)
}

// maybeCompleteJoin ends the join phase when it is done: every member
// joined (and every member id handed out came back), an empty group's
// initial delay passed, or the rebalance timeout ran out (members that did
// not join are removed, static ones kept).
func (c *Coordinator) maybeCompleteJoin(ctx context.Context, g *classicGroup, now time.Time) {
	if g.state != groups.StatePreparingRebalance {
		return
	}
	timedOut := now.Sub(g.rebalanceStart) >= g.maxRebalance()
	all := len(g.pending) == 0
	for _, m := range g.members {
		all = all && m.joined
	}
	switch {
	case timedOut:
	case !g.initialUntil.IsZero():
		if now.Before(g.initialUntil) {
			return
		}
	case !all:
		return
	}
	for id, m := range g.members {
		if !m.joined && m.instanceID == "" {
			c.removeMember(g, id, "did not join the rebalance in time")
		}
	}
	g.generation++
	g.initialUntil = time.Time{}
	joined := 0
	for _, m := range g.members {
		joined += b2i(m.joined)
	}
	if joined == 0 {
		for id := range g.members {
			c.removeMember(g, id, "no member joined the rebalance")
		}
		c.becomeEmpty(ctx, g)
		return
	}
	if m := g.members[g.leader]; m == nil || !m.joined {
		g.leader = ""
		for _, id := range sortedIDs(g.members) {
			if g.members[id].joined {
				g.leader = id
				break
			}
		}
	}
	g.protocol = c.selectProtocol(g)
	for _, m := range g.members {
		m.synced, m.syncResp, m.syncErr = false, nil, nil
	}
	g.state = groups.StateCompletingRebalance
	g.syncDeadline = now.Add(g.maxRebalance())
	for _, m := range g.members {
		if m.joined {
			m.joinResp = c.joinAnswer(g, m, false)
		}
	}
	g.broadcast()
	c.log.Info("classic group join phase done", "group", g.name, "generation", g.generation, "protocol", g.protocol, "leader", g.leader, "members", len(g.members))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sortedIDs(m map[string]*classicMember) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// joinAnswer is m's JoinGroup answer for the current generation; the leader
// gets the members with their metadata.
func (c *Coordinator) joinAnswer(g *classicGroup, m *classicMember, skipAssignment bool) *groups.JoinResponse {
	r := &groups.JoinResponse{Generation: g.generation, ProtocolType: g.protocolType, ProtocolName: g.protocol, Leader: g.leader,
		MemberID: m.id, SkipAssignment: skipAssignment}
	if m.id == g.leader {
		r.Members = []groups.JoinedMember{}
		for _, id := range sortedIDs(g.members) {
			o := g.members[id]
			jm := groups.JoinedMember{MemberID: id, InstanceID: o.instanceID}
			if p := o.protocol(g.protocol); p != nil {
				jm.Metadata = p.Metadata
			}
			r.Members = append(r.Members, jm)
		}
	}
	return r
}

// selectProtocol picks the protocol every member supports that most members
// prefer (each votes for its first such); a tie goes to the leader's order.
func (c *Coordinator) selectProtocol(g *classicGroup) string {
	leader := g.members[g.leader]
	var candidates []string
	for _, p := range leader.protocols {
		all := true
		for _, m := range g.members {
			all = all && m.protocol(p.Name) != nil
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range candidates {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// removeMember drops a member (left, expired, fenced).
func (c *Coordinator) removeMember(g *classicGroup, id, reason string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	if m.instanceID != "" && g.statics[m.instanceID] == id {
		delete(g.statics, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
	}
	g.broadcast()
	c.log.Info("classic member removed", "group", g.name, "member", id, "client_id", m.clientID, "reason", reason)
}

// afterRemoval moves a group that lost members on: a new rebalance, or Empty.
func (c *Coordinator) afterRemoval(ctx context.Context, g *classicGroup, now time.Time, reason string) {
	switch {
	case len(g.members) == 0 && len(g.pending) == 0:
		c.becomeEmpty(ctx, g)
	case g.state == groups.StatePreparingRebalance:
		c.maybeCompleteJoin(ctx, g, now)
	default:
		c.prepareRebalance(g, now, reason)
	}
}

// becomeEmpty ends the group's generation with no members and writes that.
func (c *Coordinator) becomeEmpty(ctx context.Context, g *classicGroup) {
	g.state, g.leader = groups.StateEmpty, ""
	g.broadcast()
	if g.version == 0 && g.generation == 0 {
		return // nothing was ever written
	}
	if err := c.persistClassic(ctx, g); err != nil {
		c.log.Warn("writing an empty classic group failed", "group", g.name, "err", err)
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

// Sync handles a classic SyncGroup: the leader's brings the assignment,
// which is written through Raft before any member gets its part; the others
// wait for it.
func (c *Coordinator) Sync(ctx context.Context, group string, req groups.SyncRequest) (*groups.SyncResponse, error) {
	var (
		g    *classicGroup
		resp *groups.SyncResponse
	)
	err := c.withClassic(group, func(cg *classicGroup) error {
		g = cg
		m, err := cg.member(req.MemberID, req.InstanceID, req.Generation)
		if err != nil {
			return err
		}
		if req.ProtocolType != "" && req.ProtocolType != cg.protocolType || req.ProtocolName != "" && req.ProtocolName != cg.protocol {
			return protocol.InconsistentGroupProtocol.Err("group %s uses %s/%s; the sync names %s/%s", cg.name, cg.protocolType, cg.protocol, req.ProtocolType, req.ProtocolName)
		}
		m.seen = c.now()
		switch cg.state {
		case groups.StatePreparingRebalance:
			return protocol.RebalanceInProgress.Err("group %s is rebalancing; join again", cg.name)
		case groups.StateStable:
			resp = &groups.SyncResponse{ProtocolType: cg.protocolType, ProtocolName: cg.protocol, Assignment: m.assignment}
			return nil
		}
		m.synced = true
		if m.id != cg.leader {
			m.waiting++
			return nil
		}
		if err := c.assignFromLeader(ctx, cg, req.Assignments); err != nil {
			return err
		}
		resp = m.syncResp
		m.syncResp = nil
		return nil
	})
	if err != nil || resp != nil {
		return resp, err
	}
	return await(c, ctx, g, req.MemberID, func(m *classicMember) (*groups.SyncResponse, bool, error) {
		if r := m.syncResp; r != nil {
			m.syncResp = nil
			return r, true, nil
		}
		if m.syncErr != nil {
			err := m.syncErr
			m.syncErr = nil
			return nil, true, err
		}
		if g.generation != req.Generation {
			return nil, true, protocol.RebalanceInProgress.Err("group %s started another rebalance; join again", g.name)
		}
		return nil, false, nil
	})
}

// assignFromLeader checks the leader's assignment, writes the generation
// and hands every member its part.
func (c *Coordinator) assignFromLeader(ctx context.Context, g *classicGroup, as []groups.MemberAssignment) error {
	byID := map[string]groups.MemberAssignment{}
	owner := map[groups.TP]string{}
	counts, haveCounts := c.topics.Partitions()
	for _, a := range as {
		if g.members[a.MemberID] == nil {
			continue // a member removed meanwhile: Kafka ignores it too
		}
		if len(a.Assignment) > c.s.MaxAssignment {
			return protocol.InvalidRequest.Err("the assignment of member %s is %d bytes, over the coordinator's limit of %d", a.MemberID, len(a.Assignment), c.s.MaxAssignment)
		}
		if g.protocolType != groups.ProtocolTypeConsumer {
			a.Partitions = nil // another protocol's assignment is opaque here
		}
		for _, p := range groups.Flatten(a.Partitions) {
			if o, ok := owner[p]; ok && o != a.MemberID {
				return protocol.InvalidRequest.Err("the leader's assignment gives %s to both %s and %s", p, o, a.MemberID)
			}
			if n, ok := counts[p.Topic]; haveCounts && (!ok || p.Partition < 0 || p.Partition >= n) {
				return protocol.InvalidRequest.Err("the leader's assignment names %s, which does not exist", p)
			}
			owner[p] = a.MemberID
		}
		byID[a.MemberID] = a
	}
	for id, m := range g.members {
		a := byID[id]
		m.assignment, m.partitions = a.Assignment, groups.Flatten(a.Partitions)
		if m.assignment == nil {
			m.assignment = []byte{}
		}
	}
	if err := c.persistClassic(ctx, g); err != nil {
		if !g.gone {
			c.prepareRebalance(g, c.now(), "writing the generation failed")
		}
		return err
	}
	g.state = groups.StateStable
	for _, m := range g.members {
		if m.synced {
			m.syncResp = &groups.SyncResponse{ProtocolType: g.protocolType, ProtocolName: g.protocol, Assignment: m.assignment}
		}
	}
	g.broadcast()
	c.log.Info("classic group stable", "group", g.name, "generation", g.generation, "members", len(g.members))
	return nil
}

// ClassicHeartbeat renews a classic member's session; during a rebalance it
// answers REBALANCE_IN_PROGRESS so the member joins again.
func (c *Coordinator) ClassicHeartbeat(_ context.Context, group string, req groups.ClassicHeartbeatRequest) error {
	return c.withClassic(group, func(g *classicGroup) error {
		if g.state == groups.StateEmpty {
			return protocol.UnknownMemberID.Err("group %s has no members; join again", g.name)
		}
		m, err := g.member(req.MemberID, req.InstanceID, req.Generation)
		if err != nil {
			return err
		}
		m.seen = c.now()
		if g.state == groups.StatePreparingRebalance {
			return protocol.RebalanceInProgress.Err("group %s is rebalancing; join again", g.name)
		}
		return nil
	})
}

// Leave removes classic members (by member id, or a static member by its
// instance id alone); each gets its own outcome.
func (c *Coordinator) Leave(ctx context.Context, group string, req groups.LeaveRequest) (*groups.LeaveResponse, error) {
	if len(req.Members) == 0 {
		return nil, protocol.InvalidRequest.Err("a leave must name at least one member")
	}
	out := &groups.LeaveResponse{}
	err := c.withClassic(group, func(g *classicGroup) error {
		removed := 0
		for _, lm := range req.Members {
			left := groups.LeftMember{MemberID: lm.MemberID, InstanceID: lm.InstanceID}
			id := lm.MemberID
			if id == "" && lm.InstanceID != "" {
				id = g.statics[lm.InstanceID]
			}
			m := g.members[id]
			switch {
			case m == nil:
				if _, ok := g.pending[id]; ok && id != "" {
					delete(g.pending, id)
					removed++
					break
				}
				left.ErrorCode = int16(protocol.UnknownMemberID)
			case m.instanceID != lm.InstanceID:
				left.ErrorCode = int16(protocol.FencedInstanceID)
			default:
				reason := "left the group"
				if lm.Reason != "" {
					reason += ": " + lm.Reason
				}
				c.removeMember(g, id, reason)
				removed++
			}
			out.Members = append(out.Members, left)
		}
		if removed > 0 {
			c.afterRemoval(ctx, g, c.now(), "a member left")
		}
		return nil
	})
	return out, err
}

// expireClassic runs the classic groups' clocks: sessions, the join phase's
// end, the leader's sync deadline, member ids handed out and never used;
// and it forgets empty groups nobody waits on.
func (c *Coordinator) expireClassic() {
	if !c.Ready() {
		return
	}
	c.mu.Lock()
	all := make([]*classicGroup, 0, len(c.classic))
	for _, g := range c.classic {
		all = append(all, g)
	}
	c.mu.Unlock()
	for _, g := range all {
		g.mu.Lock()
		if !g.gone {
			c.tickClassic(g)
		}
		g.mu.Unlock()
	}
}

func (c *Coordinator) tickClassic(g *classicGroup) {
	now := c.now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	removed := false
	for id, m := range g.members {
		if m.waiting == 0 && now.Sub(m.seen) > m.session {
			c.removeMember(g, id, "session expired")
			removed = true
		}
	}
	for id, at := range g.pending {
		if now.Sub(at) > c.s.MaxSessionTimeout {
			delete(g.pending, id)
			removed = true
		}
	}
	if g.state == groups.StateCompletingRebalance && now.After(g.syncDeadline) {
		for id, m := range g.members {
			if !m.synced {
				c.removeMember(g, id, "did not sync within the rebalance timeout")
				removed = true
			}
		}
		if !removed {
			c.prepareRebalance(g, now, "the leader did not sync in time")
		}
	}
	if removed {
		c.afterRemoval(ctx, g, now, "members were removed")
	}
	c.maybeCompleteJoin(ctx, g, now)
	if g.state == groups.StateEmpty && len(g.pending) == 0 {
		c.dropGroup(g) // its written state is all there is to it
	}
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
