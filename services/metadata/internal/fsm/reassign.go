package fsm

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Partition reassignment follows Kafka's KIP-455: the partition first gets
// its old replicas followed by the new ones, the new ones copy the log from
// the leader and join the ISR as any follower does, and only then are the
// old ones dropped. The partition keeps its leader and its ISR throughout, so it
// stays available and acks=all keeps counting the replicas it counted.

// reassignPartition starts a reassignment (see ReassignPartition). changed is
// false when the list equals the current one.
func (s *state) reassignPartition(c *ReassignPartition) (*cluster.Partition, bool, error) {
	p, target, err := s.checkReassignPartition(c)
	if err != nil {
		return nil, false, err
	}
	if slices.Equal(p.Replicas, target) {
		out := copyPartition(*p)
		return &out, false, nil
	}
	if adding := without(target, p.Replicas); len(adding) > 0 {
		p.Replicas = append(p.Replicas, adding...)
		p.TargetReplicas, p.AddingReplicas = target, adding
	} else {
		p.Replicas = target // the same replicas in another order: nothing to copy
	}
	p.PartitionEpoch++
	out := copyPartition(*p)
	return &out, true, nil
}

// checkReassignPartition validates c and returns the live partition and the
// target list. It changes nothing.
func (s *state) checkReassignPartition(c *ReassignPartition) (*cluster.Partition, []int32, error) {
	p, err := s.partition(c.Topic, c.Partition)
	if err != nil {
		return nil, nil, err
	}
	name := fmt.Sprintf("%s-%d", c.Topic, c.Partition)
	if p.Reassigning() {
		return nil, nil, fmt.Errorf("%w: %s is moving to %v; wait for it or cancel it", ErrReassignmentInProgress, name, p.TargetReplicas)
	}
	if rf := s.topics[c.Topic].ReplicationFactor; len(c.Replicas) != rf {
		return nil, nil, fmt.Errorf("%w: %s: %d replicas given, the topic's replication factor is %d", ErrInvalidReassignment, name, len(c.Replicas), rf)
	}
	if err := s.checkReplicas(c.Replicas); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInvalidReassignment, name, err)
	}
	for _, id := range c.Replicas {
		if slices.Contains(p.Replicas, id) {
			continue
		}
		n := s.nodes[id]
		switch {
		case !n.Alive:
			return nil, nil, fmt.Errorf("%w: %s: node %d is not alive", ErrIneligibleReplica, name, id)
		case s.shuttingDown[id]:
			return nil, nil, fmt.Errorf("%w: %s: node %d is shutting down", ErrIneligibleReplica, name, id)
		case n.Decommissioned:
			return nil, nil, fmt.Errorf("%w: %s: node %d is decommissioned", ErrIneligibleReplica, name, id)
		}
	}
	return p, slices.Clone(c.Replicas), nil
}

// endReassignment completes (complete true) or cancels a reassignment.
func (s *state) endReassignment(c *PartitionRef, complete bool) (*cluster.Partition, error) {
	p, keep, leader, err := s.checkEndReassignment(c, complete)
	if err != nil {
		return nil, err
	}
	p.Replicas = keep
	p.ISR = slices.DeleteFunc(p.ISR, func(id int32) bool { return !slices.Contains(keep, id) })
	if leader != p.Leader {
		p.Leader = leader
		p.LeaderEpoch++
	}
	p.TargetReplicas, p.AddingReplicas = nil, nil
	p.PartitionEpoch++
	out := copyPartition(*p)
	return &out, nil
}

// checkEndReassignment validates an end of reassignment and returns the live
// partition, its replicas and its leader afterwards. It changes nothing.
func (s *state) checkEndReassignment(c *PartitionRef, complete bool) (*cluster.Partition, []int32, int32, error) {
	p, err := s.partition(c.Topic, c.Partition)
	if err != nil {
		return nil, nil, 0, err
	}
	name := fmt.Sprintf("%s-%d", c.Topic, c.Partition)
	if !p.Reassigning() {
		return nil, nil, 0, fmt.Errorf("%w: %s", ErrNoReassignmentInProgress, name)
	}
	keep := without(p.Replicas, p.AddingReplicas)
	if complete {
		keep = slices.Clone(p.TargetReplicas)
		for _, id := range p.AddingReplicas {
			if !slices.Contains(p.ISR, id) {
				return nil, nil, 0, fmt.Errorf("%w: %s: replica %d is not in the ISR %v yet", ErrReassignmentNotReady, name, id, p.ISR)
			}
		}
	}
	if p.Leader == -1 || slices.Contains(keep, p.Leader) {
		return p, keep, p.Leader, nil // an offline partition stays offline until elections find a leader
	}
	leader := int32(-1)
	for _, id := range keep {
		if !slices.Contains(p.ISR, id) {
			continue
		}
		if n := s.nodes[id]; n == nil || !n.Alive {
			continue
		}
		if !s.shuttingDown[id] {
			return p, keep, id, nil
		}
		if leader == -1 {
			leader = id
		}
	}
	if leader == -1 {
		return nil, nil, 0, fmt.Errorf("%w: %s: none of %v is alive and in the ISR %v to take over from leader %d", ErrReassignmentNotReady, name, keep, p.ISR, p.Leader)
	}
	return p, keep, leader, nil
}

func (s *state) decommissionNode(c *DecommissionNode) (bool, error) {
	n, ok := s.nodes[c.ID]
	if !ok {
		return false, fmt.Errorf("%w: node %d", ErrUnknownNode, c.ID)
	}
	if n.Decommissioned == c.Decommissioned {
		return false, nil
	}
	n.Decommissioned = c.Decommissioned
	return true, nil
}

// without returns ids minus the members of drop, in order.
func without(ids, drop []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

// applyReassign applies a reassignment command (ApplyCommand) into res and
// reports whether the cluster model changed: a reassignment started as
// its command says, one completed or cancelled whenever it succeeded.
func (s *state) applyReassign(cmd Command, res *Result) (changed bool) {
	switch cmd.Type {
	case TypeReassignPartition:
		res.Partition, changed, res.Err = s.reassignPartition(cmd.ReassignPartition)
	case TypeCompleteReassignment:
		res.Partition, res.Err = s.endReassignment(cmd.CompleteReassignment, true)
		changed = res.Err == nil
	case TypeCancelReassignment:
		res.Partition, res.Err = s.endReassignment(cmd.CancelReassignment, false)
		changed = res.Err == nil
	}
	return changed
}
