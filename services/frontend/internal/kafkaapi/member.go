package kafkaapi

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Member keeps the frontend's Kafka listener registered with metadata: it
// registers (retrying until metadata answers), then heartbeats, and
// registers again when a heartbeat is refused (its session lapsed and it was
// removed). Its id is the frontend's Kafka node id.
type Member struct {
	sess cluster.Session

	id    atomic.Int32 // -1 until registered
	epoch atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewMember returns a stopped Member for the listener at kafkaAddr (as
// clients dial it).
func NewMember(client *cluster.Client, name, kafkaAddr, rack string, heartbeat time.Duration, log *slog.Logger) *Member {
	m := &Member{}
	m.id.Store(-1)
	req := cluster.RegisterFrontendRequest{Name: name, KafkaAddr: kafkaAddr, Rack: rack}
	m.sess = cluster.Session{
		Register: func(ctx context.Context) error {
			f, err := client.RegisterFrontend(ctx, req)
			if err == nil {
				m.id.Store(f.ID)
				m.epoch.Store(f.Epoch)
				log.Info("kafka listener registered with metadata", "node_id", f.ID, "epoch", f.Epoch, "kafka_addr", f.KafkaAddr)
			}
			return err
		},
		Heartbeat: func(ctx context.Context) error {
			return client.FrontendHeartbeat(ctx, cluster.FrontendHeartbeatRequest{ID: m.id.Load(), Epoch: m.epoch.Load()})
		},
		Interval: heartbeat,
		What:     "kafka listener",
		Log:      log,
	}
	return m
}

// ID returns the frontend's Kafka node id, -1 before its registration.
func (m *Member) ID() int32 { return m.id.Load() }

// Start registers and heartbeats in a goroutine Stop ends.
func (m *Member) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Go(func() {
		if m.sess.Open(ctx) {
			m.sess.Keep(ctx)
		}
	})
}

// Stop ends the loop; the session lapses on its own.
func (m *Member) Stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}
