package raftgroup

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

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

func testConfig(dir string) Config {
	c := DefaultConfig()
	c.Service = "offsets"
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

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode starts a single voter on f and waits until it leads.
func startNode(t *testing.T, cfg Config, f *memFSM, opts ...Option) *Node {
	t.Helper()
	n, err := New(cfg, f, discardLogger(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the single voter to lead", n.IsLeader)
	return n
}

// apply commits cmd on n and returns the index memFSM answered with.
func apply(t *testing.T, n *Node, cmd string) uint64 {
	t.Helper()
	resp, err := n.ApplyLocal(context.Background(), []byte(cmd))
	if err != nil {
		t.Fatalf("ApplyLocal(%q): %v", cmd, err)
	}
	idx, ok := resp.(uint64)
	if !ok {
		t.Fatalf("ApplyLocal(%q) response = %v (%T); want an index", cmd, resp, resp)
	}
	return idx
}

func TestRestartFromLogAndSnapshot(t *testing.T) {
	for _, noRestore := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSnapshotRestoreOnStart=%v", noRestore), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			n := startNode(t, cfg, newMemFSM())
			leaders := make(chan bool, 4)
			n.OnLeadership(func(b bool) { leaders <- b })
			apply(t, n, "a=1")
			if err := n.Snapshot(context.Background()); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			last := apply(t, n, "b=2") // after the snapshot: only in the log
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
			// The subscriber may also hear the leadership it gained at start
			// (registered after IsLeader turned true, before the
			// notification went out); the last word must be "ended".
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
			cfg.NoSnapshotRestoreOnStart = noRestore
			f2 := newMemFSM()
			n2 := startNode(t, cfg, f2)
			defer n2.Stop()
			testkit.WaitFor(t, 20*time.Second, "the restarted FSM to replay the log", func() bool { _, applied := f2.get("b"); return applied >= last })
			if b, _ := f2.get("b"); b != "2" {
				t.Fatalf("after restart b = %q; want 2 from the log", b)
			}
			// Without the restore the FSM would have kept its own state: raft
			// replays only the entries after the snapshot.
			wantA, wantRestores := "1", 1
			if noRestore {
				wantA, wantRestores = "", 0
			}
			if a, _ := f2.get("a"); a != wantA || f2.restoreCount() != wantRestores {
				t.Fatalf("after restart a = %q with %d restores; want %q with %d", a, f2.restoreCount(), wantA, wantRestores)
			}
			if err := n2.Linearize(context.Background()); err != nil {
				t.Fatalf("linearize on the leader: %v", err)
			}
		})
	}
}

func TestApplyLocalAndReadyOnTheLeader(t *testing.T) {
	cfg := testConfig(t.TempDir())
	f := newMemFSM()
	errNoInit := errors.New("init not applied yet")
	n := startNode(t, cfg, f, WithReady(func() error {
		if v, _ := f.get("init"); v == "" {
			return errNoInit
		}
		return nil
	}))
	defer n.Stop()
	if err := n.Ready(); !errors.Is(err, errNoInit) {
		t.Fatalf("Ready before the hook's condition = %v; want the hook's error", err)
	}
	apply(t, n, "init=yes")
	if err := n.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	// A command the FSM rejects is a response, not a commit failure.
	if resp, err := n.ApplyLocal(context.Background(), []byte("garbage")); err != nil || resp != errMalformed {
		t.Fatalf("ApplyLocal(garbage) = %v, %v; want errMalformed as the response", resp, err)
	}
	if id, addr := n.Leader(); id != cfg.ID || addr != cfg.HTTPAddr {
		t.Fatalf("Leader = %q, %q; want %q, %q", id, addr, cfg.ID, cfg.HTTPAddr)
	}
	_, _, _, err := n.Forward(context.Background(), "GET", "/", nil)
	if !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "this offsets member is not the raft leader") {
		t.Fatalf("Forward on the leader = %v; want ErrNotLeader naming the service", err)
	}
	if err := n.Barrier(context.Background()); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
}

