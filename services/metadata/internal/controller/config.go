package controller

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
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
	// ProducerIDBlockSize is how many producer ids the leader reserves with
	// one Raft entry and then hands out from memory (flag
	// -producer-id-block-size); zero means DefaultProducerIDBlockSize, 1 one
	// entry per id. At most this many ids are lost at each leader change or
	// restart.
	ProducerIDBlockSize int64
}

// DefaultProducerIDBlockSize is Kafka's producer id block size.
const DefaultProducerIDBlockSize = 1000

// DefaultConfig returns a 3s session timeout (three missed one-second heartbeats), a preferred-leader election
// every 5s and producer id blocks of 1000.
func DefaultConfig() Config {
	return Config{SessionTimeout: 3 * time.Second, PreferredLeaderInterval: 5 * time.Second, ProposeTimeout: 10 * time.Second,
		ProducerIDBlockSize: DefaultProducerIDBlockSize}
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
	if c.ProducerIDBlockSize < 0 || c.ProducerIDBlockSize > fsm.MaxProducerIDBlock {
		return fmt.Errorf("flag -producer-id-block-size: %d is outside 1..%d (0: the default, %d)", c.ProducerIDBlockSize, fsm.MaxProducerIDBlock, DefaultProducerIDBlockSize)
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

func (c Config) producerIDBlock() int64 {
	if c.ProducerIDBlockSize > 0 {
		return c.ProducerIDBlockSize
	}
	return DefaultProducerIDBlockSize
}
