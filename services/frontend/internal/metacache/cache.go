package metacache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/server/quota"
)

// Sentinel errors of the cache.
var (
	// ErrNoSnapshot is returned by Ready while no snapshot has arrived yet.
	ErrNoSnapshot = errors.New("metacache: no cluster snapshot yet")
	// ErrStopped is returned by Refresh after Stop.
	ErrStopped = errors.New("metacache: stopped")
)

// Config tunes the watch loop and refreshes.
type Config struct {
	// WatchWait is how long one watch long-poll may wait on the metadata
	// service for a newer version.
	WatchWait time.Duration
	// RequestTimeout bounds one Snapshot request made by Refresh; a watch gets
	// WatchWait plus this much.
	RequestTimeout time.Duration
	// BackoffMin and BackoffMax bound the pause after a failed watch; it
	// doubles on every failure in a row.
	BackoffMin time.Duration
	BackoffMax time.Duration
}

// DefaultConfig returns the settings used by the binary.
func DefaultConfig() Config {
	return Config{
		WatchWait:      30 * time.Second,
		RequestTimeout: 5 * time.Second,
		BackoffMin:     100 * time.Millisecond,
		BackoffMax:     5 * time.Second,
	}
}

// Validate checks ranges and the relation between the backoff bounds.
func (c Config) Validate() error {
	switch {
	case c.WatchWait <= 0:
		return fmt.Errorf("metacache: watch wait %v must be positive", c.WatchWait)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("metacache: request timeout %v must be positive", c.RequestTimeout)
	case c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("metacache: backoff %v..%v must be positive and ordered", c.BackoffMin, c.BackoffMax)
	}
	return nil
}

// Source is the metadata service as the cache sees it; *cluster.Client is one.
// Both methods are called from any goroutine and must honour ctx.
type Source interface {
	// Watch returns a snapshot newer than since, or the current one (perhaps
	// still at since) once wait has passed.
	Watch(ctx context.Context, since uint64, wait time.Duration) (*cluster.Snapshot, error)
	// Snapshot returns the current snapshot without waiting.
	Snapshot(ctx context.Context) (*cluster.Snapshot, error)
}

// Route is the routing view of one topic. It is immutable.
type Route struct {
	Topic string
	// Leaders holds, per partition id, the internal address of the leader's
	// storage node, or "" when the partition has no leader or the leader's node
	// is unknown.
	Leaders []string
	// LeaderIDs holds, per partition id, the leader's node id (-1 when none).
	LeaderIDs []int32
}

// Partitions returns the topic's partition count.
func (r *Route) Partitions() int { return len(r.Leaders) }

// Leader returns the leader address of partition p, "" when it has none or p is
// out of range.
func (r *Route) Leader(p int32) string {
	if p < 0 || int(p) >= len(r.Leaders) {
		return ""
	}
	return r.Leaders[p]
}

// view is one published snapshot with its routes.
type view struct {
	snap    *cluster.Snapshot
	routes  map[string]*Route
	quotas  quota.Table
	changed chan struct{} // closed when a newer view replaces this one
}

func newView(s *cluster.Snapshot) *view {
	v := &view{snap: s, routes: make(map[string]*Route, len(s.Topics)), changed: make(chan struct{})}
	addrs := make(map[int32]string, len(s.Nodes))
	for _, n := range s.Nodes {
		addrs[n.ID] = n.Addr
	}
	for _, t := range s.Topics {
		r := &Route{Topic: t.Name, Leaders: make([]string, len(t.Partitions)), LeaderIDs: make([]int32, len(t.Partitions))}
		for i := range r.LeaderIDs {
			r.LeaderIDs[i] = -1
		}
		for _, p := range t.Partitions {
			if p.ID < 0 || int(p.ID) >= len(r.Leaders) {
				continue // a malformed snapshot; the partition stays leaderless
			}
			r.LeaderIDs[p.ID] = p.Leader
			if p.Leader >= 0 {
				r.Leaders[p.ID] = addrs[p.Leader]
			}
		}
		v.routes[t.Name] = r
	}
	v.quotas.Set(s.Quotas)
	return v
}

