package controller

import (
	"fmt"
	"time"
)

// Config configures the Controller.
type Config struct {
	// SessionTimeout is how long a storage node may go without a heartbeat
	// before it is fenced (flag -session-timeout).
	SessionTimeout time.Duration
	// CheckInterval is how often sessions are checked; zero means a sixth of
	// the session timeout, within [50ms, 1s].
	CheckInterval time.Duration
	// PreferredLeaderInterval is how often the leader moves partition
	// leadership back to preferred replicas that are alive and in the ISR
	// (flag -preferred-leader-interval); zero disables it.
	PreferredLeaderInterval time.Duration
	// ProposeTimeout bounds each proposal and the barrier at leadership start.
	ProposeTimeout time.Duration
}

// DefaultConfig returns a 3s session timeout (three missed one-second heartbeats) and a preferred-leader election
// every 5s.
func DefaultConfig() Config {
	return Config{SessionTimeout: 3 * time.Second, PreferredLeaderInterval: 5 * time.Second, ProposeTimeout: 10 * time.Second}
}

// Validate checks the fields.
func (c Config) Validate() error {
	if c.SessionTimeout < 10*time.Millisecond {
		return fmt.Errorf("flag -session-timeout: %v is below 10ms", c.SessionTimeout)
	}
	if c.CheckInterval < 0 || c.CheckInterval > c.SessionTimeout {
		return fmt.Errorf("controller check interval %v must be within 0..session timeout %v", c.CheckInterval, c.SessionTimeout)
	}
	if c.PreferredLeaderInterval < 0 {
		return fmt.Errorf("flag -preferred-leader-interval: %v is negative (0 disables)", c.PreferredLeaderInterval)
	}
	if c.PreferredLeaderInterval > 0 && c.PreferredLeaderInterval < 10*time.Millisecond {
		return fmt.Errorf("flag -preferred-leader-interval: %v is below 10ms (0 disables)", c.PreferredLeaderInterval)
	}
	if c.ProposeTimeout <= 0 {
		return fmt.Errorf("controller propose timeout must be positive, got %v", c.ProposeTimeout)
	}
	return nil
}

func (c Config) interval() time.Duration {
	if c.CheckInterval > 0 {
		return c.CheckInterval
	}
	return min(max(c.SessionTimeout/6, 50*time.Millisecond), time.Second)
}
