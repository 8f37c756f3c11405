package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/quota"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// Manager owns the replicas of one storage node.
type Manager struct {
	dir  string
	self int32
	log  *slog.Logger

	mu       sync.RWMutex     // guards replicas and closed
	replicas map[Key]*Replica // open replicas
	closed   bool

	applyMu sync.Mutex // serialises Apply calls (opening logs happens outside mu)

	repl *replicationState // nil until EnableReplication

	droppedFsyncs    atomic.Int64 // fsyncs of deleted replicas' logs, so Fsyncs never goes back
	retentionDeleted atomic.Int64 // segments retention deleted
	cleaner          cleanerStats // the log cleaner's counters (cleaner.go)

	space        *seglog.SpaceGuard               // free-space reserve of dir's file system; nil: none
	quotas       quota.Table                      // client quotas of the last snapshot applied
	access       atomic.Pointer[cluster.Snapshot] // principals and ACLs of the last snapshot applied
	corruptFound atomic.Int64                     // damaged logs found (ReportCorrupt)
	onFlush      func(time.Duration)              // ObserveFlushes; nil: none
	logFS        seglog.FileSystem                // UseFileSystem; nil: the operating system's
}

// NewManager returns a manager keeping partition directories under dir.
func NewManager(dir string, self int32, log *slog.Logger) (*Manager, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	m := &Manager{dir: dir, self: self, log: log, replicas: map[Key]*Replica{}}
	m.cleaner.followUp = map[*Replica]time.Time{}
	return m, nil
}

// DataDir returns the directory holding the partition directories.
func (m *Manager) DataDir() string { return m.dir }

// KeepFree makes every log refuse appends that would leave less than min
// bytes free on the data directory's file system (seglog.ErrDiskFull); call
// it before the first Apply.
func (m *Manager) KeepFree(min int64) {
	m.space = seglog.NewSpaceGuard(m.dir, min)
}

// Space returns the free-space guard (nil without KeepFree).
func (m *Manager) Space() *seglog.SpaceGuard { return m.space }

// Self returns this node's id.
func (m *Manager) Self() int32 { return m.self }

// Get returns the replica of a partition, or UNKNOWN_TOPIC_OR_PARTITION.
func (m *Manager) Get(topic string, partition int32) (*Replica, error) {
	m.mu.RLock()
	r := m.replicas[Key{topic, partition}]
	m.mu.RUnlock()
	if r == nil {
		return nil, protocol.UnknownTopicOrPartition.Err("node %d holds no replica of %s-%d", m.self, topic, partition)
	}
	return r, nil
}

// Leader returns the replica of a partition this node leads: an error
// (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER) when it holds none or
// follows.
func (m *Manager) Leader(topic string, partition int32) (*Replica, error) {
	r, err := m.Get(topic, partition)
	if err != nil {
		return nil, err
	}
	if _, err := r.CheckLeader(m.self); err != nil {
		return nil, err
	}
	return r, nil
}

// Replicas returns the open replicas.
func (m *Manager) Replicas() []*Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Replica, 0, len(m.replicas))
	for _, r := range m.replicas {
		out = append(out, r)
	}
	return out
}

// dirName is Kafka's partition directory name: topic-partition.
func (m *Manager) dirName(k Key) string {
	return filepath.Join(m.dir, k.Topic+"-"+strconv.Itoa(int(k.Partition)))
}

