package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/placement"
)

// reassignLocked moves reassignments on: it completes those whose adding
// replicas have all joined the ISR, then starts moving the replicas of
// decommissioned nodes that are not moving yet. Both rules read the state
// alone, so a new leader finishes what the previous one started. Callers
// hold opMu.
func (c *Controller) reassignLocked() {
	if !c.Active() {
		return
	}
	for _, ref := range readyReassignments(c.fsm.Topics()) {
		if err := c.fsm.CheckEndReassignment(ref, true); err != nil {
			// No replica can lead after it yet; the next check tries again.
			c.log.Debug("reassignment not completed", "partition", fmt.Sprintf("%s-%d", ref.Topic, ref.Partition), "err", err)
			continue
		}
		ctx, cancel := c.ctx()
		res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeCompleteReassignment, CompleteReassignment: &ref})
		cancel()
		if err != nil {
			c.log.Warn("reassignment completion not committed; will retry", "partition", fmt.Sprintf("%s-%d", ref.Topic, ref.Partition), "err", err)
			return
		}
		if res.Err != nil {
			continue // raced with a change; the next check decides again
		}
		p := res.Partition
		c.log.Info("partition reassignment completed", "partition", fmt.Sprintf("%s-%d", ref.Topic, ref.Partition),
			"replicas", p.Replicas, "leader", p.Leader, "leader_epoch", p.LeaderEpoch, "isr", p.ISR)
	}
	if _, err := c.evacuateLocked(); err != nil {
		c.log.Warn("decommission cannot move every replica", "err", err)
	}
}

// readyReassignments lists the partitions whose adding replicas are all in
// the ISR.
func readyReassignments(topics []cluster.Topic) []fsm.PartitionRef {
	var out []fsm.PartitionRef
	for _, t := range topics {
		for _, p := range t.Partitions {
			if !p.Reassigning() {
				continue
			}
			ready := true
			for _, id := range p.AddingReplicas {
				ready = ready && slices.Contains(p.ISR, id)
			}
			if ready {
				out = append(out, fsm.PartitionRef{Topic: t.Name, Partition: p.ID})
			}
		}
	}
	return out
}

// evacuateLocked starts a reassignment for every partition that has a
// replica on a decommissioned node and is not moving yet, and returns the
// moves started. The error names partitions no node can take; callers hold
// opMu.
func (c *Controller) evacuateLocked() ([]cluster.PartitionMove, error) {
	v := c.fsm.View()
	candidates, leaving := evacuation(v, -1)
	if len(leaving) == 0 {
		return nil, nil
	}
	moves, planErr := placement.Evacuate(candidates, v.Topics, leaving)
	var started []cluster.PartitionMove
	for _, m := range moves {
		ctx, cancel := c.ctx()
		p, refused, err := c.proposeReassign(ctx, fsm.ReassignPartition{Topic: m.Topic, Partition: m.Partition, Replicas: m.Replicas}, "decommission")
		cancel()
		switch {
		case err != nil:
			c.log.Warn("reassignment not committed", "partition", fmt.Sprintf("%s-%d", m.Topic, m.Partition), "reason", "decommission", "err", err)
			return started, errors.Join(planErr, err)
		case refused != nil: // raced with another change: the next round decides again
			c.log.Debug("reassignment refused", "partition", fmt.Sprintf("%s-%d", m.Topic, m.Partition), "reason", "decommission", "err", refused)
		default:
			started = append(started, cluster.PartitionMove{Topic: m.Topic, Partition: m.Partition, Replicas: p.TargetReplicas})
		}
	}
	return started, planErr
}

// evacuation returns the nodes whose replicas must move (the decommissioned
// ones, and also when it is not -1) and the nodes that may take them: alive,
// not decommissioned, not shutting down, not leaving.
func evacuation(v fsm.View, also int32) (candidates []placement.Node, leaving []int32) {
	for _, n := range v.Nodes {
		if n.Decommissioned || n.ID == also {
			leaving = append(leaving, n.ID)
		}
	}
	for _, n := range placement.LiveNodes(v.Nodes) {
		if !v.ShuttingDown[n.ID] && !slices.Contains(leaving, n.ID) {
			candidates = append(candidates, n)
		}
	}
	return candidates, leaving
}

