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
	s.nodes[c.ID] = &cluster.Node{
		ID:             c.ID,
		Addr:           c.Addr,
		AdvertisedAddr: c.AdvertisedAddr,
		Rack:           c.Rack,
		Epoch:          epoch,
		Alive:          true,
	}
	return epoch, nil
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
	if _, ok := s.topics[c.Name]; !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	delete(s.topics, c.Name)
	return nil
}

func (s *state) updatePartition(c *UpdatePartition) (*cluster.Partition, error) {
	t, ok := s.topics[c.Topic]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	if c.Partition < 0 || int(c.Partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, c.Topic, c.Partition)
	}
	p := &t.Partitions[c.Partition]
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
