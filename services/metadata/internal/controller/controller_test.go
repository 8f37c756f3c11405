package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// fakeRaft applies commands straight to an FSM, as a single-member group
// would, at indexes 1, 2, ...
type fakeRaft struct {
	mu  sync.Mutex
	f   *fsm.FSM
	idx uint64
	err error // when set, every call fails with it
}

func (r *fakeRaft) Propose(_ context.Context, cmd fsm.Command) (*fsm.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	r.idx++
	return r.f.ApplyCommand(r.idx, cmd), nil
}

func (r *fakeRaft) Barrier(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTest(t *testing.T, f *fsm.FSM) (*Controller, *fakeRaft, *clock) {
	t.Helper()
	if f == nil {
		f = fsm.New()
	}
	r := &fakeRaft{f: f}
	c, err := New(Config{SessionTimeout: 6 * time.Second, ProposeTimeout: time.Second}, r, f, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(1000, 0)}
	c.now = clk.now
	return c, r, clk
}

// lead makes c active without its goroutine.
func lead(t *testing.T, c *Controller) {
	t.Helper()
	c.SetLeader(true)
	c.syncLeadership()
	if !c.Active() {
		t.Fatal("controller not active after take-over")
	}
}

func alive(t *testing.T, f *fsm.FSM, id int32) bool {
	t.Helper()
	n, ok := f.Node(id)
	if !ok {
		t.Fatalf("node %d not registered", id)
	}
	return n.Alive
}

func TestInactiveUntilLeader(t *testing.T) {
	c, _, _ := newTest(t, nil)
	if err := c.Heartbeat(cluster.HeartbeatRequest{ID: 1, Epoch: 1}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("Heartbeat before leadership = %v; want ErrNotActive", err)
	}
	if _, err := c.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "a:1"}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("Register before leadership = %v; want ErrNotActive", err)
	}
}

func TestTakeOverSetsClusterIDOnce(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	id := r.f.ClusterID()
	if len(id) != 32 {
		t.Fatalf("cluster id = %q", id)
	}
	c.SetLeader(false)
	lead(t, c)
	if r.f.ClusterID() != id {
		t.Fatalf("cluster id changed on a second take-over: %q -> %q", id, r.f.ClusterID())
	}
}

func TestTakeOverRetriesAfterBarrierFailure(t *testing.T) {
	c, r, _ := newTest(t, nil)
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready as a follower = %v", err)
	}
	r.err = errors.New("no quorum")
	c.SetLeader(true)
	c.syncLeadership()
	if c.Active() {
		t.Fatal("active although the barrier failed")
	}
	if err := c.Ready(); !errors.Is(err, ErrTakingOver) {
		t.Fatalf("Ready while taking over = %v; want ErrTakingOver", err)
	}
	r.err = nil
	c.syncLeadership()
	if !c.Active() {
		t.Fatal("not active after the barrier succeeded")
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready once active = %v", err)
	}
}

func TestHeartbeatAndFencing(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	epoch, err := c.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "a:1", Rack: "r1"})
	if err != nil || epoch <= 0 {
		t.Fatalf("Register = %d, %v", epoch, err)
	}
	tests := []struct {
		name string
		req  cluster.HeartbeatRequest
		want error
	}{
		{"current epoch", cluster.HeartbeatRequest{ID: 1, Epoch: epoch}, nil},
		{"stale epoch", cluster.HeartbeatRequest{ID: 1, Epoch: epoch - 1}, ErrFencedEpoch},
		{"future epoch", cluster.HeartbeatRequest{ID: 1, Epoch: epoch + 5}, ErrFencedEpoch},
		{"unknown node", cluster.HeartbeatRequest{ID: 7, Epoch: 1}, ErrUnknownNode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Heartbeat(tc.req); !errors.Is(err, tc.want) {
				t.Fatalf("Heartbeat = %v; want %v", err, tc.want)
			}
		})
	}
	// A re-registration fences the old epoch.
	epoch2, _ := c.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "a:1"})
	if err := c.Heartbeat(cluster.HeartbeatRequest{ID: 1, Epoch: epoch}); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("old epoch after re-registration = %v; want ErrFencedEpoch", err)
	}
	if epoch2 <= epoch || r.f.Version() == 0 {
		t.Fatalf("epoch did not grow: %d -> %d", epoch, epoch2)
	}
}