// Apply makes the set of open replicas match the snapshot: it opens the logs of
// partitions assigned to this node and updates roles and configuration. When
// allowDelete is set it also deletes the logs of partitions no longer assigned
// (deleted topics, including directories left on disk from topics deleted while
// the node was down); callers allow it only for a snapshot known to be current
// (one that includes this node's latest registration), since a stale snapshot
// would make live partitions look deleted.
func (m *Manager) Apply(snap *cluster.Snapshot, allowDelete bool) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.setNodes(snap.Nodes)
	m.quotas.Set(snap.Quotas)
	m.access.Store(&cluster.Snapshot{Principals: snap.Principals, ACLs: snap.ACLs})
	want := map[Key]struct{}{}
	var errs []error
	settings := snap.Settings()
	for _, t := range snap.Topics {
		cfg, cfgErr := cluster.ResolveTopicConfig(t.Config, t.ReplicationFactor, settings)
		if cfgErr != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t.Name, cfgErr))
		}
		for _, p := range t.Partitions {
			if !contains(p.Replicas, m.self) {
				continue
			}
			k := Key{t.Name, p.ID}
			// Kept even when the config cannot be read (a newer metadata
			// service may know keys this node does not): never delete data
			// for a partition that is still assigned here.
			want[k] = struct{}{}
			if cfgErr != nil {
				m.setLeaderOnly(k, p)
				continue
			}
			if err := m.ensure(k, t.ID, p, cfg); err != nil {
				errs = append(errs, err)
			}
			if r, _ := m.Get(k.Topic, k.Partition); r != nil {
				m.handOverIfCutShort(r)
				m.reconcileFetcher(r)
			}
		}
	}
	if allowDelete {
		m.dropExcept(want)
		m.removeStrays(want)
	}
	return errors.Join(errs...)
}

// Access returns the principals and ACLs of the last snapshot applied (an
// empty model before the first).
func (m *Manager) Access() *cluster.Snapshot {
	if a := m.access.Load(); a != nil {
		return a
	}
	return &cluster.Snapshot{}
}

// Quota returns the quota a client has on this node, from the last snapshot
// applied (Apply also takes the client quotas the node enforces).
func (m *Manager) Quota(client string) cluster.Quota { return m.quotas.For(client) }

// setLeaderOnly updates an open replica's role without touching its config.
func (m *Manager) setLeaderOnly(k Key, p cluster.Partition) {
	m.mu.RLock()
	r := m.replicas[k]
	m.mu.RUnlock()
	if r != nil {
		r.setState(p, r.State().Config)
		m.reconcileFetcher(r)
	}
}

func (m *Manager) ensure(k Key, topicID string, p cluster.Partition, cfg cluster.TopicConfig) error {
	m.mu.RLock()
	r, closed := m.replicas[k], m.closed
	m.mu.RUnlock()
	if closed {
		return seglog.ErrClosed
	}
	if r != nil && r.topicID != topicID {
		// The topic was deleted and created again between two snapshots.
		m.mu.Lock()
		delete(m.replicas, k)
		m.mu.Unlock()
		r.depose()
		m.stopFetcher(k)
		if err := r.Log.Delete(); err != nil {
			return fmt.Errorf("%s: deleting the previous topic's log: %w", k, err)
		}
		m.log.Info("replica of an earlier topic incarnation deleted", "partition", k.String())
		r = nil
	}
	if r != nil {
		if r.State().Config != cfg {
			if err := r.Log.SetConfig(LogConfig(cfg)); err != nil {
				r.setState(p, r.State().Config) // the role still changes
				return fmt.Errorf("%s: config: %w", k, err)
			}
		}
		r.setState(p, cfg)
		return nil
	}
	start := time.Now()
	if stale, err := checkTopicID(m.dirName(k), topicID); err != nil {
		return fmt.Errorf("open %s: %w", k, err)
	} else if stale {
		m.log.Warn("removed a partition directory of an earlier topic with the same name", "partition", k.String())
	}
	lc := LogConfig(cfg)
	lc.FS = m.logFS
	l, err := seglog.Open(m.dirName(k), lc, m.log.With("partition", k.String()))
	if err != nil {
		return fmt.Errorf("open %s: %w", k, err)
	}
	if m.onFlush != nil {
		l.ObserveFlushes(m.onFlush)
	}
	if m.space != nil {
		l.SetSpaceGuard(m.space)
	}
	// A recovered log counts as flushed only once fsynced: do it now, so the
	// replica's durable progress (which the high watermark counts under the
	// fsync policy) covers everything it holds, even with no new writes.
	fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err = l.WaitFlushed(fctx, l.EndOffset())
	cancel()
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("open %s: flush the recovered log: %w", k, err)
	}
	r = newReplica(k, l, topicID, m.self)
	if l.RecoveryCut() {
		r.cutShort.Store(true)
		m.corruptFound.Add(1)
		m.log.Error("recovery cut the log short of an older segment: the replica fetches the rest before it may lead", "partition", k.String(),
			"end_offset", l.EndOffset())
	}
	r.setState(p, cfg)
	m.mu.Lock()
	m.replicas[k] = r
	m.mu.Unlock()
	m.log.Info("replica opened", "partition", k.String(), "leader", p.Leader, "leader_epoch", p.LeaderEpoch,
		"start_offset", l.StartOffset(), "end_offset", l.EndOffset(), "took", time.Since(start))
	return nil
}

