package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// session is the leader's view of one alive storage node's heartbeats.
type session struct {
	epoch    int64
	lastSeen time.Time
	// heard: lastSeen is a registration or heartbeat this leader received,
	// not the grace a new leader gives (expire).
	heard bool
}

// expire is the session rule, a pure function of the registered nodes, the
// session table and the clock. It brings sessions in line with nodes and
// returns the fencing commands for the nodes whose session lapsed:
//   - a dead node has no session: only a new registration revives it;
//   - an alive node without a session for its current epoch (registered
//     through an earlier leader's log, or this leader just took over) gets
//     one starting now, so a leader change fences no one;
//   - an alive node silent for longer than timeout is fenced at its current
//     epoch (FenceNode marks it dead and bumps the epoch).
func expire(nodes []cluster.Node, sessions map[int32]session, now time.Time, timeout time.Duration) []fsm.FenceNode {
	var alive []registration
	for _, n := range nodes {
		if n.Alive {
			alive = append(alive, registration{n.ID, n.Epoch})
		}
	}
	var fences []fsm.FenceNode
	for _, r := range lapsed(alive, sessions, now, timeout) {
		fences = append(fences, fsm.FenceNode{ID: r.id, Epoch: r.epoch})
	}
	return fences
}

// registration is a registered member (a storage node, a frontend) at its
// current epoch.
type registration struct {
	id    int32
	epoch int64
}

// lapsed is the rule storage nodes and frontends share: a member without a
// session for its current epoch gets one starting now; one silent for
// longer than timeout has lapsed and is returned; sessions of members not
// in regs are dropped.
func lapsed(regs []registration, sessions map[int32]session, now time.Time, timeout time.Duration) []registration {
	current := make(map[int32]bool, len(regs))
	var out []registration
	for _, r := range regs {
		current[r.id] = true
		s, ok := sessions[r.id]
		if !ok || s.epoch != r.epoch {
			sessions[r.id] = session{epoch: r.epoch, lastSeen: now}
			continue
		}
		if now.Sub(s.lastSeen) > timeout {
			out = append(out, r)
		}
	}
	for id := range sessions {
		if !current[id] {
			delete(sessions, id)
		}
	}
	return out
}

// Register commits a storage node's registration and opens its session. It
// returns the node's new epoch. The node comes back alive but joins no ISR
// (partition leaders add it once it caught up); a node that registers again
// without having expired leaves the ISRs where another member remains that
// this leader heard from lately (freshNodes), since its restart may have cost
// it records (fsm.RegisterNode.LeavesISRs).
// Offline partitions whose ISR holds it get it as leader at the next
// partition check, which this starts.
func (c *Controller) Register(ctx context.Context, req cluster.RegisterRequest) (int64, error) {
	if !c.Active() {
		return 0, ErrNotActive
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeRegisterNode, RegisterNode: &fsm.RegisterNode{
		ID: req.ID, Addr: req.Addr, AdvertisedAddr: req.AdvertisedAddr, KafkaAddr: req.KafkaAddr, Rack: req.Rack, LeavesISRs: true, Fresh: c.freshNodes(req.ID),
	}})
	if err != nil {
		return 0, err
	}
	if res.Err != nil {
		return 0, res.Err
	}
	c.mu.Lock()
	if c.sessions != nil {
		c.sessions[req.ID] = session{epoch: res.Epoch, lastSeen: c.now(), heard: true}
	}
	c.mu.Unlock()
	signal(c.kick)
	c.log.Info("storage node registered", "node", req.ID, "epoch", res.Epoch, "addr", req.Addr, "rack", req.Rack)
	return res.Epoch, nil
}

// Heartbeat renews an alive storage node's session. It is in-memory only. A
// heartbeat from a dead (fenced) node, or with another epoch than the
// registered one, is ErrFencedEpoch: the node must register again.
func (c *Controller) Heartbeat(req cluster.HeartbeatRequest) error {
	n, ok := c.fsm.Node(req.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return ErrNotActive
	}
	if err := checkEpoch(n, ok, req.ID, req.Epoch); err != nil {
		return err
	}
	c.sessions[req.ID] = session{epoch: n.Epoch, lastSeen: c.now(), heard: true}
	return nil
}

// freshNodes lists, in id order, the storage nodes other than except that
// this leader heard from within half a session timeout: the ISR members a
// re-registering node may leave its partitions to (fsm.RegisterNode.Fresh).
// A node silent for longer may be down itself (the whole cluster restarting
// at once), and leaving the ISR to it alone could leave a partition offline
// with the replicas that hold its records outside the ISR.
func (c *Controller) freshNodes(except int32) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var out []int32
	for id, s := range c.sessions {
		if id != except && s.heard && now.Sub(s.lastSeen) <= c.cfg.SessionTimeout/2 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// checkEpoch is the rule for requests a node makes about itself: it must be
// registered, alive and at the epoch it names.
func checkEpoch(n cluster.Node, registered bool, id int32, epoch int64) error {
	switch {
	case !registered:
		return fmt.Errorf("%w: node %d", ErrUnknownNode, id)
	case epoch != n.Epoch:
		return fmt.Errorf("%w: node %d sent epoch %d, its registration is at epoch %d; register again", ErrFencedEpoch, id, epoch, n.Epoch)
	case !n.Alive:
		return fmt.Errorf("%w: node %d is dead; register again", ErrFencedEpoch, id)
	}
	return nil
}

// checkSessions fences the nodes whose session lapsed, brings every
// partition in line with liveness (reconcileLocked), then moves
// reassignments on (reassignLocked).
func (c *Controller) checkSessions() {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	nodes := c.fsm.Nodes()
	c.mu.Lock()
	if !c.active {
		c.mu.Unlock()
		return
	}
	fences := expire(nodes, c.sessions, c.now(), c.cfg.SessionTimeout)
	c.mu.Unlock()
	for _, f := range fences {
		c.fence(f)
	}
	c.reconcileLocked()
	c.reassignLocked()
}

// fence commits one FenceNode; failures are retried by the next check, as
// the session stays lapsed.
func (c *Controller) fence(f fsm.FenceNode) {
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeFenceNode, FenceNode: &f})
	if err == nil {
		err = res.Err
	}
	switch {
	case errors.Is(err, fsm.ErrStaleNodeEpoch):
		c.log.Debug("fencing overtaken by a registration", "node", f.ID, "err", err)
	case err != nil:
		c.log.Warn("fencing not committed; will retry", "node", f.ID, "err", err)
	default:
		c.log.Warn("storage node session expired: fenced and marked dead", "node", f.ID,
			"epoch", f.Epoch, "new_epoch", res.Epoch, "session_timeout", c.cfg.SessionTimeout)
	}
}