func TestSessionExpiryFencesAndRegistrationRevives(t *testing.T) {
	c, r, clk := newTest(t, nil)
	lead(t, c)
	e1, _ := c.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "a:1"})
	e2, _ := c.Register(context.Background(), cluster.RegisterRequest{ID: 2, Addr: "b:1"})
	clk.advance(4 * time.Second)
	_ = c.Heartbeat(cluster.HeartbeatRequest{ID: 2, Epoch: e2})
	clk.advance(3 * time.Second) // node 1 silent for 7s, node 2 for 3s
	c.checkSessions()
	if alive(t, r.f, 1) || !alive(t, r.f, 2) {
		t.Fatalf("after 7s: node1 alive=%v node2 alive=%v; want false, true", alive(t, r.f, 1), alive(t, r.f, 2))
	}
	// Fenced: the epoch moved on, and the old one is refused.
	if n, _ := r.f.Node(1); n.Epoch <= e2 {
		t.Fatalf("fenced node 1 has epoch %d; want above %d", n.Epoch, e2)
	}
	if err := c.Heartbeat(cluster.HeartbeatRequest{ID: 1, Epoch: e1}); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("heartbeat with the fenced epoch = %v; want ErrFencedEpoch", err)
	}
	c.checkSessions()
	if alive(t, r.f, 1) {
		t.Fatal("a fenced node came back without registering")
	}
	// A fenced node learns nothing it could heartbeat with: even its new
	// epoch is refused while it is dead.
	n1, _ := r.f.Node(1)
	if err := c.Heartbeat(cluster.HeartbeatRequest{ID: 1, Epoch: n1.Epoch}); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("heartbeat of a dead node = %v; want ErrFencedEpoch", err)
	}
	// Registration revives, with a new epoch.
	e1b, err := c.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "a:1"})
	if err != nil || e1b <= n1.Epoch {
		t.Fatalf("re-register = %d, %v", e1b, err)
	}
	if !alive(t, r.f, 1) {
		t.Fatal("node 1 not alive after re-registering")
	}
	if err := c.Heartbeat(cluster.HeartbeatRequest{ID: 1, Epoch: e1b}); err != nil {
		t.Fatal(err)
	}
	// A second expiry of an already fenced node proposes nothing.
	clk.advance(10 * time.Second)
	c.checkSessions()
	v := r.f.Version()
	c.checkSessions()
	if r.f.Version() != v {
		t.Fatal("checking dead nodes again changed the state")
	}
}

func TestNewLeaderGivesGraceAndDoesNotRevive(t *testing.T) {
	f := fsm.New()
	old, _, clk := newTest(t, f)
	lead(t, old)
	e1, _ := old.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "a:1"})
	_, _ = old.Register(context.Background(), cluster.RegisterRequest{ID: 2, Addr: "b:1"})
	clk.advance(7 * time.Second)
	_ = old.Heartbeat(cluster.HeartbeatRequest{ID: 1, Epoch: e1})
	old.checkSessions() // node 2 dies
	old.SetLeader(false)
	if err := old.Heartbeat(cluster.HeartbeatRequest{ID: 1, Epoch: e1}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("Heartbeat after losing leadership = %v; want ErrNotActive", err)
	}

	// A new leader much later: node 1 keeps its liveness for a full timeout.
	c, r, clk2 := newTest(t, f)
	r.idx = 100
	clk2.advance(time.Hour)
	lead(t, c)
	clk2.advance(5 * time.Second)
	c.checkSessions()
	if !alive(t, f, 1) {
		t.Fatal("node 1 expired inside the new leader's grace period")
	}
	if alive(t, f, 2) {
		t.Fatal("grace revived dead node 2")
	}
	clk2.advance(2 * time.Second)
	c.checkSessions()
	if alive(t, f, 1) {
		t.Fatal("node 1 not expired after the grace period")
	}
}

func TestLoopActivates(t *testing.T) {
	c, _, _ := newTest(t, nil)
	c.Start()
	defer c.Stop()
	c.SetLeader(true)
	testkit.WaitFor(t, 5*time.Second, "the controller goroutine to activate", c.Active)
	c.SetLeader(false)
	if c.Active() {
		t.Fatal("still active after losing leadership")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.SessionTimeout = 0
	if err := bad.Validate(); err == nil {
		t.Fatal("zero session timeout validated")
	}
	for _, d := range []time.Duration{-time.Second, time.Millisecond} {
		bad = DefaultConfig()
		bad.PreferredLeaderInterval = d
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "-preferred-leader-interval") {
			t.Fatalf("preferred leader interval %v: %v", d, err)
		}
	}
	off := DefaultConfig()
	off.PreferredLeaderInterval = 0
	if err := off.Validate(); err != nil {
		t.Fatalf("disabled preferred leader election: %v", err)
	}
	if got := DefaultConfig().interval(); got != DefaultConfig().SessionTimeout/6 {
		t.Fatalf("interval = %v; want a sixth of the session timeout", got)
	}
}
