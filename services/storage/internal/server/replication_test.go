package server

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// twoNodeSnapshot places topic t (one partition, replicas 1 and 2) with the
// given leader and epoch; addrs are the nodes' protocol addresses.
func twoNodeSnapshot(version uint64, leader, epoch int32, addrs map[int32]string) *cluster.Snapshot {
	t := cluster.Topic{Name: "t", ReplicationFactor: 2, Config: map[string]string{"flush.policy": "replication"},
		Partitions: []cluster.Partition{{ID: 0, Replicas: []int32{1, 2}, Leader: leader, LeaderEpoch: epoch, ISR: []int32{1, 2}}}}
	var nodes []cluster.Node
	for id, a := range addrs {
		nodes = append(nodes, cluster.Node{ID: id, Addr: a, Alive: true})
	}
	return &cluster.Snapshot{Version: version, Nodes: nodes, Topics: []cluster.Topic{t}}
}

// epochBatch is a batch appended at a leader epoch.
type epochBatch struct {
	epoch int32
	b     []byte
}

// divergence builds two logs that share a prefix and then diverge: node 1
// (the leader, at leaderEpoch) holds lead, node 2 holds fol. Node 2 then
// follows node 1, and the test waits until it holds exactly the leader's
// log, returning node 2's replica.
func divergence(t *testing.T, lead, fol []epochBatch, leaderEpoch int32) *replica.Replica {
	t.Helper()
	s1, m1 := startServer(t, t.TempDir(), snapshot("t", 1, map[string]string{"flush.policy": "replication"}), DefaultConfig())
	leader, _ := m1.Get("t", 0)
	m2 := startFollowerManager(t)
	addrs := map[int32]string{1: s1.Addr(), 2: "127.0.0.1:1"}
	// Node 2 leads until it is told to follow.
	if err := m2.Apply(twoNodeSnapshot(1, 2, 0, addrs), true); err != nil {
		t.Fatal(err)
	}
	follower, _ := m2.Get("t", 0)
	for _, e := range fol {
		if _, err := follower.Log.Append(append([]byte(nil), e.b...), e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range lead {
		if _, err := leader.Log.Append(append([]byte(nil), e.b...), e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	if err := m1.Apply(twoNodeSnapshot(2, 1, leaderEpoch, addrs), true); err != nil {
		t.Fatal(err)
	}
	appendVisible(t, leader, batch(t, 3, "current-epoch", 10, 9))
	if err := m2.Apply(twoNodeSnapshot(3, 1, leaderEpoch, addrs), true); err != nil {
		t.Fatal(err)
	}
	want, err := readLog(leader)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		got, err := readLog(follower)
		if err != nil || !bytes.Equal(got, want) {
			_, vals := values(t, got, 0)
			_, wantVals := values(t, want, 0)
			return fmt.Errorf("the follower has not converged (%v): values %q, the leader's %q", err, vals, wantVals)
		}
		return nil
	})
	return follower
}

// TestDivergentFollowerTruncatesToTheLeader builds the log divergence two
// failovers in a row leave behind: both replicas share epoch 0, the follower
// then took writes as leader of epoch 1 that were never replicated, and the
// other replica led epoch 2. When the follower joins the epoch-2 leader it
// must drop its epoch-1 suffix (found with OffsetForLeaderEpoch, not the high
// watermark) and end with exactly the leader's log.
func TestDivergentFollowerTruncatesToTheLeader(t *testing.T) {
	shared := []epochBatch{{0, batch(t, 3, "shared-a", 10, 1)}, {0, batch(t, 2, "shared-b", 10, 2)}}
	fol := append(slices.Clone(shared), epochBatch{1, batch(t, 4, "lost-epoch-1", 10, 3)})
	lead := append(slices.Clone(shared), epochBatch{2, batch(t, 2, "epoch-2", 10, 4)})
	f := divergence(t, lead, fol, 2)
	if e := f.Log.Epochs(); len(e) != 2 || e[1].Epoch != 2 || e[1].StartOffset != 5 {
		t.Fatalf("follower's epoch cache %+v, want epoch 2 from offset 5", e)
	}
}

// TestFollowerMissingTheLeadersEpochTruncatesAgain: the follower's latest
// epoch is 3, the leader's largest epoch at or below it is 2, and the
// follower never had epoch 2 (its epochs are 0, 1 and 3). Its epoch-1
// records sit where the leader has epoch-2 records, so cutting at its own end
// of epoch 1 is not enough: as KIP-279 has it, it asks again for epoch 1,
// and cuts where the two logs last agree, at the end of epoch 0.
func TestFollowerMissingTheLeadersEpochTruncatesAgain(t *testing.T) {
	shared := []epochBatch{{0, batch(t, 5, "shared", 10, 1)}}
	fol := append(slices.Clone(shared), epochBatch{1, batch(t, 3, "follower-epoch-1", 10, 2)}, epochBatch{3, batch(t, 2, "follower-epoch-3", 10, 3)})
	// A batch boundary at 8, where the follower's epoch 3 starts: a fetch
	// from there appends cleanly, so only the truncation can find the
	// divergence below it.
	lead := append(slices.Clone(shared), epochBatch{2, batch(t, 3, "leader-epoch-2a", 10, 4)}, epochBatch{2, batch(t, 4, "leader-epoch-2b", 10, 5)})
	f := divergence(t, lead, fol, 4)
	if e := f.Log.Epochs(); len(e) != 3 || e[1].Epoch != 2 || e[1].StartOffset != 5 || e[2].Epoch != 4 || e[2].StartOffset != 12 {
		t.Fatalf("follower's epoch cache %+v, want epochs 0, 2 from 5 and 4 from 12", e)
	}
}

// readLog reads a replica's whole log straight from its files.
func readLog(r *replica.Replica) ([]byte, error) {
	var out []byte
	for off := r.Log.StartOffset(); off < r.Log.EndOffset(); {
		sl, err := r.Log.Read(off, 1<<20, r.Log.EndOffset())
		if err != nil {
			return out, err
		}
		b, err := sl.ReadAll()
		sl.Release()
		if err != nil || len(b) == 0 {
			return out, err
		}
		out = append(out, b...)
		off = nextOffset(b, off)
	}
	return out, nil
}

// TestFollowerBehindTheLeadersLogStartRestartsThere gives a follower an empty
// log while the leader's retention already deleted its first segments: the
// follower cannot fetch from offset 0, so it restarts its log at the leader's
// start offset and then copies the rest.
func TestFollowerBehindTheLeadersLogStartRestartsThere(t *testing.T) {
	s1, m1 := startServer(t, t.TempDir(), snapshot("t", 1, map[string]string{"flush.policy": "replication", "segment.bytes": "1024"}), DefaultConfig())
	lead, _ := m1.Get("t", 0)
	for i := 0; i < 12; i++ {
		appendVisible(t, lead, batch(t, 2, "r"+itoa(i), 100, int64(i)))
	}
	cfg := lead.Log.Config()
	cfg.RetentionBytes = 1500
	if err := lead.Log.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := lead.Log.EnforceRetention(time.Now()); err != nil || n == 0 || lead.Log.StartOffset() == 0 {
		t.Fatalf("setup: retention deleted %d (%v), start %d", n, err, lead.Log.StartOffset())
	}
	m2 := startFollowerManager(t)
	addrs := map[int32]string{1: s1.Addr(), 2: "127.0.0.1:1"}
	if err := m1.Apply(twoNodeSnapshot(2, 1, 0, addrs), true); err != nil {
		t.Fatal(err)
	}
	if err := m2.Apply(twoNodeSnapshot(2, 1, 0, addrs), true); err != nil {
		t.Fatal(err)
	}
	fol, _ := m2.Get("t", 0)
	want, err := readLog(lead)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		if got, err := readLog(fol); err != nil || !bytes.Equal(got, want) || fol.Log.StartOffset() != lead.Log.StartOffset() {
			return fmt.Errorf("follower [%d, %d) does not match the leader [%d, %d) (%v)", fol.Log.StartOffset(), fol.Log.EndOffset(), lead.Log.StartOffset(), lead.Log.EndOffset(), err)
		}
		return nil
	})
}

// startFollowerManager returns node 2's replica manager with replication on.
func startFollowerManager(t *testing.T) *replica.Manager {
	t.Helper()
	m, err := replica.NewManager(t.TempDir(), 2, quiet)
	if err != nil {
		t.Fatal(err)
	}
	pool := storageclient.NewPool("node-2")
	m.EnableReplication(replica.Replication{Pool: pool, MaxLag: time.Minute})
	t.Cleanup(func() { _ = m.Close(); _ = pool.Close() })
	return m
}