func TestNotStartedAndNoLeaderErrors(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Bootstrap = false // never elects: no configuration
	n, err := New(cfg, newMemFSM(), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.ApplyLocal(ctx, []byte("k=v")); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("ApplyLocal before Start = %v; want ErrNotStarted", err)
	}
	if _, _, _, err := n.Forward(ctx, "GET", "/", nil); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Forward before Start = %v; want ErrNotStarted", err)
	}
	if err := n.Ready(); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Ready before Start = %v; want ErrNotStarted", err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if _, err := n.ApplyLocal(ctx, []byte("k=v")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ApplyLocal on a follower = %v; want ErrNotLeader", err)
	}
	if _, _, _, err := n.Forward(ctx, "GET", "/", nil); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Forward without a leader = %v; want ErrNoLeader", err)
	}
	if err := n.Ready(); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Ready without a leader = %v; want ErrNoLeader", err)
	}
	if id, addr := n.Leader(); id != "" || addr != "" {
		t.Fatalf("Leader = %q, %q; want none", id, addr)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := n.Linearize(tctx); !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("Linearize on a non-leader = %v", err)
	}
}

func TestMetrics(t *testing.T) {
	n := startNode(t, testConfig(t.TempDir()), newMemFSM())
	defer n.Stop()
	apply(t, n, "k=v")
	reg := prometheus.NewRegistry()
	if err := n.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP sluice_offsets_raft_is_leader 1 when this member is the Raft leader.
# TYPE sluice_offsets_raft_is_leader gauge
sluice_offsets_raft_is_leader 1
# HELP sluice_offsets_raft_state Raft state of this member: 0 follower, 1 candidate, 2 leader, 3 shutdown.
# TYPE sluice_offsets_raft_state gauge
sluice_offsets_raft_state 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_offsets_raft_is_leader", "sluice_offsets_raft_state"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"term", "commit_index", "applied_index"} {
		if c, err := testutil.GatherAndCount(reg, "sluice_offsets_raft_"+name); err != nil || c != 1 {
			t.Errorf("sluice_offsets_raft_%s: %d series, %v; want 1", name, c, err)
		}
	}
	if c, _ := testutil.GatherAndCount(reg); c != 5+len(walCounters) {
		t.Fatalf("%d metrics; want %d", c, 5+len(walCounters))
	}
	// The log counts its appends: the entry above, and those raft wrote
	// itself (its configuration, a leader's first no-op).
	appends, _ := testutil.GatherAndCount(reg, "sluice_offsets_raft_log_appends_total")
	entries := testutil.ToFloat64(n.logMetrics.counters["log_entries_written"])
	if appends != 1 || entries < 2 || testutil.ToFloat64(n.logMetrics.counters["log_appends"]) < 2 {
		t.Fatalf("log appends: %d series, %v entries written, %v appends", appends, entries, testutil.ToFloat64(n.logMetrics.counters["log_appends"]))
	}
}

// TestApplyErrTellsALostLeadershipFromNoLeadership: a proposal the leader
// dispatched before it stepped down may still commit: ErrLeadershipLost, an
// unknown outcome like ErrTimeout and never ErrNotLeader, whose proposals
// were not made (a service relays those to the new leader, and must not
// relay these, which would propose the command twice).
func TestApplyErrTellsALostLeadershipFromNoLeadership(t *testing.T) {
	n := &Node{cfg: Config{Service: "test"}}
	lost := applyErr(n.mapRaftErr(raft.ErrLeadershipLost))
	if !errors.Is(lost, ErrLeadershipLost) || !errors.Is(lost, ErrTimeout) || errors.Is(lost, ErrNotLeader) {
		t.Fatalf("a lost leadership: %v", lost)
	}
	never := applyErr(n.mapRaftErr(raft.ErrNotLeader))
	if !errors.Is(never, ErrNotLeader) || errors.Is(never, ErrTimeout) {
		t.Fatalf("no leadership: %v", never)
	}
	if applyErr(nil) != nil {
		t.Fatal("no error became one")
	}
}
