package controller

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// elect computes a partition's leader and ISR given which nodes are alive. It
// is a pure rule (Kafka's, simplified):
//   - dead nodes leave the ISR, except that the ISR never becomes empty: its
//     last member stays, so a clean election can pick it when it returns;
//   - a leader that is alive and in the ISR stays;
//   - otherwise the first replica (in replica order, so the preferred leader
//     first) that is alive and in the ISR leads;
//   - with none, unclean election (when the topic allows it) picks the first
//     alive replica and makes it the whole ISR: records may be lost;
//   - with none at all the partition goes offline (leader -1).
//
// changed is false when the result equals the current state.
func elect(p cluster.Partition, alive func(int32) bool, unclean bool) (leader int32, isr []int32, changed bool) {
	isr = make([]int32, 0, len(p.ISR))
	for _, id := range p.ISR {
		if alive(id) {
			isr = append(isr, id)
		}
	}
	if len(isr) == 0 && len(p.ISR) > 0 {
		isr = []int32{p.ISR[len(p.ISR)-1]}
	}
	leader = -1
	if p.Leader >= 0 && alive(p.Leader) && slices.Contains(isr, p.Leader) {
		leader = p.Leader
	} else {
		for _, id := range p.Replicas {
			if alive(id) && slices.Contains(isr, id) {
				leader = id
				break
			}
		}
	}
	if leader == -1 && unclean {
		for _, id := range p.Replicas {
			if alive(id) {
				leader, isr = id, []int32{id}
				break
			}
		}
	}
	changed = leader != p.Leader || !slices.Equal(isr, p.ISR)
	return leader, isr, changed
}

// reconcilePartitions proposes a new leader and ISR for every partition whose
// leader or ISR holds a dead node, and elects a leader for offline partitions
// whose replicas came back. It is idempotent: a partition already in the
// right state proposes nothing, so it runs on every session check and also
// repairs what a previous leader left half done.
func (c *Controller) reconcilePartitions() {
	aliveSet := map[int32]bool{}
	for _, n := range c.fsm.Nodes() {
		aliveSet[n.ID] = n.Alive
	}
	alive := func(id int32) bool { return aliveSet[id] }
	for _, t := range c.fsm.Topics() {
		unclean := false
		if cfg, err := cluster.ParseTopicConfig(t.Config, t.ReplicationFactor); err == nil {
			unclean = cfg.UncleanElection
		}
		for _, p := range t.Partitions {
			leader, isr, changed := elect(p, alive, unclean)
			if !changed {
				continue
			}
			if !c.proposePartition(t.Name, p, leader, isr) {
				return // leadership lost or stopping: the next leader reconciles
			}
		}
	}
}

// proposePartition commits one partition change; false means stop trying now.
func (c *Controller) proposePartition(topic string, p cluster.Partition, leader int32, isr []int32) bool {
	if !c.Active() {
		return false
	}
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeUpdatePartition, UpdatePartition: &fsm.UpdatePartition{
		Topic: topic, Partition: p.ID, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Leader: leader, ISR: isr,
	}})
	if err != nil {
		c.log.Warn("partition change not committed; will retry", "topic", topic, "partition", p.ID, "err", err)
		return !errors.Is(err, context.Canceled)
	}
	if res.Err != nil {
		// Raced with another change (e.g. an ISR update from the leader):
		// the next check starts from the new state.
		c.log.Debug("partition change rejected", "topic", topic, "partition", p.ID, "err", res.Err)
		return true
	}
	part := topic + "-" + strconv.Itoa(int(p.ID))
	switch {
	case leader == -1:
		c.log.Error("partition offline: no live replica in the ISR", "partition", part, "isr", isr, "replicas", p.Replicas)
	case leader != p.Leader:
		c.log.Warn("partition leader elected", "partition", part, "leader", leader, "previous", p.Leader,
			"leader_epoch", res.Partition.LeaderEpoch, "isr", isr)
	default:
		c.log.Info("partition ISR shrunk", "partition", part, "isr", isr)
	}
	return true
}
