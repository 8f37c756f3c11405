package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// maxShutdownRounds bounds how often a controlled shutdown re-plans after
// its changes raced with others (an ISR change by a leader, say).
const maxShutdownRounds = 3

// reconcileLocked proposes the outcome of elect for every partition that
// needs a change. It stops at the first commit failure (leadership lost,
// stopping, timeout): the next check, on this leader or the next, starts
// again from the state. Callers hold opMu.
func (c *Controller) reconcileLocked() {
	if !c.Active() {
		return
	}
	v := c.fsm.View()
	for _, ch := range planElections(v.Topics, livenessOf(v)) {
		ctx, cancel := c.ctx()
		_, err := c.propose(ctx, ch, "election")
		cancel()
		if err != nil {
			return
		}
	}
}

// electPreferred moves leadership back to preferred replicas (the timer of
// Config.PreferredLeaderInterval).
func (c *Controller) electPreferred() {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if !c.Active() {
		return
	}
	v := c.fsm.View()
	for _, ch := range planPreferred(v.Topics, livenessOf(v)) {
		ctx, cancel := c.ctx()
		_, err := c.propose(ctx, ch, "preferred leader")
		cancel()
		if err != nil {
			return
		}
	}
}

// propose commits one decided change as an UpdatePartition carrying the
// epochs it was decided from. The error is a failure to commit; applied
// reports whether the FSM took it (false when it was stale: the partition
// changed meanwhile, and the next plan starts from the new state).
func (c *Controller) propose(ctx context.Context, ch change, why string) (applied bool, err error) {
	p := ch.from
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeUpdatePartition, UpdatePartition: &fsm.UpdatePartition{
		Topic: ch.topic, Partition: p.ID, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Leader: ch.leader, ISR: ch.isr,
	}})
	part := fmt.Sprintf("%s-%d", ch.topic, p.ID)
	if err != nil {
		c.log.Warn("partition change not committed; will retry", "partition", part, "reason", why, "err", err)
		return false, err
	}
	if res.Err != nil {
		c.log.Debug("partition change rejected as stale", "partition", part, "reason", why, "err", res.Err)
		return false, nil
	}
	np := res.Partition
	c.metrics.countChange(p.Leader, np.Leader, len(p.ISR), len(np.ISR))
	switch {
	case ch.leader == -1:
		c.log.Error("partition offline: no live replica in the ISR", "partition", part, "isr", ch.isr, "replicas", p.Replicas,
			"leader_epoch", np.LeaderEpoch)
	case ch.leader != p.Leader:
		c.log.Warn("partition leader elected", "partition", part, "reason", why, "leader", ch.leader, "previous", p.Leader,
			"leader_epoch", np.LeaderEpoch, "partition_epoch", np.PartitionEpoch, "isr", ch.isr)
	default:
		c.log.Info("partition ISR shrunk", "partition", part, "reason", why, "isr", ch.isr, "partition_epoch", np.PartitionEpoch)
	}
	return true, nil
}

// AlterPartition commits an ISR change requested by a partition's leader
// (see fsm.AlterPartition for the checks and their errors: fsm.ErrUnknownNode,
// ErrStaleNodeEpoch, ErrUnknownTopic, ErrUnknownPartition,
// ErrFencedLeaderEpoch, ErrNotPartitionLeader, ErrStalePartitionEpoch,
// ErrInvalidPartitionState, ErrIneligibleReplica). The request is checked
// against this leader's state first, so a stale one costs no log entry, and
// again by Apply. It returns the partition as changed: same leader and leader
// epoch, the new ISR, the partition epoch plus one.
func (c *Controller) AlterPartition(ctx context.Context, req cluster.AlterPartitionRequest) (*cluster.Partition, error) {
	if !c.Active() {
		return nil, ErrNotActive
	}
	cmd := fsm.AlterPartition{
		Topic: req.Topic, Partition: req.Partition, LeaderID: req.LeaderID, NodeEpoch: req.NodeEpoch,
		LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch, ISR: req.ISR,
	}
	if err := c.fsm.CheckAlterPartition(cmd); err != nil {
		return nil, err
	}
	oldISR := -1
	if t, ok := c.fsm.Topic(req.Topic); ok && int(req.Partition) < len(t.Partitions) {
		oldISR = len(t.Partitions[req.Partition].ISR)
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeAlterPartition, AlterPartition: &cmd})
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	if oldISR >= 0 {
		c.metrics.countChange(req.LeaderID, res.Partition.Leader, oldISR, len(res.Partition.ISR))
	}
	if res.Partition.Reassigning() {
		signal(c.kick) // a replica being added may have joined: complete the move soon
	}
	c.log.Info("partition ISR changed by its leader", "partition", fmt.Sprintf("%s-%d", req.Topic, req.Partition),
		"leader", req.LeaderID, "isr", res.Partition.ISR, "partition_epoch", res.Partition.PartitionEpoch)
	return res.Partition, nil
}

