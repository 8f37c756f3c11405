package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

func testConfig(dir string) Config {
	c := DefaultConfig()
	c.RaftAddr = "127.0.0.1:0"
	c.HTTPAddr = "127.0.0.1:1"
	c.DataDir = dir
	c.Bootstrap = true
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.LogLevel = "error"
	return c
}

func startNode(t *testing.T, cfg Config) (*Node, *fsm.FSM) {
	t.Helper()
	f := fsm.New()
	n, err := New(cfg, f, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the single voter to lead", n.IsLeader)
	return n, f
}

func register(t *testing.T, n *Node, id int32) *fsm.Result {
	t.Helper()
	res, err := n.Apply(context.Background(), fsm.Command{Type: fsm.TypeRegisterNode, RegisterNode: &fsm.RegisterNode{ID: id, Addr: "h:1"}})
	if err != nil || res.Err != nil {
		t.Fatalf("apply = %+v, %v", res, err)
	}
	return res
}

func allocIDs(t *testing.T, n *Node, count int64) *fsm.Result {
	t.Helper()
	res, err := n.Apply(context.Background(), fsm.Command{Type: fsm.TypeAllocProducerIDs, AllocProducerIDs: &fsm.AllocProducerIDs{Count: count}})
	if err != nil || res.Err != nil {
		t.Fatalf("apply = %+v, %v", res, err)
	}
	return res
}

func TestRestartFromLogAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	n, f := startNode(t, cfg)
	leaders := make(chan bool, 4)
	n.OnLeadership(func(b bool) { leaders <- b })
	r1 := register(t, n, 1)
	allocIDs(t, n, 10)
	if err := n.Snapshot(context.Background()); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	allocIDs(t, n, 5)       // after the snapshot: only in the log
	r2 := register(t, n, 2) // likewise
	if f.Version() != r2.Index {
		t.Fatalf("version = %d; want %d", f.Version(), r2.Index)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// The subscriber may also hear the leadership gained at start (it was
	// registered after IsLeader turned true); the last word must be "ended".
	var heard []bool
	for drained := false; !drained; {
		select {
		case b := <-leaders:
			heard = append(heard, b)
		default:
			drained = true
		}
	}
	if len(heard) == 0 || heard[len(heard)-1] {
		t.Fatalf("subscribers heard %v: want leadership to end at Stop", heard)
	}
	if snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*")); len(snaps) == 0 {
		t.Fatal("no snapshot on disk")
	}

	cfg.Bootstrap = false // existing state is enough
	n2, f2 := startNode(t, cfg)
	defer n2.Stop()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("the restarted FSM at version %d", r2.Index), func() bool { return f2.Version() >= r2.Index })
	for id, r := range map[int32]*fsm.Result{1: r1, 2: r2} {
		if node, ok := f2.Node(id); !ok || node.Epoch != int64(r.Index) {
			t.Fatalf("after restart node %d = %+v, %v; want epoch %d", id, node, ok, r.Index)
		}
	}
	if next := f2.NextProducerID(); next != fsm.FirstProducerID+15 {
		t.Fatalf("after restart next producer id = %d; want %d", next, fsm.FirstProducerID+15)
	}
	if err := n2.Linearize(context.Background()); err != nil {
		t.Fatalf("linearize on the leader: %v", err)
	}
}

func TestNotLeaderAndForwardErrors(t *testing.T) {
	f := fsm.New()
	cfg := testConfig(t.TempDir())
	cfg.Bootstrap = false // never elects: no configuration
	n, err := New(cfg, f, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(context.Background(), fsm.Command{Type: fsm.TypeDeleteTopic, DeleteTopic: &fsm.DeleteTopic{Name: "x"}}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Apply before Start = %v; want ErrNotStarted", err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if _, err := n.Apply(context.Background(), fsm.Command{Type: fsm.TypeDeleteTopic, DeleteTopic: &fsm.DeleteTopic{Name: "x"}}); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Apply without a leader = %v; want ErrNoLeader", err)
	}
	if err := n.Ready(); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Ready without a leader = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.Linearize(ctx); !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("Linearize on a non-leader = %v", err)
	}
	if _, err := n.Apply(context.Background(), fsm.Command{Type: "bogus"}); !errors.Is(err, fsm.ErrMalformedCommand) {
		t.Fatalf("Apply of a malformed command = %v", err)
	}
}

func TestMetrics(t *testing.T) {
	n, _ := startNode(t, testConfig(t.TempDir()))
	defer n.Stop()
	register(t, n, 1)
	reg := prometheus.NewRegistry()
	if err := n.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP sluice_metadata_raft_is_leader 1 when this member is the Raft leader.
# TYPE sluice_metadata_raft_is_leader gauge
sluice_metadata_raft_is_leader 1
# HELP sluice_metadata_storage_nodes Number of registered storage nodes.
# TYPE sluice_metadata_storage_nodes gauge
sluice_metadata_storage_nodes 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_metadata_raft_is_leader", "sluice_metadata_storage_nodes"); err != nil {
		t.Fatal(err)
	}
	// 5 raft gauges, 6 Raft log counters, the FSM's 3 gauges.
	if c, _ := testutil.GatherAndCount(reg); c != 14 {
		t.Fatalf("%d metrics; want 14", c)
	}
}

// TestReadyWaitsForTheClusterID checks the metadata readiness check added on
// top of raftgroup's leader check.
func TestReadyWaitsForTheClusterID(t *testing.T) {
	n, _ := startNode(t, testConfig(t.TempDir()))
	defer n.Stop()
	if err := n.Ready(); !errors.Is(err, errStateNotApplied) {
		t.Fatalf("Ready before InitCluster = %v; want errStateNotApplied", err)
	}
	if _, err := n.Propose(context.Background(), fsm.Command{Type: fsm.TypeInitCluster, InitCluster: &fsm.InitCluster{ClusterID: "c1"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(); err != nil {
		t.Fatalf("Ready after InitCluster = %v", err)
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil || c.Service != Service {
		t.Fatalf("DefaultConfig = %+v: %v", c, err)
	}
}
