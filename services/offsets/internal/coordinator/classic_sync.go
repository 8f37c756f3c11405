package coordinator

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// The rest of a classic generation (classic.go): the leader's assignment
// (SyncGroup), heartbeats, leaves, and the clocks that remove silent
// members.

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
