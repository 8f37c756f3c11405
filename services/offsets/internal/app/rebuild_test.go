package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// TestStateRebuiltAfterAMachineCrash: the state file commits without fsync
// (the Raft log is the record); when the machine crashed while it had
// unsynced writes (its sidecar names another boot, the process never closed
// it), the replica sets it aside at start and raft rebuilds the state from
// its latest snapshot and the log after it, as this package wires it: every
// committed offset is there again, those before the snapshot and after.
func TestStateRebuiltAfterAMachineCrash(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skip("no boot id on this system: every commit of the state file is synced")
	}
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	run := func(commits []int64, snapshotAfter int) *fsm.FSM { return runReplica(t, dir, commits, snapshotAfter) }
	f := run([]int64{10, 20, 30, 40, 50, 60}, 4) // t-0 at 50, t-1 at 60; a snapshot after 40
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The machine crashed: the process had the file open in another boot,
	// and what it held was lost.
	if err := os.WriteFile(statePath+".boot", []byte("another-boot open\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	f = run(nil, 0)
	defer f.Close()
	offs, err := f.Offsets("g", "t")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	for _, o := range offs {
		got[o.Partition] = o.Offset
	}
	if got[0] != 50 || got[1] != 60 {
		t.Fatalf("after the rebuild the group's offsets are %v, want t-0 50 and t-1 60", got)
	}
	if _, err := os.Stat(statePath + ".untrusted"); err != nil {
		t.Fatalf("the untrusted state file was not set aside: %v", err)
	}
}

// runReplica starts a single-voter offsets replica over dir as this package
// wires it (restoring the snapshot only when the state file is behind it),
// commits offsets of group g (t-0, t-1, t-0, ...) through Raft, asking for
// a snapshot after the first snapshotAfter of them, stops it and returns
// its FSM, still open.
func runReplica(t *testing.T, dir string, commits []int64, snapshotAfter int) *fsm.FSM {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := raftgroup.DefaultConfig()
	rc.Service, rc.RaftAddr, rc.HTTPAddr, rc.DataDir, rc.Bootstrap = "offsets", "127.0.0.1:0", "127.0.0.1:1", dir, true
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond, 5*time.Millisecond
	rc.LogLevel = "error"
	f, err := fsm.Open(filepath.Join(dir, "state.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	restore, err := needsRestore(rc, f.AppliedIndex())
	if err != nil {
		t.Fatal(err)
	}
	rc.NoSnapshotRestoreOnStart = !restore
	n, err := raftgroup.New(rc, f, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the single voter to lead", n.IsLeader)
	for i, off := range commits {
		b, err := fsm.Command{Type: fsm.TypeCommit, Commit: &fsm.Commit{Group: "g", TimeMs: 1,
			Offsets: []groups.Offset{{Topic: "t", Partition: int32(i % 2), Offset: off}}}}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.ApplyLocal(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if i+1 == snapshotAfter {
			if err := n.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	return f
}