// ControlledShutdown prepares a node's exit: it marks the node as shutting
// down (it may no longer join an ISR, nor lead where another ISR member can),
// moves the leadership of every partition it leads to the first alive ISR
// replica in replica order (leader epoch plus one), and removes it from the
// ISRs where it is not the last member. It answers how many partitions the
// node still leads: zero when everything moved, more when it is the only ISR
// member somewhere (the node may retry later, or exit and let them go
// offline). The node stays alive until its session expires.
//
// Errors: ErrNotActive, ErrUnknownNode, ErrFencedEpoch (stale or fenced
// epoch), or a failure to commit (the node should retry).
func (c *Controller) ControlledShutdown(ctx context.Context, req cluster.ShutdownRequest) (int, error) {
	if !c.Active() {
		return 0, ErrNotActive
	}
	n, ok := c.fsm.Node(req.ID)
	if err := checkEpoch(n, ok, req.ID, req.Epoch); err != nil {
		return 0, err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeShutdownNode, ShutdownNode: &fsm.ShutdownNode{ID: req.ID, Epoch: req.Epoch}})
	if err != nil {
		return 0, err
	}
	if res.Err != nil {
		if errors.Is(res.Err, fsm.ErrStaleNodeEpoch) {
			return 0, fmt.Errorf("%w: %w", ErrFencedEpoch, res.Err)
		}
		return 0, res.Err
	}
	for range maxShutdownRounds {
		v := c.fsm.View()
		var pending, applied int
		for _, ch := range planElections(v.Topics, livenessOf(v)) {
			if !ch.involves(req.ID) {
				continue // other repairs are the session check's business
			}
			pending++
			ok, err := c.propose(ctx, ch, "controlled shutdown")
			if err != nil {
				return 0, err
			}
			if ok {
				applied++
			}
		}
		if applied == pending {
			break // nothing raced: the plan is done
		}
	}
	remaining := ledBy(c.fsm.Topics(), req.ID)
	c.log.Info("storage node in controlled shutdown", "node", req.ID, "epoch", req.Epoch, "still_leads", remaining)
	return remaining, nil
}

// ErrNoOtherLeader: a partition's leader asked to resign but no other alive
// replica is in the ISR.
var ErrNoOtherLeader = errors.New("no other in-sync replica can lead")

// ResignLeadership takes a replica whose copy is damaged out of the ISR, so
// that it cannot be elected with records missing (it rejoins once it has
// fetched what it lost). A leader hands over: the first other replica, in
// replica order, that is alive and in the ISR leads at a new leader epoch. A
// follower only leaves the ISR; one already out of it gets the partition as
// it is. Errors: ErrNotActive, ErrUnknownNode and ErrFencedEpoch (the node's
// registration), fsm.ErrFencedLeaderEpoch (the partition moved on: ask
// again with its state), ErrNoOtherLeader (no other alive in-sync replica
// leads or could lead), or a failure to commit.
func (c *Controller) ResignLeadership(ctx context.Context, req cluster.ResignRequest) (*cluster.Partition, error) {
	if !c.Active() {
		return nil, ErrNotActive
	}
	n, ok := c.fsm.Node(req.LeaderID)
	if err := checkEpoch(n, ok, req.LeaderID, req.NodeEpoch); err != nil {
		return nil, err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	v := c.fsm.View()
	t, ok := v.Topic(req.Topic)
	if !ok || req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s-%d", fsm.ErrUnknownPartition, req.Topic, req.Partition)
	}
	p := t.Partitions[req.Partition]
	name := fmt.Sprintf("%s-%d", req.Topic, req.Partition)
	if p.LeaderEpoch != req.LeaderEpoch {
		return nil, fmt.Errorf("%w: %s is at leader epoch %d, not %d", fsm.ErrFencedLeaderEpoch, name, p.LeaderEpoch, req.LeaderEpoch)
	}
	if !slices.Contains(p.ISR, req.LeaderID) {
		return &p, nil // a follower out of the ISR already
	}
	live := livenessOf(v)
	next, why := p.Leader, "follower left the ISR: damaged log"
	if p.Leader == req.LeaderID {
		next, why = -1, "leader resigned: damaged log"
		for _, id := range p.Replicas {
			if id != req.LeaderID && live[id] == stateAlive && slices.Contains(p.ISR, id) {
				next = id
				break
			}
		}
	}
	if next < 0 || live[next] != stateAlive {
		// An offline partition keeps the damaged follower: it may be all
		// that is left to elect.
		return nil, fmt.Errorf("%w: %s: leader %d, ISR %v", ErrNoOtherLeader, name, p.Leader, p.ISR)
	}
	isr := slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return id == req.LeaderID })
	applied, err := c.propose(ctx, change{topic: req.Topic, from: p, leader: next, isr: isr}, why)
	if err != nil {
		return nil, err
	}
	if !applied {
		return nil, fmt.Errorf("%w: %s changed meanwhile; ask again", fsm.ErrStalePartitionEpoch, name)
	}
	np, _ := c.fsm.Topic(req.Topic)
	out := np.Partitions[req.Partition]
	return &out, nil
}

