package client

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
)

// The group goroutine: it heartbeats, publishes each answered assignment as
// the target the Poll goroutine reconciles with, and declares the membership
// lost. It never touches partitions itself: the Poll goroutine takes and
// releases them, and the owned set each heartbeat reports is whatever the
// Poll goroutine holds at that moment (so a released partition is reported
// only after its fetcher stopped and OnRevoked returned).

// runGroup is the group goroutine; it returns when ctx ends (Close).
func (c *Consumer) runGroup(ctx context.Context) {
	defer close(c.groupDone)
	m := newMembership(c.cfg.SessionTimeout, c.cfg.RebalanceTimeout)
	base := groups.HeartbeatRequest{
		ClientID:           c.cfg.ClientID,
		Topics:             c.cfg.Topics,
		Assignor:           c.cfg.Assignor,
		Isolation:          c.cfg.IsolationLevel,
		SessionTimeoutMs:   int32(c.cfg.SessionTimeout.Milliseconds()),
		RebalanceTimeoutMs: int32(c.cfg.RebalanceTimeout.Milliseconds()),
	}
	for {
		select {
		case <-c.groupStop:
			return
		default:
		}
		// After a loss, rejoin only once the Poll goroutine released the
		// old partitions, so the new member reports none of them as owned.
		if !c.awaitLostReleased(ctx) {
			return
		}
		now := time.Now()
		if m.expired(now) {
			c.declareLost(m, "no heartbeat answered for the session timeout")
			continue
		}
		if m.revocationOverdue(now) {
			c.declareLost(m, "revoked partitions not released within the rebalance timeout (is Poll being called?)")
			continue
		}
		req := m.request(base, c.Assignment())
		rctx, cancel := context.WithDeadline(ctx, m.deadline(now))
		resp, err := c.coord.Heartbeat(rctx, c.cfg.Group, req)
		cancel()
		if ctx.Err() != nil {
			return
		}
		delay := c.afterHeartbeat(m, resp, err, now)
		m.noteRevocation(c.Assignment(), now)
		delay = m.wait(time.Now(), delay)
		if !c.pauseHeartbeat(ctx, delay) {
			return
		}
	}
}

// afterHeartbeat applies a heartbeat's outcome and returns how long to wait
// before the next one.
func (c *Consumer) afterHeartbeat(m *membership, resp *groups.HeartbeatResponse, err error, sentAt time.Time) time.Duration {
	if err == nil {
		wasJoined, prevEpoch := m.joined(), m.epoch
		changed := m.accept(resp, sentAt)
		c.mu.Lock()
		c.memberID, c.epoch, c.joinErr = m.memberID, m.epoch, nil
		if changed {
			c.target = m.target
		}
		c.mu.Unlock()
		if !wasJoined {
			c.log.Info("joined consumer group", "member_id", m.memberID, "member_epoch", m.epoch)
		}
		if changed || m.epoch != prevEpoch {
			c.log.Info("consumer group assignment", "member_id", m.memberID, "member_epoch", m.epoch, "partitions", len(m.target))
		}
		if changed {
			signal(c.wake)
		}
		return m.interval
	}
	f := m.fail(err, time.Now())
	if f.lost {
		c.declareLost(m, f.reason)
		return 0
	}
	if !m.joined() && joinRefused(err) {
		c.mu.Lock()
		c.joinErr = fmt.Errorf("join consumer group %s: %w", c.cfg.Group, err)
		c.mu.Unlock()
		signal(c.wake)
	}
	level := slog.LevelInfo // one failure is routine (a replica restarting)
	if m.failures > 2 {
		level = slog.LevelWarn
	}
	c.log.Log(context.Background(), level, "consumer group heartbeat failed; retrying",
		"member_id", m.memberID, "failures", m.failures, "retry_in", f.retryIn, "err", err)
	return f.retryIn
}

// joinError returns the coordinator's refusal of the join, if any.
func (c *Consumer) joinError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.joinErr
}

// declareLost forgets the membership (the next heartbeat joins anew) and
// hands every owned partition to the Poll goroutine as lost. With nothing
// owned there is nothing to release and the rejoin proceeds at once.
func (c *Consumer) declareLost(m *membership, reason string) {
	id := m.memberID
	m.reset()
	c.mu.Lock()
	owned := len(c.parts)
	c.memberID, c.epoch, c.target = "", groups.JoinEpoch, nil
	c.lostGen++
	if owned == 0 {
		c.lostHandled = c.lostGen
	}
	c.mu.Unlock()
	c.log.Warn("consumer group membership lost; rejoining", "member_id", id, "reason", reason, "partitions_lost", owned)
	signal(c.wake)
}

// awaitLostReleased waits until the Poll goroutine released the partitions
// of every lost membership; false when ctx ended first.
func (c *Consumer) awaitLostReleased(ctx context.Context) bool {
	for {
		c.mu.Lock()
		done := c.lostHandled == c.lostGen
		c.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-c.groupStop:
			return false
		case <-c.lostAck:
		}
	}
}

// pauseHeartbeat waits d, or less when the Poll goroutine asks for a
// heartbeat at once (its owned set changed); false when ctx ended.
func (c *Consumer) pauseHeartbeat(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.groupStop:
		return false
	case <-t.C:
	case <-c.hbNow:
	}
	return true
}
