package fsm

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/libs/cluster"
)

// The functions below mutate the state for one command each. They validate
// everything first and change nothing when they return an error.

func (s *state) initCluster(c *InitCluster) (bool, error) {
	if c.ClusterID == "" {
		return false, fmt.Errorf("%w: empty cluster id", ErrMalformedCommand)
	}
	if s.clusterID != "" {
		return false, nil // first one wins; later proposals are harmless
	}
	s.clusterID = c.ClusterID
	return true, nil
}

func (s *state) registerNode(index uint64, c *RegisterNode) (int64, error) {
	if c.ID < 0 {
		return 0, fmt.Errorf("%w: node id %d is negative", ErrMalformedCommand, c.ID)
	}
	if c.Addr == "" {
		return 0, fmt.Errorf("%w: node %d has no address", ErrMalformedCommand, c.ID)
	}
	epoch := int64(index)
	decommissioned := false
	if old, known := s.nodes[c.ID]; known {
		if c.LeavesISRs {
			s.leaveISRs(c.ID, c.Fresh)
		} else {
			s.bounceLeaderships(c.ID)
		}
		decommissioned = old.Decommissioned
	}
	s.nodes[c.ID] = &cluster.Node{
		ID:             c.ID,
		Addr:           c.Addr,
		AdvertisedAddr: c.AdvertisedAddr,
		KafkaAddr:      c.KafkaAddr,
		Rack:           c.Rack,
		Epoch:          epoch,
		Alive:          true,
		Decommissioned: decommissioned,
	}
	delete(s.shuttingDown, c.ID)
	return epoch, nil
}

// bounceLeaderships gives every partition a re-registering node leads a new
// leader epoch (the leader stays): the node restarted, perhaps without the
// tail it had not flushed, so followers must truncate against its log again
// before they count as caught up (Kafka's KIP-380). Deterministic: it depends
// on the state alone.
func (s *state) bounceLeaderships(id int32) {
	for _, t := range s.topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader == id {
				p.LeaderEpoch++
				p.PartitionEpoch++
			}
		}
	}
}

// leaveISRs takes a re-registering node out of every ISR where another
// member remains that is alive, not shutting down and fresh; the first such
// member in replica order takes over a partition it led, at a new leader
// epoch. Where no such member remains it stays, and a partition it leads
// gets a new leader epoch as in bounceLeaderships. Deterministic: it depends
// on the state and the command alone.
func (s *state) leaveISRs(id int32, fresh []int32) {
	for _, t := range s.topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if !slices.Contains(p.ISR, id) {
				continue
			}
			next := int32(-1)
			for _, r := range p.Replicas {
				if r != id && slices.Contains(p.ISR, r) && slices.Contains(fresh, r) && s.nodes[r] != nil && s.nodes[r].Alive && !s.shuttingDown[r] {
					next = r
					break
				}
			}
			switch {
			case next < 0:
				if p.Leader == id {
					p.LeaderEpoch++
					p.PartitionEpoch++
				}
				continue
			case p.Leader == id:
				p.Leader = next
				p.LeaderEpoch++
			}
			p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == id })
			p.PartitionEpoch++
		}
	}
}

// currentNode returns the node when it is registered at epoch.
func (s *state) currentNode(id int32, epoch int64) (*cluster.Node, error) {
	n, ok := s.nodes[id]
	if !ok {
		return nil, fmt.Errorf("%w: node %d", ErrUnknownNode, id)
	}
	if n.Epoch != epoch {
		return nil, fmt.Errorf("%w: node %d is at epoch %d, not %d", ErrStaleNodeEpoch, id, n.Epoch, epoch)
	}
	return n, nil
}

func (s *state) fenceNode(index uint64, c *FenceNode) (int64, error) {
	n, err := s.currentNode(c.ID, c.Epoch)
	if err != nil {
		return 0, err
	}
	n.Alive = false
	n.Epoch = int64(index)
	delete(s.shuttingDown, c.ID)
	return n.Epoch, nil
}

func (s *state) shutdownNode(c *ShutdownNode) (bool, error) {
	n, err := s.currentNode(c.ID, c.Epoch)
	if err != nil {
		return false, err
	}
	if !n.Alive {
		return false, fmt.Errorf("%w: node %d is dead; it must register again", ErrStaleNodeEpoch, c.ID)
	}
	if s.shuttingDown[c.ID] {
		return false, nil
	}
	s.shuttingDown[c.ID] = true
	return true, nil
}

func (s *state) setNodeAlive(c *SetNodeAlive) (bool, error) {
	n, ok := s.nodes[c.ID]
	if !ok {
		return false, fmt.Errorf("%w: node %d", ErrUnknownNode, c.ID)
	}
	if n.Epoch != c.Epoch {
		return false, fmt.Errorf("%w: node %d is at epoch %d, not %d", ErrStaleNodeEpoch, c.ID, n.Epoch, c.Epoch)
	}
	if n.Alive == c.Alive {
		return false, nil
	}
	n.Alive = c.Alive
	return true, nil
}

