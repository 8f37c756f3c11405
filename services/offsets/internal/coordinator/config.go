package coordinator

import (
	"fmt"
	"time"
)

// Settings are the group protocol's timings.
type Settings struct {
	// SessionTimeout is a member's session timeout when it asks for none;
	// a member asking for one must stay within [MinSessionTimeout,
	// MaxSessionTimeout]. A member whose heartbeats stop for its session
	// timeout is removed and its partitions move.
	SessionTimeout, MinSessionTimeout, MaxSessionTimeout time.Duration
	// RebalanceTimeout is how long a member may take to release partitions
	// it was asked to revoke (when it asks for none) before it is removed.
	RebalanceTimeout time.Duration
	// HeartbeatInterval is the interval members are told to heartbeat at.
	HeartbeatInterval time.Duration
	// ExpiryCheckInterval is how often the leader looks for expired sessions
	// and revocations.
	ExpiryCheckInterval time.Duration
	// OffsetsRetention is how long a group without members keeps its
	// committed offsets after its last activity (its last member left, its
	// last commit), as Kafka's offsets.retention.minutes; then the group is
	// deleted. 0 keeps them forever.
	OffsetsRetention time.Duration
	// RetentionCheckInterval is how often the leader looks for groups past
	// OffsetsRetention.
	RetentionCheckInterval time.Duration

	// Kafka's classic protocol (classic.go).
	// InitialRebalanceDelay is how long an empty group's first rebalance
	// waits for more members (Kafka's group.initial.rebalance.delay.ms);
	// each member joining meanwhile restarts it, up to the rebalance
	// timeout.
	InitialRebalanceDelay time.Duration
	// MaxRebalanceTimeout bounds a classic member's rebalance timeout, and
	// with it how long a join or sync request may wait.
	MaxRebalanceTimeout time.Duration
	// MaxGroupSize bounds the members of a classic group, joining ones
	// included (Kafka's group.max.size): a member past it is refused
	// with GROUP_MAX_SIZE_REACHED.
	MaxGroupSize int
	// MaxClassicGroups bounds the classic groups held in memory.
	MaxClassicGroups int
	// MaxMemberMetadata bounds a classic member's protocol metadata, and
	// MaxAssignment one member's assignment, in bytes.
	MaxMemberMetadata, MaxAssignment int
}

// DefaultSettings returns the defaults: 10s sessions (allowed 1s to 5m), 30s
// rebalance timeout, 500ms heartbeats, offsets of idle groups kept 7 days
// (Kafka's default), checked every minute. The heartbeat is short because a
// heartbeat that changes nothing costs no Raft entry, and every step of a
// rebalance waits for one.
func DefaultSettings() Settings {
	return Settings{
		SessionTimeout:      10 * time.Second,
		MinSessionTimeout:   time.Second,
		MaxSessionTimeout:   5 * time.Minute,
		RebalanceTimeout:    30 * time.Second,
		HeartbeatInterval:   500 * time.Millisecond,
		ExpiryCheckInterval: 100 * time.Millisecond,

		OffsetsRetention:       7 * 24 * time.Hour,
		RetentionCheckInterval: time.Minute,

		InitialRebalanceDelay: 3 * time.Second,
		MaxRebalanceTimeout:   10 * time.Minute,
		MaxGroupSize:          1000,
		MaxClassicGroups:      100000,
		MaxMemberMetadata:     1 << 20,
		MaxAssignment:         1 << 20,
	}
}

// Validate checks ranges and relations; messages name the flags.
func (s Settings) Validate() error {
	switch {
	case s.MinSessionTimeout <= 0 || s.MaxSessionTimeout < s.MinSessionTimeout:
		return fmt.Errorf("session timeout bounds [%v, %v] are not valid", s.MinSessionTimeout, s.MaxSessionTimeout)
	case s.SessionTimeout < s.MinSessionTimeout || s.SessionTimeout > s.MaxSessionTimeout:
		return fmt.Errorf("flag -session-timeout: %v is outside [%v, %v]", s.SessionTimeout, s.MinSessionTimeout, s.MaxSessionTimeout)
	case s.HeartbeatInterval <= 0 || s.HeartbeatInterval*2 > s.MinSessionTimeout:
		return fmt.Errorf("flag -heartbeat-interval: %v must be positive and at most half the minimum session timeout %v", s.HeartbeatInterval, s.MinSessionTimeout)
	case s.RebalanceTimeout <= 0:
		return fmt.Errorf("flag -rebalance-timeout: %v must be positive", s.RebalanceTimeout)
	case s.ExpiryCheckInterval <= 0:
		return fmt.Errorf("expiry check interval %v must be positive", s.ExpiryCheckInterval)
	case s.OffsetsRetention < 0:
		return fmt.Errorf("flag -offsets-retention: %v must not be negative (0 keeps offsets forever)", s.OffsetsRetention)
	case s.OffsetsRetention > 0 && s.OffsetsRetention < s.MaxSessionTimeout:
		return fmt.Errorf("flag -offsets-retention: %v is shorter than the longest session %v", s.OffsetsRetention, s.MaxSessionTimeout)
	case s.InitialRebalanceDelay < 0:
		return fmt.Errorf("flag -initial-rebalance-delay: %v must not be negative", s.InitialRebalanceDelay)
	case s.MaxRebalanceTimeout <= 0:
		return fmt.Errorf("max rebalance timeout %v must be positive", s.MaxRebalanceTimeout)
	case s.MaxGroupSize <= 0:
		return fmt.Errorf("flag -max-group-size: %d must be positive", s.MaxGroupSize)
	case s.MaxClassicGroups <= 0 || s.MaxMemberMetadata <= 0 || s.MaxAssignment <= 0:
		return fmt.Errorf("classic group limits (groups %d, metadata %d, assignment %d) must be positive", s.MaxClassicGroups, s.MaxMemberMetadata, s.MaxAssignment)
	case s.OffsetsRetention > 0 && s.RetentionCheckInterval <= 0:
		return fmt.Errorf("retention check interval %v must be positive", s.RetentionCheckInterval)
	}
	return nil
}