// ObserveFlushes makes fn learn the duration of every flush pass of the
// logs opened from now on; call it before the first Apply.
func (m *Manager) ObserveFlushes(fn func(time.Duration)) { m.onFlush = fn }

// UseFileSystem makes the logs opened from now on change their files through
// fsys (seglog.Config.FS) instead of the operating system's; tests give it a
// faultfs.FS to fail a node's disk. Call it before the first Apply.
func (m *Manager) UseFileSystem(fsys seglog.FileSystem) { m.logFS = fsys }

// Fsyncs returns how many fsync calls the node's logs have made, deleted
// replicas included.
func (m *Manager) Fsyncs() int64 {
	n := m.droppedFsyncs.Load()
	for _, r := range m.Replicas() {
		n += r.Log.Fsyncs()
	}
	return n
}

func (m *Manager) dropExcept(want map[Key]struct{}) {
	m.mu.Lock()
	var drop []*Replica
	for k, r := range m.replicas {
		if _, ok := want[k]; !ok {
			drop = append(drop, r)
			delete(m.replicas, k)
		}
	}
	m.mu.Unlock()
	for _, r := range drop {
		r.depose()
		m.stopFetcher(r.Key)
		m.droppedFsyncs.Add(r.Log.Fsyncs())
		if err := r.Log.Delete(); err != nil {
			m.log.Error("deleting replica failed", "partition", r.Key.String(), "err", err)
			continue
		}
		m.log.Info("replica deleted", "partition", r.Key.String())
	}
}

// removeStrays deletes partition directories that no assignment names.
func (m *Manager) removeStrays(want map[Key]struct{}) {
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		m.log.Error("listing data dir failed", "err", err)
		return
	}
	for _, e := range entries {
		k, ok := parseDirName(e.Name())
		if !e.IsDir() || !ok {
			continue
		}
		if _, keep := want[k]; keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.dir, e.Name())); err != nil {
			m.log.Error("removing stray partition failed", "dir", e.Name(), "err", err)
			continue
		}
		m.log.Warn("removed partition directory that no assignment names", "dir", e.Name())
	}
}

func parseDirName(name string) (Key, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return Key{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || cluster.ValidateTopicName(name[:i]) != nil {
		return Key{}, false
	}
	return Key{name[:i], int32(p)}, true
}

// RunRetention enforces retention on every replica once.
func (m *Manager) RunRetention(now time.Time) {
	for _, r := range m.Replicas() {
		n, err := r.Log.EnforceRetention(now)
		m.retentionDeleted.Add(int64(n))
		if err != nil {
			m.log.Error("retention failed", "partition", r.Key.String(), "err", err)
			m.ReportFailed(r, err)
		} else if n > 0 {
			m.log.Info("retention deleted segments", "partition", r.Key.String(), "segments", n, "start_offset", r.Log.StartOffset())
		}
	}
}

// RetentionLoop runs RunRetention every interval until ctx ends.
func (m *Manager) RetentionLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.RunRetention(now)
		}
	}
}

// Close closes every log.
func (m *Manager) Close() error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.closeReplication()
	m.mu.Lock()
	rs := m.replicas
	m.replicas = map[Key]*Replica{}
	m.closed = true
	m.mu.Unlock()
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Log.Close())
	}
	return errors.Join(errs...)
}

func contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