func (s *state) createTopic(c *CreateTopic) (*cluster.Topic, error) {
	if err := cluster.ValidateTopicName(c.Name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	if _, ok := s.topics[c.Name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, c.Name)
	}
	if n := len(c.Replicas); n < 1 || n > cluster.MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions is outside 1..%d", ErrInvalidTopic, n, cluster.MaxPartitions)
	}
	if c.ReplicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor %d", ErrInvalidTopic, c.ReplicationFactor)
	}
	if _, err := cluster.ParseTopicConfig(c.Config, c.ReplicationFactor); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	for i, rs := range c.Replicas {
		if len(rs) != c.ReplicationFactor {
			return nil, fmt.Errorf("%w: partition %d has %d replicas, want %d", ErrInvalidTopic, i, len(rs), c.ReplicationFactor)
		}
		if err := s.checkReplicas(rs); err != nil {
			return nil, fmt.Errorf("%w: partition %d: %w", ErrInvalidTopic, i, err)
		}
	}
	t := &cluster.Topic{
		Name:              c.Name,
		ID:                c.ID,
		ReplicationFactor: c.ReplicationFactor,
		Config:            map[string]string{},
		Partitions:        make([]cluster.Partition, len(c.Replicas)),
	}
	for k, v := range c.Config {
		t.Config[k] = v
	}
	for i, rs := range c.Replicas {
		t.Partitions[i] = cluster.Partition{
			ID:       int32(i),
			Replicas: slices.Clone(rs),
			Leader:   rs[0],
			ISR:      slices.Clone(rs),
		}
	}
	s.topics[c.Name] = t
	out := copyTopic(t)
	return &out, nil
}

// checkReplicas verifies a replica list names distinct registered nodes.
func (s *state) checkReplicas(rs []int32) error {
	for i, id := range rs {
		if _, ok := s.nodes[id]; !ok {
			return fmt.Errorf("replica %d is not a registered node", id)
		}
		if slices.Contains(rs[:i], id) {
			return fmt.Errorf("replica %d is listed twice", id)
		}
	}
	return nil
}

func (s *state) deleteTopic(c *DeleteTopic) error {
	t, ok := s.topics[c.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	for i := range t.Partitions {
		s.discardRemoteLog(c.Name, int32(i))
	}
	delete(s.topics, c.Name)
	return nil
}

// alterTopicConfig applies a config change if the result is a valid
// configuration for the topic.
func (s *state) alterTopicConfig(c *AlterTopicConfig) (*cluster.Topic, error) {
	t, next, err := s.checkAlterTopicConfig(c)
	if err != nil {
		return nil, err
	}
	t.Config = next
	out := copyTopic(t)
	return &out, nil
}

// checkAlterTopicConfig returns the live topic and its config after the
// change, or why the change is refused. It changes nothing.
func (s *state) checkAlterTopicConfig(c *AlterTopicConfig) (*cluster.Topic, map[string]string, error) {
	t, ok := s.topics[c.Name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	next := cluster.AlterTopicConfigRequest{Set: c.Set, Delete: c.Delete}.Apply(t.Config)
	if _, err := cluster.ParseTopicConfig(next, t.ReplicationFactor); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return t, next, nil
}

// addPartitions appends the new partitions if the topic still has From.
func (s *state) addPartitions(c *AddPartitions) (*cluster.Topic, error) {
	t, ok := s.topics[c.Name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	if len(t.Partitions) != c.From {
		return nil, fmt.Errorf("%w: topic %q has %d partitions, not %d", ErrStalePartitionCount, c.Name, len(t.Partitions), c.From)
	}
	if n := len(t.Partitions) + len(c.Replicas); len(c.Replicas) < 1 || n > cluster.MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions is outside %d..%d", ErrInvalidTopic, n, len(t.Partitions)+1, cluster.MaxPartitions)
	}
	for i, rs := range c.Replicas {
		if len(rs) != t.ReplicationFactor {
			return nil, fmt.Errorf("%w: new partition %d has %d replicas, want %d", ErrInvalidTopic, i, len(rs), t.ReplicationFactor)
		}
		if err := s.checkReplicas(rs); err != nil {
			return nil, fmt.Errorf("%w: new partition %d: %w", ErrInvalidTopic, i, err)
		}
	}
	for _, rs := range c.Replicas {
		t.Partitions = append(t.Partitions, cluster.Partition{
			ID:       int32(len(t.Partitions)),
			Replicas: slices.Clone(rs),
			Leader:   rs[0],
			ISR:      slices.Clone(rs),
		})
	}
	out := copyTopic(t)
	return &out, nil
}

// partition returns the live partition (not a copy).
func (s *state) partition(topic string, id int32) (*cluster.Partition, error) {
	t, ok := s.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	if id < 0 || int(id) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, topic, id)
	}
	return &t.Partitions[id], nil
}

