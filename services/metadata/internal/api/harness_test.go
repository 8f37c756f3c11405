package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/services/metadata/internal/controller"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// member is one metadata member of an in-process cluster: FSM, raft node on a
// real TCP transport, controller and HTTP API on 127.0.0.1.
type member struct {
	id      string
	fsm     *fsm.FSM
	node    *raftnode.Node
	ctrl    *controller.Controller
	srv     *Server
	http    string
	raft    string
	dataDir string
	stopped bool
}

// stop shuts the member down as the fx hooks would: API, controller, raft.
func (m *member) stop(t *testing.T) {
	t.Helper()
	if m.stopped {
		return
	}
	m.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.srv.Stop(ctx); err != nil {
		t.Errorf("member %s: api stop: %v", m.id, err)
	}
	m.ctrl.Stop()
	if err := m.node.Stop(); err != nil {
		t.Errorf("member %s: raft stop: %v", m.id, err)
	}
}

type clusterOpts struct {
	sessionTimeout time.Duration
	// preferredInterval is the preferred-leader election period; zero
	// disables it, so that tests not about it see no leadership moves.
	preferredInterval time.Duration
	// producerIDBlock is the controller's producer id block size; zero
	// is the default.
	producerIDBlock int64
}

func testLogger() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startCluster starts n members that bootstrap together (one voter when n
// is 1) and stops them when the test ends. Set SLUICE_TEST_LOG=1 for logs.
func startCluster(t *testing.T, n int, o clusterOpts) []*member {
	t.Helper()
	if o.sessionTimeout == 0 {
		o.sessionTimeout = 30 * time.Second
	}
	raftLns := make([]net.Listener, n)
	httpLns := make([]net.Listener, n)
	var peers []raftnode.Peer
	for i := range n {
		raftLns[i] = listen(t)
		httpLns[i] = listen(t)
		peers = append(peers, raftnode.Peer{ID: string(rune('1' + i)), RaftAddr: raftLns[i].Addr().String(), HTTPAddr: httpLns[i].Addr().String()})
	}
	if n == 1 {
		peers = nil
	}
	log := testLogger()
	members := make([]*member, n)
	for i := range n {
		members[i] = startMember(t, string(rune('1'+i)), t.TempDir(), peers, raftLns[i], httpLns[i], o, log)
	}
	testkit.WaitFor(t, 20*time.Second, "every member ready with an active controller", func() bool {
		active := 0
		for _, m := range members {
			if m.node.Ready() != nil {
				return false
			}
			if m.ctrl.Active() {
				active++
			}
		}
		return active == 1
	})
	return members
}

// startMember starts one member on the given listeners with its state in
// dataDir (bootstrapping when there is none) and stops it when the test ends.
func startMember(t *testing.T, id, dataDir string, peers []raftnode.Peer, raftLn, httpLn net.Listener, o clusterOpts, log *slog.Logger) *member {
	t.Helper()
	cfg := raftnode.DefaultConfig()
	cfg.ID = id
	cfg.RaftAddr = raftLn.Addr().String()
	cfg.HTTPAddr = httpLn.Addr().String()
	cfg.DataDir = dataDir
	cfg.Bootstrap = true
	cfg.Peers = peers
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 150 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.LogLevel = "error"
	cfg.NoSync = true
	l := log.With("member", id)
	f := fsm.New()
	node, err := raftnode.New(cfg, f, l, raftnode.WithListener(raftLn))
	if err != nil {
		t.Fatal(err)
	}
	ccfg := controller.DefaultConfig()
	ccfg.SessionTimeout = o.sessionTimeout
	ccfg.PreferredLeaderInterval = o.preferredInterval
	ccfg.ProducerIDBlockSize = o.producerIDBlock
	ctrl, err := controller.New(ccfg, node, f, l)
	if err != nil {
		t.Fatal(err)
	}
	node.OnLeadership(ctrl.SetLeader)
	acfg := DefaultConfig()
	acfg.Addr = cfg.HTTPAddr
	srv, err := New(acfg, node, f, ctrl, l, WithListener(httpLn))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	ctrl.Start()
	srv.Start()
	m := &member{id: id, fsm: f, node: node, ctrl: ctrl, srv: srv, http: cfg.HTTPAddr, raft: cfg.RaftAddr, dataDir: cfg.DataDir}
	t.Cleanup(func() { m.stop(t) })
	return m
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// leader returns the running member whose controller is active.
func leader(ms []*member) *member {
	for _, m := range ms {
		if !m.stopped && m.node.IsLeader() && m.ctrl.Active() {
			return m
		}
	}
	return nil
}

// follower waits for a leader and returns another running member.
func follower(t *testing.T, ms []*member) *member {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "a leader", func() bool { return leader(ms) != nil })
	l := leader(ms)
	for _, m := range ms {
		if m != l && !m.stopped {
			return m
		}
	}
	t.Fatal("no follower")
	return nil
}

func addrs(ms ...*member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.http)
	}
	return out
}

func client(ms ...*member) *cluster.Client { return cluster.NewClient(addrs(ms...)) }

// registerNodes registers storage nodes 1 to n (at 127.0.0.1:9001 on).
func registerNodes(t *testing.T, c *cluster.Client, n int32) {
	t.Helper()
	for id := int32(1); id <= n; id++ {
		if _, err := c.Register(context.Background(), cluster.RegisterRequest{ID: id, Addr: fmt.Sprintf("127.0.0.1:900%d", id)}); err != nil {
			t.Fatal(err)
		}
	}
}
