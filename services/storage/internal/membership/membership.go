// Package membership keeps a storage node in the cluster: it registers the node
// with the metadata service (getting a new registration epoch), heartbeats to
// keep its session alive, re-registers when metadata fences it, and follows the
// cluster model through the metadata watch, handing every new snapshot to the
// replica manager.
//
// Invariant: the node reports ready only after it registered and applied at
// least one snapshot, so it never answers for partitions it has not opened.
package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// Config configures membership.
type Config struct {
	NodeID         int32
	Addr           string // internal address for other services
	AdvertisedAddr string // address for clients
	KafkaAddr      string // the Kafka listener's address for clients ("" without one)
	Rack           string
	Heartbeat      time.Duration
	WatchWait      time.Duration
}

// Member runs registration, heartbeats and the metadata watch.
type Member struct {
	cfg    Config
	client *cluster.Client
	mgr    *replica.Manager
	log    *slog.Logger

	epoch    atomic.Int64                     // current registration epoch, 0 before the first
	version  atomic.Uint64                    // version of the last applied snapshot
	applied  atomic.Bool                      // a snapshot was applied
	applyErr atomic.Pointer[error]            // the last apply's failure, nil when it worked
	snap     atomic.Pointer[cluster.Snapshot] // the newest model seen, for the Kafka listener

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Member; Start runs it.
func New(cfg Config, client *cluster.Client, mgr *replica.Manager, log *slog.Logger) *Member {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.WatchWait <= 0 {
		cfg.WatchWait = 30 * time.Second
	}
	return &Member{cfg: cfg, client: client, mgr: mgr, log: log}
}

// Ready reports why the node is not ready, or nil.
func (m *Member) Ready() error {
	if m.epoch.Load() == 0 {
		return errors.New("not registered with metadata")
	}
	if !m.applied.Load() {
		return errors.New("no cluster metadata applied yet")
	}
	if p := m.applyErr.Load(); p != nil {
		return fmt.Errorf("applying cluster metadata: %w", *p)
	}
	return nil
}

// Snapshot returns the newest cluster model the node has seen (nil before
// the first); it is shared and must not be modified.
func (m *Member) Snapshot() *cluster.Snapshot { return m.snap.Load() }

// Refresh reads the model from metadata now and keeps it when it is newer
// than the one held (the watch applies it to the replicas as usual).
func (m *Member) Refresh(ctx context.Context) (*cluster.Snapshot, error) {
	s, err := m.client.Snapshot(ctx)
	if err != nil {
		if cur := m.snap.Load(); cur != nil {
			return cur, err
		}
		return nil, err
	}
	m.keep(s)
	return m.snap.Load(), nil
}

// keep stores s unless a newer model of the same cluster is held.
func (m *Member) keep(s *cluster.Snapshot) {
	for {
		cur := m.snap.Load()
		if cur != nil && cur.ClusterID == s.ClusterID && cur.Version >= s.Version {
			return
		}
		if m.snap.CompareAndSwap(cur, s) {
			return
		}
	}
}

// Epoch returns the registration epoch.
func (m *Member) Epoch() int64 { return m.epoch.Load() }

// Start launches the membership goroutines; Stop ends them.
func (m *Member) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	sess := m.session()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if !sess.Open(ctx) {
			return
		}
		m.wg.Go(func() { sess.Keep(ctx) })
		m.watchLoop(ctx)
	}()
}

// Stop ends the goroutines and waits for them.
func (m *Member) Stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

// session is the node's registration with metadata and its heartbeats.
func (m *Member) session() cluster.Session {
	return cluster.Session{
		Register: func(ctx context.Context) error {
			epoch, err := m.client.Register(ctx, cluster.RegisterRequest{ID: m.cfg.NodeID, Addr: m.cfg.Addr, AdvertisedAddr: m.cfg.AdvertisedAddr,
				KafkaAddr: m.cfg.KafkaAddr, Rack: m.cfg.Rack})
			if err == nil {
				m.epoch.Store(epoch)
				m.log.Info("registered with metadata", "epoch", epoch)
			}
			return err
		},
		Heartbeat: func(ctx context.Context) error {
			return m.client.Heartbeat(ctx, cluster.HeartbeatRequest{ID: m.cfg.NodeID, Epoch: m.epoch.Load()})
		},
		Interval: m.cfg.Heartbeat,
		What:     "storage node",
		Log:      m.log,
	}
}

// watchLoop follows the cluster model and applies each new snapshot. The first
// snapshot is a linearizable read (a lagging metadata member could otherwise
// describe a past in which live partitions do not exist yet). A snapshot that
// fails to apply is retried after a pause, and the node is not ready meanwhile.
func (m *Member) watchLoop(ctx context.Context) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, m.cfg.WatchWait+10*time.Second)
		var snap *cluster.Snapshot
		var err error
		if m.applied.Load() && m.applyErr.Load() == nil {
			snap, err = m.client.Watch(wctx, m.version.Load(), m.cfg.WatchWait)
		} else {
			snap, err = m.client.Snapshot(wctx)
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("metadata watch failed", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		m.keep(snap)
		if m.applied.Load() && m.applyErr.Load() == nil && snap.Version <= m.version.Load() {
			continue
		}
		if err := m.mgr.Apply(snap, m.current(snap)); err != nil {
			m.log.Error("applying cluster metadata failed; retrying", "version", snap.Version, "err", err)
			m.applyErr.Store(&err)
			m.applied.Store(true)
			sleep(ctx, time.Second)
			continue
		}
		m.applyErr.Store(nil)
		m.version.Store(snap.Version)
		m.applied.Store(true)
	}
}

// current reports whether snap is at least as new as this node's registration
// (it lists the node with its current epoch or a later one): only such a
// snapshot may delete partitions.
func (m *Member) current(snap *cluster.Snapshot) bool {
	n, ok := snap.Node(m.cfg.NodeID)
	return ok && n.Epoch >= m.epoch.Load()
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// String describes the member for logs.
func (m *Member) String() string { return fmt.Sprintf("node %d", m.cfg.NodeID) }