// flight is one Refresh in progress; its fields are written before done closes.
type flight struct {
	done chan struct{}
	snap *cluster.Snapshot
	err  error
}

// Cache holds the newest snapshot the frontend knows. It is safe for concurrent
// use.
type Cache struct {
	cfg Config
	src Source
	log *slog.Logger

	cur   atomic.Pointer[view] // the published view; nil until the first snapshot
	empty chan struct{}        // closed when the first view is published
	// heard is when the metadata service last answered a fetch (Unix
	// nanoseconds): the model was current then. A fetch is a consistent
	// read; a watch may be answered by a metadata follower behind the
	// leader (a topic just created may be missing from it), so it does not
	// count.
	heard atomic.Int64

	// ctx ends on Stop; the watch loop and refresh fetches run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the watch loop and refresh fetches

	mu       sync.Mutex // guards inflight, queued, started, the swap in publish and cancelling ctx
	inflight *flight    // the Refresh in progress, or nil
	queued   *flight    // the Refresh that starts when inflight ends, or nil
	started  bool
}

// New returns a cache that reads from src. Call Start to follow changes;
// Refresh and the readers work without it.
func New(cfg Config, src Source, log *slog.Logger) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{cfg: cfg, src: src, log: log, ctx: ctx, cancel: cancel, empty: make(chan struct{})}, nil
}

// Start launches the watch loop. It returns at once; Ready tells when the
// first snapshot has arrived.
func (c *Cache) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.ctx.Err() != nil {
		return
	}
	c.started = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.watchLoop()
	}()
}

