package coordinator

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// The join phase of a classic rebalance (classic.go): who joins, when the
// phase ends, which protocol and leader the generation gets, and who is
// removed.

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