// ElectLeaders runs elections for partitions of a topic now (Kafka's
// ElectLeaders; every partition when req.Partitions is empty): a preferred
// election gives the partition to its first replica when that one is
// alive and in sync, an unclean one elects a live replica out of sync for
// a partition without a leader (as the topic's unclean.leader.election
// would). Each partition answers on its own: ELECTION_NOT_NEEDED when it
// already has the leader asked for, PREFERRED_LEADER_NOT_AVAILABLE or
// ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica may take it.
func (c *Controller) ElectLeaders(ctx context.Context, req cluster.ElectRequest) ([]cluster.ElectResult, error) {
	if !c.Active() {
		return nil, ErrNotActive
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	v := c.fsm.View()
	t, ok := v.Topic(req.Topic)
	if !ok {
		return nil, fmt.Errorf("%w: %s", fsm.ErrUnknownPartition, req.Topic)
	}
	parts := req.Partitions
	if len(parts) == 0 {
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
		}
	}
	live := livenessOf(v)
	out := make([]cluster.ElectResult, 0, len(parts))
	for _, id := range parts {
		res := cluster.ElectResult{Partition: id, Leader: -1}
		fail := func(code protocol.Code, format string, args ...any) {
			res.Code, res.Error = code, fmt.Sprintf(format, args...)
		}
		if id < 0 || int(id) >= len(t.Partitions) {
			fail(protocol.UnknownTopicOrPartition, "%s has no partition %d", req.Topic, id)
			out = append(out, res)
			continue
		}
		p := t.Partitions[id]
		res.Leader = p.Leader
		var ch change
		switch leader, isr, changed := elect(p, live, true); {
		case !req.Unclean && len(p.Replicas) > 0 && p.Leader == p.Replicas[0]:
			fail(protocol.ElectionNotNeeded, "replica %d, the preferred one, leads", p.Leader)
		case !req.Unclean:
			next, move := preferred(p, live)
			if !move {
				fail(protocol.PreferredLeaderNotAvailable, "the preferred replica %d is not alive or not in the ISR %v", p.Replicas[0], p.ISR)
				break
			}
			ch = change{topic: req.Topic, from: p, leader: next, isr: slices.Clone(p.ISR)}
		case p.Leader >= 0 && live[p.Leader] == stateAlive:
			fail(protocol.ElectionNotNeeded, "replica %d leads", p.Leader)
		case !changed || leader < 0:
			fail(protocol.EligibleLeadersNotAvailable, "no live replica of %v", p.Replicas)
		default:
			ch = change{topic: req.Topic, from: p, leader: leader, isr: isr}
		}
		if res.Code == protocol.None {
			why := "preferred leader (requested)"
			if req.Unclean {
				why = "unclean election (requested)"
			}
			applied, err := c.propose(ctx, ch, why)
			switch {
			case err != nil:
				return nil, err
			case !applied:
				fail(protocol.NotController, "%s-%d changed meanwhile; ask again", req.Topic, id)
			default:
				res.Leader = ch.leader
			}
		}
		out = append(out, res)
	}
	return out, nil
}
