package replica

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// leaderReplica opens a replica led by node 1 with followers 2 and 3.
func leaderReplica(t *testing.T, minISR string) (*Manager, *Replica) {
	t.Helper()
	m, err := NewManager(t.TempDir(), 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	tp := cluster.Topic{Name: "t", ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": minISR, "flush.policy": "replication"},
		Partitions: []cluster.Partition{{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}}}}
	if err := m.Apply(&cluster.Snapshot{Version: 1, Topics: []cluster.Topic{tp}}, true); err != nil {
		t.Fatal(err)
	}
	r, err := m.Get("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, r
}

func TestAcksAllWaitsForTheISRAndFencesDeposedLeaders(t *testing.T) {
	_, r := leaderReplica(t, "2")
	if _, err := r.CheckProduce(protocol.AcksAll); err != nil {
		t.Fatal(err)
	}
	info, err := r.Log.Append(testBatch(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Progressed()
	done := make(chan error, 1)
	go func() { done <- r.WaitHighWatermark(context.Background(), info.LastOffset+1, 1) }()
	now := time.Now()
	r.FollowerFetched(2, 1, -1, now, time.Minute)
	select {
	case err := <-done:
		t.Fatalf("acknowledged with follower 3 behind: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.FollowerFetched(3, 1, -1, now, time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("after every ISR member fetched: %v", err)
	}
	if r.HighWatermark() != 1 {
		t.Fatalf("high watermark %d", r.HighWatermark())
	}

	// A deposed leader acknowledges nothing.
	info, _ = r.Log.Append(testBatch(t), 1)
	go func() { done <- r.WaitHighWatermark(context.Background(), info.LastOffset+1, 1) }()
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 2, ISR: []int32{2, 3}}, r.State().Config)
	if err := <-done; protocol.CodeOf(err) != protocol.NotLeaderOrFollower {
		t.Fatalf("deposed leader's wait: %v", err)
	}
}

func TestISRBelowMinInsyncRefusesOrFlagsAcksAll(t *testing.T) {
	_, r := leaderReplica(t, "3")
	info, err := r.Log.Append(testBatch(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	// The ISR shrinks to {1, 3} while the produce waits.
	req := r.ShrinkIfLagging(time.Now().Add(time.Hour), time.Minute)
	if req == nil {
		t.Fatal("no shrink proposed for followers that never fetched")
	}
	r.Altered(&cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 3}}, nil)
	r.FollowerFetched(3, 1, -1, time.Now(), time.Minute)
	err = r.WaitHighWatermark(context.Background(), info.LastOffset+1, 1)
	if protocol.CodeOf(err) != protocol.NotEnoughReplicasAfterAppend {
		t.Fatalf("ack with an ISR below min.insync.replicas: %v", err)
	}
	if _, err := r.CheckProduce(protocol.AcksAll); protocol.CodeOf(err) != protocol.NotEnoughReplicas {
		t.Fatalf("produce with a small ISR: %v", err)
	}
	if _, err := r.CheckProduce(protocol.AcksLeader); err != nil {
		t.Fatalf("acks=leader needs no ISR: %v", err)
	}
}

func TestPendingExpansionHoldsTheHighWatermark(t *testing.T) {
	_, r := leaderReplica(t, "1")
	// ISR {1, 2}; follower 3 is out.
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 2}}, r.State().Config)
	for i := 0; i < 3; i++ {
		if _, err := r.Log.Append(testBatch(t), 1); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	r.FollowerFetched(2, 1, -1, now, time.Minute)
	// Follower 3 reaches the high watermark (1): the leader asks to add it.
	req := r.FollowerFetched(3, 1, -1, now, time.Minute)
	if req == nil || len(req.ISR) != 3 {
		t.Fatalf("no expansion asked: %+v", req)
	}
	// Follower 2 races ahead; until metadata answers, follower 3 holds the
	// high watermark (it may be in the committed ISR).
	r.FollowerFetched(2, 3, -1, now, time.Minute)
	if hw := r.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d moved past the joining replica", hw)
	}
	// The answer is lost: still held.
	r.Altered(nil, context.DeadlineExceeded)
	r.FollowerFetched(2, 3, -1, now, time.Minute)
	if hw := r.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d moved after an unknown outcome", hw)
	}
	// A fetch from past this leader's end (a diverged follower) counts for nothing.
	r.FollowerFetched(3, 99, -1, now, time.Minute)
	if hw := r.HighWatermark(); hw != 1 {
		t.Fatalf("a diverged fetch moved the high watermark to %d", hw)
	}
	// Metadata's later state decides: 3 is in; the high watermark follows it.
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1, 2, 3}}, r.State().Config)
	r.FollowerFetched(3, 3, -1, now, time.Minute)
	if hw := r.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d after the ISR grew", hw)
	}
}

// TestRefusedExpansionReleasesTheHighWatermark: metadata refuses to add a
// replica (it fenced the node); the change did not commit, so the high
// watermark no longer waits for that replica.
func TestRefusedExpansionReleasesTheHighWatermark(t *testing.T) {
	_, r := leaderReplica(t, "1")
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 2}}, r.State().Config)
	for i := 0; i < 3; i++ {
		if _, err := r.Log.Append(testBatch(t), 1); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	r.FollowerFetched(2, 1, -1, now, time.Minute)
	if req := r.FollowerFetched(3, 1, -1, now, time.Minute); req == nil {
		t.Fatal("no expansion asked")
	}
	r.Altered(nil, protocol.InvalidRequest.Err("node 3 cannot join the ISR: it is not alive"))
	r.FollowerFetched(2, 3, -1, now, time.Minute)
	if hw := r.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d after a refused expansion: the refused replica still holds it back", hw)
	}
}

// TestOnlyTheFetchingFollowerMayJoin: a follower that stopped fetching (its
// last state still recent) is not proposed for the ISR on another
// follower's fetch.
func TestOnlyTheFetchingFollowerMayJoin(t *testing.T) {
	_, r := leaderReplica(t, "1")
	now := time.Now()
	r.FollowerFetched(3, 0, -1, now, time.Minute) // 3 fetched, then died
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 2}}, r.State().Config)
	if req := r.FollowerFetched(2, 0, -1, now, time.Minute); req != nil {
		t.Fatalf("follower 2's fetch proposed %v: only the fetching follower may join", req.ISR)
	}
}