// Stop ends the watch loop and any refresh in flight and waits for them.
func (c *Cache) Stop() {
	// Under mu, so that no Refresh adds a fetch to wg after Wait has begun.
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// Snapshot returns the current snapshot, or nil before the first one. The
// snapshot is shared: callers must not modify it.
func (c *Cache) Snapshot() *cluster.Snapshot {
	if v := c.cur.Load(); v != nil {
		return v.snap
	}
	return nil
}

// Version returns the current snapshot's version, 0 before the first one.
func (c *Cache) Version() uint64 {
	if s := c.Snapshot(); s != nil {
		return s.Version
	}
	return 0
}

// Route returns the routing view of a topic from the current snapshot.
func (c *Cache) Route(topic string) (*Route, bool) {
	v := c.cur.Load()
	if v == nil {
		return nil, false
	}
	r, ok := v.routes[topic]
	return r, ok
}

// Quota returns the quota that applies to a client in the current snapshot
// (none before the first one).
func (c *Cache) Quota(client string) cluster.Quota {
	if v := c.cur.Load(); v != nil {
		return v.quotas.For(client)
	}
	return cluster.Quota{}
}

// Ready is the readiness check: nil once a snapshot is held.
func (c *Cache) Ready() error {
	if c.cur.Load() == nil {
		return ErrNoSnapshot
	}
	return nil
}

// Changed returns a channel closed when a snapshot newer than the one held now
// is published (or, before the first one, when the first arrives).
func (c *Cache) Changed() <-chan struct{} {
	if v := c.cur.Load(); v != nil {
		return v.changed
	}
	return c.empty
}

// WaitNewer returns the current snapshot as soon as its version is above since,
// waiting until ctx ends at most; it then returns the current snapshot (nil if
// there is none) and ctx's error.
func (c *Cache) WaitNewer(ctx context.Context, since uint64) (*cluster.Snapshot, error) {
	for {
		ch := c.Changed()
		if s := c.Snapshot(); s != nil && s.Version > since {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return c.Snapshot(), ctx.Err()
		}
	}
}

// publish installs s if it is newer than the held snapshot (or from another
// cluster) and reports whether it did.
func (c *Cache) publish(s *cluster.Snapshot) bool {
	if s == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	if old != nil && s.Version <= old.snap.Version && s.ClusterID == old.snap.ClusterID {
		return false
	}
	c.cur.Store(newView(s))
	if old == nil {
		close(c.empty)
		c.log.Info("cluster metadata received", "version", s.Version, "topics", len(s.Topics), "nodes", len(s.Nodes))
	} else {
		close(old.changed)
		c.log.Debug("cluster metadata updated", "version", s.Version, "previous", old.snap.Version)
	}
	return true
}

// Refresh fetches the current snapshot from the metadata service and
// publishes it: what it returns reflects every change committed before the
// call (a topic the caller just deleted is gone from it). Calls made while a
// fetch is in flight share the one fetch that starts after it, since the
// one in flight may have been answered before their change. The fetch
// itself is bounded by RequestTimeout and does not end when ctx does; ctx
// only bounds the caller's wait.
func (c *Cache) Refresh(ctx context.Context) (*cluster.Snapshot, error) {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, ErrStopped
	}
	var f *flight
	switch {
	case c.inflight == nil:
		f = &flight{done: make(chan struct{})}
		c.inflight = f
		c.wg.Add(1)
		go c.fetch(f)
	case c.queued == nil:
		f = &flight{done: make(chan struct{})}
		c.queued = f
	default:
		f = c.queued
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.snap, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// RefreshOlder is Refresh, unless a fetch was answered less than maxAge ago:
// then the held snapshot is current enough and is returned as is.
// It keeps requests for unknown topics from turning into a stream of
// metadata requests.
func (c *Cache) RefreshOlder(ctx context.Context, maxAge time.Duration) (*cluster.Snapshot, error) {
	if s := c.Snapshot(); s != nil && time.Since(time.Unix(0, c.heard.Load())) < maxAge {
		return s, nil
	}
	return c.Refresh(ctx)
}

func (c *Cache) fetch(f *flight) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
	snap, err := c.src.Snapshot(ctx)
	cancel()
	if err != nil {
		f.err = fmt.Errorf("metacache: refresh: %w", err)
	} else {
		c.heard.Store(time.Now().UnixNano())
		c.publish(snap)
		f.snap = c.Snapshot()
	}
	c.mu.Lock()
	c.inflight, c.queued = c.queued, nil
	if next := c.inflight; next != nil {
		c.wg.Add(1)
		go c.fetch(next)
	}
	c.mu.Unlock()
	close(f.done)
}

// watchLoop long-polls the metadata service until Stop.
func (c *Cache) watchLoop() {
	backoff := c.cfg.BackoffMin
	failures := 0
	for c.ctx.Err() == nil {
		since, began := c.Version(), time.Now()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.WatchWait+c.cfg.RequestTimeout)
		snap, err := c.src.Watch(ctx, since, c.cfg.WatchWait)
		cancel()
		if c.ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			// The first failure and then every tenth are logged, so a metadata
			// outage does not flood the log.
			if failures == 1 || failures%10 == 0 {
				c.log.Warn("metadata watch failed", "err", err, "failures", failures, "retry_in", backoff)
			}
			select {
			case <-time.After(backoff):
			case <-c.ctx.Done():
				return
			}
			backoff = min(2*backoff, c.cfg.BackoffMax)
			continue
		}
		if failures > 0 {
			c.log.Info("metadata watch recovered", "failures", failures)
		}
		failures, backoff = 0, c.cfg.BackoffMin
		if !c.publish(snap) && time.Since(began) < c.cfg.BackoffMin {
			// Nothing new came back at once: a server that ignores the wait must
			// not turn this loop into a busy poll.
			select {
			case <-time.After(c.cfg.BackoffMin):
			case <-c.ctx.Done():
				return
			}
		}
	}
}

// RefreshSoon starts a refresh (or joins the one in flight) without waiting
// for it, for callers that know the model just changed, such as the admin
// routes after creating or deleting a topic.
func (c *Cache) RefreshSoon() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Refresh starts the owned fetch, then returns at once
	_, _ = c.Refresh(ctx)
}
