package console

import (
	"fmt"
	"time"
)

// Config tunes the console.
type Config struct {
	// Refresh is how often a page reloads itself in the browser (a meta
	// refresh); 0 turns reloading off.
	Refresh time.Duration
	// LookupTimeout bounds each look-up a page makes: the metadata
	// snapshot, the storage nodes' replica states (asked in parallel), the
	// offsets service's groups.
	LookupTimeout time.Duration
}

// DefaultConfig returns the settings used by the binary.
func DefaultConfig() Config {
	return Config{Refresh: 5 * time.Second, LookupTimeout: 3 * time.Second}
}

// Validate checks the ranges, naming the flags that set them.
func (c Config) Validate() error {
	switch {
	case c.Refresh != 0 && (c.Refresh < time.Second || c.Refresh > time.Hour):
		return fmt.Errorf("flag -console-refresh: %v must be 0 (off) or between 1s and 1h", c.Refresh)
	case c.Refresh%time.Second != 0:
		return fmt.Errorf("flag -console-refresh: %v must be whole seconds (a meta refresh counts in seconds)", c.Refresh)
	case c.LookupTimeout < 100*time.Millisecond || c.LookupTimeout > time.Minute:
		return fmt.Errorf("flag -console-timeout: %v must be between 100ms and 1m", c.LookupTimeout)
	}
	return nil
}
