package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
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

// TestDivergentFollowerTruncatesToTheLeader builds the log divergence two
// failovers in a row leave behind: both replicas share epoch 0, the follower
// then took writes as leader of epoch 1 that were never replicated, and the
// other replica led epoch 2. When the follower joins the epoch-2 leader it
// must drop its epoch-1 suffix (found with OffsetForLeaderEpoch, not the high
// watermark) and end with exactly the leader's log.
func TestDivergentFollowerTruncatesToTheLeader(t *testing.T) {
	// Node 1: the epoch-2 leader.
	s1, m1 := startServer(t, t.TempDir(), snapshot("t", 1, map[string]string{"flush.policy": "replication"}), DefaultConfig())
	lead, _ := m1.Get("t", 0)
	// Node 2: its own manager, replicating once told to follow node 1.
	m2 := startFollowerManager(t)
	addrs := map[int32]string{1: s1.Addr(), 2: "127.0.0.1:1"}
	// Node 2 starts as leader of epoch 0, then of epoch 1.
	if err := m2.Apply(twoNodeSnapshot(1, 2, 0, addrs), true); err != nil {
		t.Fatal(err)
	}
	fol, _ := m2.Get("t", 0)

	shared := [][]byte{batch(t, 3, "shared-a", 10, 1), batch(t, 2, "shared-b", 10, 2)}
	for _, b := range shared {
		if _, err := lead.Log.Append(append([]byte(nil), b...), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := fol.Log.Append(append([]byte(nil), b...), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Node 2 alone, epoch 1: records no one else has.
	if _, err := fol.Log.Append(batch(t, 4, "lost-epoch-1", 10, 3), 1); err != nil {
		t.Fatal(err)
	}
	// Node 1, epoch 2: different records at the same offsets.
	if err := m1.Apply(twoNodeSnapshot(2, 1, 2, addrs), true); err != nil {
		t.Fatal(err)
	}
	appendVisible(t, lead, batch(t, 2, "epoch-2", 10, 4))
	appendVisible(t, lead, batch(t, 3, "epoch-2-more", 10, 5))

	// Node 2 follows node 1 at epoch 2.
	if err := m2.Apply(twoNodeSnapshot(3, 1, 2, addrs), true); err != nil {
		t.Fatal(err)
	}
	want, err := readLog(lead)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := readLog(fol)
		if err == nil && bytes.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			_, vals := values(t, got, 0)
			t.Fatalf("follower never converged: %d bytes vs the leader's %d; follower values %q", len(got), len(want), vals)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e := fol.Log.Epochs(); len(e) != 2 || e[1].Epoch != 2 || e[1].StartOffset != 5 {
		t.Fatalf("follower's epoch cache %+v, want epoch 2 from offset 5", e)
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := readLog(fol)
		if err == nil && bytes.Equal(got, want) && fol.Log.StartOffset() == lead.Log.StartOffset() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower [%d, %d) never matched the leader [%d, %d)", fol.Log.StartOffset(), fol.Log.EndOffset(), lead.Log.StartOffset(), lead.Log.EndOffset())
		}
		time.Sleep(20 * time.Millisecond)
	}
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
