package cluster

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
)

// Session keeps a registration with the metadata service alive, as storage
// nodes and frontends both need: Open registers, retrying until metadata
// accepts; Keep heartbeats, and registers again when a heartbeat is refused
// for good (the session lapsed and the registration was removed or fenced).
type Session struct {
	// Register makes one registration attempt; it logs a success itself
	// (it knows what was registered).
	Register func(ctx context.Context) error
	// Heartbeat renews the session once; an error that is not retriable
	// means the registration is gone.
	Heartbeat func(ctx context.Context) error
	// Interval is the time between heartbeats.
	Interval time.Duration
	// What names the member in log lines ("storage node", "kafka listener").
	What string
	Log  *slog.Logger
}

// Registration attempts are bounded in time and retried with a growing
// pause.
const (
	registerTimeout    = 5 * time.Second
	registerBackoff    = 100 * time.Millisecond
	registerMaxBackoff = 2 * time.Second
)

// Open registers, retrying until metadata accepts; false when ctx ended
// first.
func (s Session) Open(ctx context.Context) bool {
	backoff := registerBackoff
	for {
		rctx, cancel := context.WithTimeout(ctx, registerTimeout)
		err := s.Register(rctx)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.Log.Warn(s.What+" registration failed; retrying", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(backoff*2, registerMaxBackoff)
	}
}

// Keep heartbeats every Interval until ctx ends, registering again (Open)
// after a heartbeat refused for good.
func (s Session) Keep(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, 3*s.Interval)
		err := s.Heartbeat(hctx)
		cancel()
		var pe *protocol.Error
		if errors.As(err, &pe) && !pe.Code.Retriable() {
			s.Log.Warn(s.What+" heartbeat refused; registering again", "err", err)
			if !s.Open(ctx) {
				return
			}
		} else if err != nil && ctx.Err() == nil {
			s.Log.Warn(s.What+" heartbeat failed", "err", err)
		}
	}
}