func (s *state) updatePartition(c *UpdatePartition) (*cluster.Partition, error) {
	p, err := s.partition(c.Topic, c.Partition)
	if err != nil {
		return nil, err
	}
	if c.LeaderEpoch != p.LeaderEpoch {
		return nil, fmt.Errorf("%w: %s-%d is at leader epoch %d, not %d", ErrFencedLeaderEpoch, c.Topic, c.Partition, p.LeaderEpoch, c.LeaderEpoch)
	}
	if c.PartitionEpoch != p.PartitionEpoch {
		return nil, fmt.Errorf("%w: %s-%d is at partition epoch %d, not %d", ErrStalePartitionEpoch, c.Topic, c.Partition, p.PartitionEpoch, c.PartitionEpoch)
	}
	if err := validPartitionState(p.Replicas, c.Leader, c.ISR); err != nil {
		return nil, fmt.Errorf("%w: %s-%d: %w", ErrInvalidPartitionState, c.Topic, c.Partition, err)
	}
	if c.Leader != p.Leader {
		p.LeaderEpoch++
	}
	p.Leader = c.Leader
	p.ISR = slices.Clone(c.ISR)
	p.PartitionEpoch++
	out := copyPartition(*p)
	return &out, nil
}

func (s *state) alterPartition(c *AlterPartition) (*cluster.Partition, error) {
	p, err := s.checkAlterPartition(c)
	if err != nil {
		return nil, err
	}
	p.ISR = slices.Clone(c.ISR)
	p.PartitionEpoch++
	out := copyPartition(*p)
	return &out, nil
}

// checkAlterPartition validates an AlterPartition against the state (see
// AlterPartition for the order of the checks) and returns the live partition
// it would change. It changes nothing.
func (s *state) checkAlterPartition(c *AlterPartition) (*cluster.Partition, error) {
	p, err := s.checkLeader(c.Topic, c.Partition, c.LeaderID, c.NodeEpoch, c.LeaderEpoch)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s-%d", c.Topic, c.Partition)
	if c.PartitionEpoch != p.PartitionEpoch {
		return nil, fmt.Errorf("%w: %s is at partition epoch %d, not %d", ErrStalePartitionEpoch, name, p.PartitionEpoch, c.PartitionEpoch)
	}
	if err := validPartitionState(p.Replicas, c.LeaderID, c.ISR); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidPartitionState, name, err)
	}
	for _, id := range c.ISR {
		if slices.Contains(p.ISR, id) {
			continue
		}
		if m := s.nodes[id]; m == nil || !m.Alive {
			return nil, fmt.Errorf("%w: %s: node %d cannot join the ISR: it is not alive", ErrIneligibleReplica, name, id)
		}
		if s.shuttingDown[id] {
			return nil, fmt.Errorf("%w: %s: node %d cannot join the ISR: it is shutting down", ErrIneligibleReplica, name, id)
		}
	}
	return p, nil
}

// checkLeader verifies that a request about topic-partition comes from its
// current leader, in this order: node id is registered at nodeEpoch and
// alive, the partition exists, leaderEpoch is its leader epoch and id its
// leader. It returns the live partition and changes nothing. The changes a
// partition leader makes (AlterPartition, the remote log's) share it.
func (s *state) checkLeader(topic string, partition, id int32, nodeEpoch int64, leaderEpoch int32) (*cluster.Partition, error) {
	n, err := s.currentNode(id, nodeEpoch)
	if err != nil {
		return nil, err
	}
	if !n.Alive {
		return nil, fmt.Errorf("%w: node %d is dead; it must register again", ErrStaleNodeEpoch, id)
	}
	p, err := s.partition(topic, partition)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s-%d", topic, partition)
	if leaderEpoch != p.LeaderEpoch {
		return nil, fmt.Errorf("%w: %s is at leader epoch %d, not %d", ErrFencedLeaderEpoch, name, p.LeaderEpoch, leaderEpoch)
	}
	if id != p.Leader {
		return nil, fmt.Errorf("%w: node %d does not lead %s at leader epoch %d (leader %d)", ErrNotPartitionLeader, id, name, p.LeaderEpoch, p.Leader)
	}
	return p, nil
}

// validPartitionState checks that the ISR is a set of replicas and that a
// leader, unless -1 (offline), is a replica in the ISR.
func validPartitionState(replicas []int32, leader int32, isr []int32) error {
	for i, id := range isr {
		if !slices.Contains(replicas, id) {
			return fmt.Errorf("ISR member %d is not a replica", id)
		}
		if slices.Contains(isr[:i], id) {
			return fmt.Errorf("ISR member %d is listed twice", id)
		}
	}
	if leader == -1 {
		return nil
	}
	if !slices.Contains(replicas, leader) {
		return fmt.Errorf("leader %d is not a replica", leader)
	}
	if !slices.Contains(isr, leader) {
		return fmt.Errorf("leader %d is not in the ISR", leader)
	}
	return nil
}
