// Package coordtest runs a coordinator for tests as the offsets service runs
// it: over the real FSM in a test's directory and a real single-voter Raft
// group, without the metadata service (Topics stands in for its watch). The
// group coordinator's tests and those of the coordinators built on it
// (txncoord, sharecoord) start theirs here.
//
// It does not import package coordinator, so that package's own tests can
// use it: the caller builds the coordinator (newCo) on the FSM and Raft node
// Start opens.
package coordtest

import (
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// Topics stands in for the metadata watch (the metadata service cannot run
// inside this module's tests): fixed partition counts per topic.
type Topics map[string]int32

// Partitions returns the counts; they are known from the start.
func (s Topics) Partitions() (map[string]int32, bool) { return s, true }

// Coordinator is what Start needs of the coordinator it runs
// (*coordinator.Coordinator).
type Coordinator interface {
	OnLeadership(isLeader bool)
	Start()
	Stop()
	Ready() bool
}

// Start opens the FSM in dir and a single-voter Raft group over it, builds
// the coordinator with newCo, starts them, and waits until the coordinator
// is ready. stop stops them, once (the test's cleanup calls it too); a
// second Start on the same dir finds the state the first left.
func Start[C Coordinator](t testing.TB, dir string, newCo func(f *fsm.FSM, r *raftgroup.Node, log *slog.Logger) C) (c C, f *fsm.FSM, stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := fsm.Open(filepath.Join(dir, "state.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	rc := raftgroup.DefaultConfig()
	rc.Service, rc.RaftAddr, rc.HTTPAddr, rc.DataDir, rc.Bootstrap = "offsets", "127.0.0.1:0", "127.0.0.1:1", dir, true
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond, 5*time.Millisecond
	rc.LogLevel, rc.NoSnapshotRestoreOnStart = "error", true
	// A single voter sends no Raft RPC and takes none: it listens on a
	// listener no one can dial, so a test may run it inside a synctest
	// bubble (a TCP listener's Accept would keep the bubble's clock still).
	n, err := raftgroup.New(rc, f, log, raftgroup.WithListener(newIdleListener()))
	if err != nil {
		t.Fatal(err)
	}
	c = newCo(f, n, log)
	n.OnLeadership(c.OnLeadership)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	c.Start()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			c.Stop()
			n.Stop()
			f.Close()
		})
	}
	t.Cleanup(stop)
	testkit.WaitFor(t, 10*time.Second, "the coordinator to be ready", c.Ready)
	return c, f, stop
}

// idleListener is a net.Listener no one can dial: Accept waits until Close.
type idleListener struct {
	closed chan struct{}
	once   sync.Once
}

func newIdleListener() *idleListener { return &idleListener{closed: make(chan struct{})} }

func (l *idleListener) Accept() (net.Conn, error) {
	<-l.closed
	return nil, net.ErrClosed
}

func (l *idleListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is what the single voter advertises; nothing connects to it.
func (l *idleListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
