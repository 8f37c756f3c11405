package replica

import (
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// Key names a partition.
type Key struct {
	Topic     string
	Partition int32
}

func (k Key) String() string { return fmt.Sprintf("%s-%d", k.Topic, k.Partition) }

// Replica is this node's copy of one partition.
type Replica struct {
	Key Key
	Log *seglog.Log

	topicID string // the topic incarnation the log belongs to; set at open

	mu          sync.RWMutex        // guards the fields below
	leader      int32               // current leader's node id, -1 when none
	leaderEpoch int32               // current leader epoch
	config      cluster.TopicConfig // the topic's configuration
}

// State is a copy of a replica's role.
type State struct {
	Leader      int32
	LeaderEpoch int32
	Config      cluster.TopicConfig
}

// State returns the replica's current role and configuration.
func (r *Replica) State() State {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return State{Leader: r.leader, LeaderEpoch: r.leaderEpoch, Config: r.config}
}

// HighWatermark returns the offset below which records are visible to consumers.
// With one replica per partition it is the log end offset.
func (r *Replica) HighWatermark() int64 { return r.Log.EndOffset() }

// CheckLeader returns NOT_LEADER_OR_FOLLOWER unless self leads the partition.
func (r *Replica) CheckLeader(self int32) (State, error) {
	s := r.State()
	if s.Leader != self {
		return s, protocol.NotLeaderOrFollower.Err("node %d is not the leader of %s (leader %d, epoch %d)", self, r.Key, s.Leader, s.LeaderEpoch)
	}
	return s, nil
}

func (r *Replica) setState(p cluster.Partition, cfg cluster.TopicConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader, r.leaderEpoch, r.config = p.Leader, p.LeaderEpoch, cfg
}

// LogConfig maps a topic's configuration to the log's.
func LogConfig(tc cluster.TopicConfig) seglog.Config {
	c := seglog.DefaultConfig()
	c.SegmentBytes = tc.SegmentBytes
	c.SegmentMs = tc.SegmentMs
	c.RetentionMs = tc.RetentionMs
	c.RetentionBytes = tc.RetentionBytes
	if tc.MaxMessageBytes > 0 && tc.MaxMessageBytes < int64(c.MaxBatchBytes) {
		c.MaxBatchBytes = int(tc.MaxMessageBytes)
	}
	if tc.MaxMessageBytes > int64(c.MaxBatchBytes) {
		c.MaxBatchBytes = int(tc.MaxMessageBytes)
	}
	return c
}