// proposeReassign commits a ReassignPartition and logs the move it starts.
// refused is the FSM's reason when it did not apply the command (the state
// changed meanwhile, or the request is not valid); err a failure to commit.
func (c *Controller) proposeReassign(ctx context.Context, cmd fsm.ReassignPartition, why string) (p *cluster.Partition, refused, err error) {
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeReassignPartition, ReassignPartition: &cmd})
	if err != nil {
		return nil, nil, err
	}
	if res.Err != nil {
		return nil, res.Err, nil
	}
	p = res.Partition
	c.log.Info("partition reassignment started", "partition", fmt.Sprintf("%s-%d", cmd.Topic, cmd.Partition), "reason", why,
		"replicas", p.Replicas, "target", p.TargetReplicas, "adding", p.AddingReplicas, "leader", p.Leader)
	return p, nil, nil
}

// ReassignPartition starts moving a partition to the given replicas (see
// fsm.ReassignPartition for the checks and their errors) and returns the
// partition as changed. The controller completes it once the new replicas
// are in sync.
func (c *Controller) ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) (*cluster.Partition, error) {
	if !c.Active() {
		return nil, ErrNotActive
	}
	cmd := fsm.ReassignPartition{Topic: topic, Partition: partition, Replicas: replicas}
	if err := c.fsm.CheckReassignPartition(cmd); err != nil {
		return nil, err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	p, refused, err := c.proposeReassign(ctx, cmd, "request")
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return nil, refused
	}
	signal(c.kick)
	return p, nil
}

// CancelReassignment stops a partition's reassignment: the replicas being
// added are dropped (their copies deleted) and the partition keeps the
// replicas it had. Errors: fsm.ErrNoReassignmentInProgress, and
// fsm.ErrReassignmentNotReady when only new replicas could lead.
func (c *Controller) CancelReassignment(ctx context.Context, topic string, partition int32) (*cluster.Partition, error) {
	if !c.Active() {
		return nil, ErrNotActive
	}
	ref := fsm.PartitionRef{Topic: topic, Partition: partition}
	if err := c.fsm.CheckEndReassignment(ref, false); err != nil {
		return nil, err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeCancelReassignment, CancelReassignment: &ref})
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	p := res.Partition
	c.log.Warn("partition reassignment cancelled", "partition", fmt.Sprintf("%s-%d", topic, partition),
		"replicas", p.Replicas, "leader", p.Leader, "isr", p.ISR)
	return p, nil
}

// Decommission marks a node decommissioned (no new replicas are placed on
// it) and starts reassigning every replica it holds; the controller keeps
// doing so for partitions that could not move yet. It answers the moves
// started now and how many replicas the node still holds. Recommission
// (decommissioned false) only lifts the mark.
func (c *Controller) Decommission(ctx context.Context, id int32, decommissioned bool) (*cluster.DecommissionResponse, error) {
	if !c.Active() {
		return nil, ErrNotActive
	}
	if _, ok := c.fsm.Node(id); !ok {
		return nil, fmt.Errorf("%w: node %d", fsm.ErrUnknownNode, id)
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if decommissioned {
		if err := c.checkEvacuation(id); err != nil {
			return nil, err
		}
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeDecommissionNode, DecommissionNode: &fsm.DecommissionNode{ID: id, Decommissioned: decommissioned}})
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	out := &cluster.DecommissionResponse{Node: id, Started: []cluster.PartitionMove{}}
	if decommissioned {
		c.log.Warn("storage node decommissioned: moving its replicas away", "node", id)
		started, err := c.evacuateLocked()
		out.Started = append(out.Started, started...)
		if err != nil {
			c.log.Warn("decommission cannot move every replica yet", "node", id, "err", err)
		}
	} else {
		c.log.Info("storage node recommissioned: it may take new replicas", "node", id)
	}
	out.Replicas = replicasOn(c.fsm.Topics(), id)
	return out, nil
}

// checkEvacuation refuses to decommission node id when the other nodes
// cannot take all its replicas (too few nodes for a replication factor), so
// that a decommission that could never finish is not started.
func (c *Controller) checkEvacuation(id int32) error {
	v := c.fsm.View()
	candidates, leaving := evacuation(v, id)
	var pending []cluster.Topic // partitions already moving count with their targets
	for _, t := range v.Topics {
		t.Partitions = slices.Clone(t.Partitions)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Reassigning() {
				p.Replicas, p.TargetReplicas, p.AddingReplicas = p.TargetReplicas, nil, nil
			}
		}
		pending = append(pending, t)
	}
	if _, err := placement.Evacuate(candidates, pending, leaving); err != nil {
		return fmt.Errorf("cannot decommission node %d: %w", id, err)
	}
	return nil
}

// replicasOn counts the partitions with a replica on node id.
func replicasOn(topics []cluster.Topic, id int32) int {
	n := 0
	for _, t := range topics {
		for _, p := range t.Partitions {
			if slices.Contains(p.Replicas, id) {
				n++
			}
		}
	}
	return n
}
