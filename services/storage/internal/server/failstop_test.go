package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/log/faultfs"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// TestFailedLeaderLogFailsStop: node 1 leads t-0 (fsync policy, follower
// node 2) when a segment fsync fails. The producer waiting for that append
// is answered KAFKA_STORAGE_ERROR, and so is every later append; nothing
// after the failure is acknowledged (the high watermark stays where it was);
// node 1 asks metadata to resign. Once node 2 leads, node 1 restarts on the
// healthy disk, recovers its log and catches up from node 2.
func TestFailedLeaderLogFailsStop(t *testing.T) {
	m2 := startFollowerManager(t)
	s2 := serve(t, m2)

	dir1 := t.TempDir()
	pool1 := storageclient.NewPool("node-1")
	t.Cleanup(func() { _ = pool1.Close() })
	resigned := make(chan cluster.ResignRequest, 100)
	ffs := faultfs.New()
	m1, err := replica.NewManager(dir1, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m1.Close() })
	m1.UseFileSystem(ffs)
	m1.EnableReplication(replica.Replication{Pool: pool1, MaxLag: time.Minute,
		Resign: func(_ context.Context, req cluster.ResignRequest) (*cluster.Partition, error) {
			resigned <- req
			return &cluster.Partition{}, nil
		}})
	s1 := serve(t, m1)

	addrs := map[int32]string{1: s1.Addr(), 2: s2.Addr()}
	place := func(version uint64, leader, epoch int32, isr ...int32) *cluster.Snapshot {
		snap := twoNodeSnapshot(version, leader, epoch, addrs)
		snap.Topics[0].Config = nil // flush.policy=fsync: acks=all waits for the fsyncs
		snap.Topics[0].Partitions[0].ISR = isr
		return snap
	}
	for _, m := range []*replica.Manager{m1, m2} {
		if err := m.Apply(place(1, 1, 1, 1, 2), true); err != nil {
			t.Fatal(err)
		}
	}
	c1 := dial(t, s1.Addr())
	for i := range 3 {
		if _, err := produce(t, c1, "t", 0, protocol.AcksAll, batch(t, 2, "before-"+itoa(i), 10, int64(i))); err != nil {
			t.Fatalf("produce before the failure: %v", err)
		}
	}
	r1, _ := m1.Get("t", 0)
	acked := r1.Log.EndOffset()
	if hw := r1.HighWatermark(); hw != acked {
		t.Fatalf("high watermark %d after acks=all produces up to %d", hw, acked)
	}

	ffs.Add(faultfs.Rule{Op: faultfs.Sync, Name: "*.log"})
	_, err = produce(t, c1, "t", 0, protocol.AcksAll, batch(t, 2, "lost", 10, 10))
	if c := code(err); c != protocol.StorageError || c.Kafka(protocol.DataAnswer) != int16(protocol.StorageError) {
		t.Fatalf("produce meeting the failed fsync: %v (Kafka code %d), want KAFKA_STORAGE_ERROR", err, c.Kafka(protocol.DataAnswer))
	}
	if _, err := produce(t, c1, "t", 0, protocol.AcksLeader, batch(t, 2, "after", 10, 11)); code(err) != protocol.StorageError {
		t.Fatalf("produce after the failure: %v, want KAFKA_STORAGE_ERROR", err)
	}
	select {
	case req := <-resigned:
		if req.Topic != "t" || req.Partition != 0 || req.LeaderID != 1 || req.LeaderEpoch != 1 {
			t.Fatalf("resign request %+v, want t-0 from node 1 at leader epoch 1", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node 1 never asked metadata to resign t-0")
	}
	if hw, flushed := r1.HighWatermark(), r1.Log.FlushedOffset(); hw > acked || flushed > acked {
		t.Fatalf("after the failure: high watermark %d, flushed %d; nothing past %d may be acknowledged", hw, flushed, acked)
	}

	// Metadata moves t-0 to node 2, without node 1 in the ISR.
	for _, m := range []*replica.Manager{m1, m2} {
		if err := m.Apply(place(2, 2, 2, 2), true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := produce(t, c1, "t", 0, protocol.AcksAll, batch(t, 2, "stale", 10, 12)); code(err) != protocol.NotLeaderOrFollower {
		t.Fatalf("produce to the old leader: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	c2 := dial(t, s2.Addr())
	for i := range 3 {
		if _, err := produce(t, c2, "t", 0, protocol.AcksAll, batch(t, 2, "new-leader-"+itoa(i), 10, int64(20+i))); err != nil {
			t.Fatalf("produce to the new leader: %v", err)
		}
	}

	// Node 1 restarts on its healthy disk: the log is recovered from what
	// the disk holds and fetched again from node 2.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m1.Close(); !errors.Is(err, seglog.ErrFailed) {
		t.Fatalf("closing node 1: %v, want its failed log's ErrFailed", err)
	}
	m1, err = replica.NewManager(dir1, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m1.Close() })
	m1.EnableReplication(replica.Replication{Pool: pool1, MaxLag: time.Minute})
	if err := m1.Apply(place(2, 2, 2, 2), true); err != nil {
		t.Fatal(err)
	}
	r1, _ = m1.Get("t", 0)
	r2, _ := m2.Get("t", 0)
	want, err := readLog(r2)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		got, err := readLog(r1)
		if err == nil && bytes.Equal(got, want) {
			return nil
		}
		_, vals := values(t, got, 0)
		_, wantVals := values(t, want, 0)
		return fmt.Errorf("restarted node 1 never caught up: values %q, the leader's %q (%v)", vals, wantVals, err)
	})
	if end := r1.Log.EndOffset(); end < acked {
		t.Fatalf("restarted node 1 holds %d records, fewer than the %d acknowledged", end, acked)
	}
}
