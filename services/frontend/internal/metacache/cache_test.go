package metacache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
)

func testConfig() Config {
	c := DefaultConfig()
	c.WatchWait = 2 * time.Second
	c.BackoffMin = 5 * time.Millisecond
	c.BackoffMax = 20 * time.Millisecond
	return c
}

func newTestCache(t *testing.T, md *fakecluster.Metadata) *Cache {
	t.Helper()
	c, err := New(testConfig(), cluster.NewClient([]string{md.URL()}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func TestCacheFollowsWatch(t *testing.T) {
	md := fakecluster.NewMetadata(cluster.Node{ID: 1, Addr: "10.0.0.1:9000", AdvertisedAddr: "public:9000"}, cluster.Node{ID: 2, Addr: "10.0.0.2:9000"})
	defer md.Close()
	md.AddTopic("orders", 1, 2, -1)
	c := newTestCache(t, md)
	if err := c.Ready(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("ready before any snapshot: %v", err)
	}
	c.Start()
	testkit.WaitFor(t, 5*time.Second, "first snapshot", func() bool { return c.Ready() == nil })

	r, ok := c.Route("orders")
	if !ok || r.Partitions() != 3 {
		t.Fatalf("route %+v %v", r, ok)
	}
	// The internal address, not the advertised one: the frontend is inside.
	if r.Leader(0) != "10.0.0.1:9000" || r.Leader(1) != "10.0.0.2:9000" || r.Leader(2) != "" || r.Leader(3) != "" || r.Leader(-1) != "" {
		t.Fatalf("leaders %v", r.Leaders)
	}

	md.SetLeader("orders", 2, 1)
	testkit.WaitFor(t, 5*time.Second, "leader change", func() bool {
		r, _ := c.Route("orders")
		return r.Leader(2) == "10.0.0.1:9000"
	})
	if r.Leader(2) != "" {
		t.Fatal("a published route changed under its reader")
	}
	if c.Version() != md.Version() {
		t.Fatalf("version %d, metadata at %d", c.Version(), md.Version())
	}
}

func TestCacheRefreshCoalesces(t *testing.T) {
	md := fakecluster.NewMetadata()
	defer md.Close()
	md.AddTopic("t", -1)
	c := newTestCache(t, md)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, err := c.Refresh(context.Background()); err != nil || s == nil {
				t.Errorf("refresh: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := md.Snapshots(); n < 1 || n > 20 {
		t.Fatalf("%d snapshot requests", n)
	}
	if _, ok := c.Route("t"); !ok {
		t.Fatal("refresh did not publish")
	}
}

func TestCacheNeverGoesBack(t *testing.T) {
	c, err := New(testConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.publish(&cluster.Snapshot{Version: 5, ClusterID: "a"}) || c.publish(&cluster.Snapshot{Version: 4, ClusterID: "a"}) || c.publish(&cluster.Snapshot{Version: 5, ClusterID: "a"}) {
		t.Fatal("older or equal version replaced a newer one")
	}
	if !c.publish(&cluster.Snapshot{Version: 1, ClusterID: "b"}) || c.Version() != 1 {
		t.Fatal("a new cluster id must replace the view")
	}
}

func TestCacheWaitNewer(t *testing.T) {
	md := fakecluster.NewMetadata()
	defer md.Close()
	c := newTestCache(t, md)
	c.Start()
	testkit.WaitFor(t, 5*time.Second, "first snapshot", func() bool { return c.Ready() == nil })
	v := c.Version()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	s, err := c.WaitNewer(ctx, v)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || s == nil || s.Version != v {
		t.Fatalf("no change: %v %v", s, err)
	}
	done := make(chan *cluster.Snapshot)
	go func() {
		s, _ := c.WaitNewer(context.Background(), v)
		done <- s
	}()
	md.AddTopic("new", -1)
	select {
	case s := <-done:
		if s.Version <= v {
			t.Fatalf("version %d", s.Version)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitNewer did not see the change")
	}
}

func TestCacheSurvivesMetadataOutage(t *testing.T) {
	md := fakecluster.NewMetadata()
	defer md.Close()
	md.SetDown(true)
	c := newTestCache(t, md)
	c.Start()
	if _, err := c.Refresh(context.Background()); err == nil {
		t.Fatal("refresh worked against a down service")
	}
	md.SetDown(false)
	testkit.WaitFor(t, 5*time.Second, "recovery", func() bool { return c.Ready() == nil })
	c.Stop()
	if _, err := c.Refresh(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("refresh after stop: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.BackoffMax = bad.BackoffMin / 2
	if bad.Validate() == nil {
		t.Fatal("max backoff below min accepted")
	}
}

func TestRefreshOlderSkipsFreshModel(t *testing.T) {
	md := fakecluster.NewMetadata()
	defer md.Close()
	c := newTestCache(t, md)
	ctx := context.Background()
	if _, err := c.RefreshOlder(ctx, time.Hour); err != nil { // nothing held: fetches
		t.Fatal(err)
	}
	if _, err := c.RefreshOlder(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := md.Snapshots(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	if _, err := c.RefreshOlder(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n := md.Snapshots(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
}

// TestRefreshOlderIgnoresTheWatch: a model heard only through the watch
// (which a metadata follower behind the leader may answer) does not spare
// a request for a missing topic the consistent fetch.
func TestRefreshOlderIgnoresTheWatch(t *testing.T) {
	md := fakecluster.NewMetadata()
	defer md.Close()
	md.AddTopic("old", 1)
	c := newTestCache(t, md)
	c.Start()
	testkit.WaitFor(t, 5*time.Second, "the watch's first snapshot", func() bool { return c.Ready() == nil })
	before := md.Snapshots()
	snap, err := c.RefreshOlder(context.Background(), time.Hour)
	if err != nil || snap == nil {
		t.Fatal(err)
	}
	if n := md.Snapshots(); n != before+1 {
		t.Fatalf("%d fetches after a model heard through the watch only, want %d", n, before+1)
	}
}

// gatedSource answers Snapshot with the version it held when asked, after
// release is closed: a fetch answered before a change that lands while it is
// in flight.
type gatedSource struct {
	version atomic.Uint64
	asked   chan uint64
	release chan struct{}
}

func (g *gatedSource) Snapshot(ctx context.Context) (*cluster.Snapshot, error) {
	v := g.version.Load()
	g.asked <- v
	select {
	case <-g.release:
		return &cluster.Snapshot{Version: v}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gatedSource) Watch(ctx context.Context, since uint64, wait time.Duration) (*cluster.Snapshot, error) {
	return nil, errors.New("no watch here")
}

// TestRefreshSeesChangesBeforeIt: a Refresh that arrives while a fetch is
// in flight does not take that fetch's answer, which may predate the
// caller's change (a topic it just deleted), but the next fetch's.
func TestRefreshSeesChangesBeforeIt(t *testing.T) {
	src := &gatedSource{asked: make(chan uint64, 4), release: make(chan struct{})}
	src.version.Store(1)
	c, err := New(testConfig(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	first := make(chan *cluster.Snapshot, 1)
	go func() {
		s, _ := c.Refresh(context.Background())
		first <- s
	}()
	if v := <-src.asked; v != 1 {
		t.Fatalf("first fetch asked at version %d", v)
	}
	src.version.Store(2) // a change commits while the first fetch is out
	later := make(chan *cluster.Snapshot, 3)
	for range 3 {
		go func() {
			s, _ := c.Refresh(context.Background())
			later <- s
		}()
	}
	testkit.WaitFor(t, 5*time.Second, "the later callers to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queued != nil
	})
	close(src.release)
	if s := <-first; s == nil || s.Version != 1 {
		t.Fatalf("first caller: %+v", s)
	}
	for range 3 {
		if s := <-later; s == nil || s.Version != 2 {
			t.Fatalf("a caller after the change got %+v", s)
		}
	}
	if v := <-src.asked; v != 2 {
		t.Fatalf("second fetch asked at version %d", v)
	}
}
