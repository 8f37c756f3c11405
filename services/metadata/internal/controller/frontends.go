package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// Frontends with a Kafka listener have sessions like storage nodes: a
// registration is a log entry, heartbeats renew a session in the leader's
// memory, and a frontend silent for longer than the session timeout is
// removed from the model (RemoveFrontend), so Kafka clients stop being sent
// to it. A new leader gives every registered frontend a full session first.

// ErrUnknownFrontend: a heartbeat from a frontend that is not registered at
// the epoch it names (it was removed, or registered again since); it must
// register again.
var ErrUnknownFrontend = errors.New("frontend is not registered at this epoch")

// expireFrontends is the frontend session rule (lapsed): a frontend
// without a session for its current epoch gets one starting now; one silent
// for longer than timeout is to be removed at its epoch.
func expireFrontends(fronts []cluster.Frontend, sessions map[int32]session, now time.Time, timeout time.Duration) []fsm.RemoveFrontend {
	regs := make([]registration, len(fronts))
	for i, f := range fronts {
		regs[i] = registration{f.ID, f.Epoch}
	}
	var out []fsm.RemoveFrontend
	for _, r := range lapsed(regs, sessions, now, timeout) {
		out = append(out, fsm.RemoveFrontend{ID: r.id, Epoch: r.epoch})
	}
	return out
}

// RegisterFrontend commits a frontend's registration and opens its session.
func (c *Controller) RegisterFrontend(ctx context.Context, req cluster.RegisterFrontendRequest) (cluster.Frontend, error) {
	if !c.Active() {
		return cluster.Frontend{}, ErrNotActive
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeRegisterFrontend, RegisterFrontend: &fsm.RegisterFrontend{
		Name: req.Name, KafkaAddr: req.KafkaAddr, Rack: req.Rack}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return cluster.Frontend{}, err
	}
	c.mu.Lock()
	if c.fsessions != nil {
		c.fsessions[res.Frontend.ID] = session{epoch: res.Frontend.Epoch, lastSeen: c.now(), heard: true}
	}
	c.mu.Unlock()
	c.log.Info("frontend registered", "frontend", res.Frontend.ID, "name", req.Name, "kafka_addr", req.KafkaAddr, "epoch", res.Frontend.Epoch)
	return res.Frontend, nil
}

// FrontendHeartbeat renews a frontend's session (in memory only).
func (c *Controller) FrontendHeartbeat(req cluster.FrontendHeartbeatRequest) error {
	f, ok := c.fsm.Frontend(req.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return ErrNotActive
	}
	if !ok || f.Epoch != req.Epoch {
		return fmt.Errorf("%w: frontend %d at epoch %d; register again", ErrUnknownFrontend, req.ID, req.Epoch)
	}
	c.fsessions[req.ID] = session{epoch: f.Epoch, lastSeen: c.now(), heard: true}
	return nil
}

// checkFrontends removes the frontends whose session lapsed; a failed
// removal is retried by the next check.
func (c *Controller) checkFrontends() {
	fronts := c.fsm.Frontends()
	c.mu.Lock()
	if !c.active {
		c.mu.Unlock()
		return
	}
	gone := expireFrontends(fronts, c.fsessions, c.now(), c.cfg.SessionTimeout)
	c.mu.Unlock()
	for _, r := range gone {
		ctx, cancel := c.ctx()
		res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeRemoveFrontend, RemoveFrontend: &r})
		cancel()
		if err == nil {
			err = res.Err
		}
		switch {
		case errors.Is(err, fsm.ErrStaleNodeEpoch):
			c.log.Debug("frontend removal overtaken by a registration", "frontend", r.ID, "err", err)
		case err != nil:
			c.log.Warn("frontend removal not committed; will retry", "frontend", r.ID, "err", err)
		default:
			c.log.Warn("frontend session expired: removed", "frontend", r.ID, "epoch", r.Epoch, "session_timeout", c.cfg.SessionTimeout)
		}
	}
}
