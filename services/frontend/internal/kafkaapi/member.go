package kafkaapi

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Member keeps the frontend's Kafka listener registered with metadata: it
// registers (retrying until metadata answers), then heartbeats, and
// registers again when a heartbeat is refused (its session lapsed and it was
// removed). Its id is the frontend's Kafka node id.
type Member struct {
	client    *cluster.Client
	req       cluster.RegisterFrontendRequest
	heartbeat time.Duration
	log       *slog.Logger

	id    atomic.Int32 // -1 until registered
	epoch atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewMember returns a stopped Member for the listener at kafkaAddr (as
// clients dial it).
func NewMember(client *cluster.Client, name, kafkaAddr, rack string, heartbeat time.Duration, log *slog.Logger) *Member {
	m := &Member{client: client, req: cluster.RegisterFrontendRequest{Name: name, KafkaAddr: kafkaAddr, Rack: rack},
		heartbeat: heartbeat, log: log}
	m.id.Store(-1)
	return m
}

// ID returns the frontend's Kafka node id, -1 before its registration.
func (m *Member) ID() int32 { return m.id.Load() }

// Start registers and heartbeats in a goroutine Stop ends.
func (m *Member) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.run(ctx)
	}()
}

// Stop ends the loop; the session lapses on its own.
func (m *Member) Stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

func (m *Member) run(ctx context.Context) {
	if !m.register(ctx) {
		return
	}
	t := time.NewTicker(m.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, 3*m.heartbeat)
		err := m.client.FrontendHeartbeat(hctx, cluster.FrontendHeartbeatRequest{ID: m.id.Load(), Epoch: m.epoch.Load()})
		cancel()
		var pe *protocol.Error
		if errors.As(err, &pe) && !pe.Code.Retriable() {
			m.log.Warn("frontend heartbeat refused; registering again", "err", err)
			if !m.register(ctx) {
				return
			}
		} else if err != nil && ctx.Err() == nil {
			m.log.Warn("frontend heartbeat failed", "err", err)
		}
	}
}

// register retries until metadata accepts the registration or ctx ends.
func (m *Member) register(ctx context.Context) bool {
	backoff := 100 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		f, err := m.client.RegisterFrontend(rctx, m.req)
		cancel()
		if err == nil {
			m.id.Store(f.ID)
			m.epoch.Store(f.Epoch)
			m.log.Info("kafka listener registered with metadata", "node_id", f.ID, "epoch", f.Epoch, "kafka_addr", f.KafkaAddr)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		m.log.Warn("kafka listener registration failed; retrying", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}
