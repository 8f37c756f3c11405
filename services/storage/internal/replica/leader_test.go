package replica

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// leaderReplica opens a replica led by node 1 with followers 2 and 3, with
// the replication settings given, if any.
func leaderReplica(t *testing.T, minISR string, repl ...Replication) (*Manager, *Replica) {
	t.Helper()
	m, err := NewManager(t.TempDir(), 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for _, c := range repl {
		m.EnableReplication(c)
	}
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
	r.Altered(req, &cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 3}}, nil)
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
	// Follower 3 asks to join at 1 and follower 2 races ahead to 3: until
	// metadata answers, follower 3 holds the high watermark (it may be in the
	// committed ISR).
	r, req := expansionAsked(t)
	now := time.Now()
	if hw := r.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d moved past the joining replica", hw)
	}
	// The answer is lost: still held, and the change is asked again.
	if !r.Altered(req, nil, context.DeadlineExceeded) {
		t.Fatal("a lost answer did not ask for the change again")
	}
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
	r, req := expansionAsked(t)
	if r.Altered(req, nil, protocol.InvalidRequest.Err("node 3 cannot join the ISR: it is not alive")) {
		t.Fatal("a refusal for good asked for the change again")
	}
	r.FollowerFetched(2, 3, -1, time.Now(), time.Minute)
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

// expansionAsked sets up leader 1 with ISR {1, 2} and three records: follower
// 3 asked to join at offset 1 (the request is returned), then follower 2
// fetched up to 3.
func expansionAsked(t *testing.T) (*Replica, *cluster.AlterPartitionRequest) {
	t.Helper()
	_, r := leaderReplica(t, "1")
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 2}}, r.State().Config)
	for i := 0; i < 3; i++ {
		if _, err := r.Log.Append(testBatch(t), 1); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	r.FollowerFetched(2, 1, -1, now, time.Minute)
	req := r.FollowerFetched(3, 1, -1, now, time.Minute)
	if req == nil || len(req.ISR) != 3 {
		t.Fatalf("no expansion asked: %+v", req)
	}
	r.FollowerFetched(2, 3, -1, now, time.Minute)
	return r, req
}

// TestStaleEpochRefusalKeepsTheExpansion: a retry of an expansion whose first
// attempt committed (its answer lost) is refused for a stale partition epoch.
// That refusal says nothing about the first attempt, so follower 3 still holds
// the high watermark until a snapshot decides.
func TestStaleEpochRefusalKeepsTheExpansion(t *testing.T) {
	for _, code := range []protocol.Code{protocol.InvalidUpdateVersion, protocol.FencedLeaderEpoch, protocol.StaleBrokerEpoch, protocol.NotController} {
		t.Run(code.String(), func(t *testing.T) {
			r, req := expansionAsked(t)
			if !r.Altered(req, nil, code.Err("partition epoch moved")) {
				t.Fatal("an ambiguous refusal did not ask for the change again")
			}
			if hw := r.HighWatermark(); hw != 1 {
				t.Fatalf("high watermark %d moved past follower 3, which may be in the committed ISR", hw)
			}
			if again := r.FollowerFetched(3, 1, -1, time.Now(), time.Minute); again != nil {
				t.Fatalf("a second change %v was asked while the first is undecided", again.ISR)
			}
			// The snapshot with the committed expansion decides.
			r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1, 2, 3}}, r.State().Config)
			if r.Altered(req, nil, code.Err("late")) {
				t.Fatal("an answer to a superseded request asked for it again")
			}
			if isr := r.State().ISR; len(isr) != 3 {
				t.Fatalf("ISR %v after the snapshot", isr)
			}
			if hw := r.HighWatermark(); hw != 1 {
				t.Fatalf("high watermark %d with follower 3 in the ISR at 1", hw)
			}
		})
	}
}

// TestSupersededAnswerChangesNothing: a late refusal of an earlier request
// must not release the expansion a later request asked for.
func TestSupersededAnswerChangesNothing(t *testing.T) {
	r, first := expansionAsked(t)
	// Metadata moved on without the first request (its snapshot supersedes it).
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1, 2}}, r.State().Config)
	second := r.FollowerFetched(3, 3, -1, time.Now(), time.Minute)
	if second == nil || second.PartitionEpoch != 2 {
		t.Fatalf("no second expansion asked at partition epoch 2: %+v", second)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Log.Append(testBatch(t), 1); err != nil {
			t.Fatal(err)
		}
	}
	if r.Altered(first, nil, protocol.InvalidRequest.Err("node 3 cannot join the ISR: it is not alive")) {
		t.Fatal("a superseded request was asked again")
	}
	r.FollowerFetched(2, 5, -1, time.Now(), time.Minute)
	if hw := r.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d: a late answer to the first request released the second expansion", hw)
	}
	if r.Altered(second, &cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, ISR: []int32{1, 2, 3}}, nil) {
		t.Fatal("a committed change was asked again")
	}
	if isr := r.State().ISR; len(isr) != 3 {
		t.Fatalf("ISR %v after the second expansion committed", isr)
	}
}

// TestFetcherOfAnOldRoleChangesNothing: once the replica leads, the fetcher
// it had as a follower may neither change its log nor read the offsets it
// would report to the old leader; a role change waits for a change to the
// log the fetcher is making.
func TestFetcherOfAnOldRoleChangesNothing(t *testing.T) {
	_, r := leaderReplica(t, "1")
	cfg := r.State().Config
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, ISR: []int32{1, 2, 3}}, cfg)
	f := &fetcher{r: r, epoch: 2}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- f.asFollower(func() error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	promoted := make(chan struct{})
	go func() {
		r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3, ISR: []int32{1, 2, 3}}, cfg)
		close(promoted)
	}()
	select {
	case <-promoted:
		t.Fatal("the role changed while the fetcher was changing the log")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("fetcher of the current role: %v", err)
	}
	<-promoted
	ran := false
	if err := f.asFollower(func() error { ran = true; return nil }); !errors.Is(err, errStaleRole) || ran {
		t.Fatalf("fetcher of epoch 2 on the leader of epoch 3: ran %v, err %v", ran, err)
	}
	// Nor does a leader take a high watermark from a fetch answer.
	if _, err := r.Log.Append(testBatch(t), 3); err != nil {
		t.Fatal(err)
	}
	before := r.HighWatermark()
	r.SetFollowerHighWatermark(1)
	if hw := r.HighWatermark(); hw != before {
		t.Fatalf("leader's high watermark moved from %d to %d on a follower's report", before, hw)
	}
}

// TestDamagedLeaderFencesOnlyOnceMetadataAcceptsItsResignation: a damaged
// leader that metadata keeps (no other in-sync replica) goes on taking
// appends; one whose resignation was accepted refuses them at once.
func TestDamagedLeaderFencesOnlyOnceMetadataAcceptsItsResignation(t *testing.T) {
	refuse := Replication{Resign: func(context.Context, cluster.ResignRequest) (*cluster.Partition, error) {
		return nil, protocol.LeaderNotAvailable.Err("no other in-sync replica")
	}}
	m, r := leaderReplica(t, "1", refuse)
	if m.resign(context.Background(), r) {
		t.Fatal("resign reported success while metadata kept the node leader")
	}
	if _, err := r.Log.Append(testBatch(t), 1); err != nil {
		t.Fatalf("append on a leader that could not resign: %v", err)
	}

	accept := Replication{Resign: func(context.Context, cluster.ResignRequest) (*cluster.Partition, error) {
		return &cluster.Partition{}, nil
	}}
	m, r = leaderReplica(t, "1", accept)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	m.resign(ctx, r) // no snapshot makes it a follower here: it waits until ctx ends
	if _, err := r.Log.Append(testBatch(t), 1); !errors.Is(err, seglog.ErrStaleEpoch) {
		t.Fatalf("append after metadata accepted the resignation: %v, want ErrStaleEpoch", err)
	}
}

// TestUndecidedISRChangeEndsWithTheReplica: an ISR change metadata keeps
// refusing for a stale epoch is asked again only while the replica is on this
// node; once its topic is deleted or created again, no snapshot will decide
// it, and its retries end instead of running until the node stops.
func TestUndecidedISRChangeEndsWithTheReplica(t *testing.T) {
	for _, tc := range []struct {
		name string
		next []cluster.Topic // the snapshot that takes the replica away
	}{
		{"deleted", nil},
		{"recreated", []cluster.Topic{{Name: "t", ID: "new", ReplicationFactor: 3,
			Partitions: []cluster.Partition{{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2, 3}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := make(chan struct{}, 100)
			alter := func(ctx context.Context, req cluster.AlterPartitionRequest) (*cluster.Partition, error) {
				asked <- struct{}{}
				return nil, protocol.FencedLeaderEpoch.Err("leader epoch %d is stale", req.LeaderEpoch)
			}
			m, r := leaderReplica(t, "1", Replication{Alter: alter})
			req := r.ShrinkIfLagging(time.Now().Add(time.Hour), time.Minute)
			if req == nil {
				t.Fatal("no shrink asked for followers an hour behind")
			}
			m.Alter(r, req)
			<-asked
			<-asked // refused twice: the change is being asked again
			if err := m.Apply(&cluster.Snapshot{Version: 2, Topics: tc.next}, true); err != nil {
				t.Fatal(err)
			}
			if r.Altered(req, nil, protocol.FencedLeaderEpoch.Err("late")) {
				t.Fatal("a change of a replica that left the node is still to be asked again")
			}
			ended := make(chan struct{})
			go func() { m.repl.wg.Wait(); close(ended) }()
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the ISR change is still being asked after its replica left the node")
			}
		})
	}
}

// TestDamagedReplicaThatLeadsAgainKeepsItsLog: a damaged follower elected
// leader after it resigned, before its cut, keeps its log whole (its
// followers would truncate to match it); only as a follower is it cut.
func TestDamagedReplicaThatLeadsAgainKeepsItsLog(t *testing.T) {
	m, r := leaderReplica(t, "1")
	for i := 0; i < 3; i++ {
		if _, err := r.Log.Append(testBatch(t), 1); err != nil {
			t.Fatal(err)
		}
	}
	end := r.Log.EndOffset()
	// The damage: the second batch, which starts where the first (of one
	// record) ends.
	ce := &seglog.CorruptError{Segment: 0, Pos: int64(len(testBatch(t))), ValidEnd: 1, Err: errors.New("bad CRC")}
	if err := m.cutDamaged(r, ce); !errors.Is(err, errLeadsAgain) {
		t.Fatalf("cut while leading: %v, want errLeadsAgain", err)
	}
	if got := r.Log.EndOffset(); got != end {
		t.Fatalf("a leading replica's log was cut from %d to %d", end, got)
	}
	r.setState(cluster.Partition{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 1, ISR: []int32{1, 2, 3}}, r.State().Config)
	if err := m.cutDamaged(r, ce); err != nil {
		t.Fatalf("cut as a follower: %v", err)
	}
	if got := r.Log.EndOffset(); got != 1 {
		t.Fatalf("follower's log ends at %d after the cut, want 1", got)
	}
}

// TestDamagedFollowerLeavesTheISRBeforeItsCut: a follower in the ISR that
// finds damage asks metadata to leave the ISR and cuts its log only once the
// snapshot without it arrives, so it is never electable with the records the
// cut takes.
func TestDamagedFollowerLeavesTheISRBeforeItsCut(t *testing.T) {
	type asked struct {
		req cluster.ResignRequest
		end int64 // the log's end when it asked
	}
	resigned := make(chan asked, 1)
	var r *Replica
	repl := Replication{Resign: func(_ context.Context, req cluster.ResignRequest) (*cluster.Partition, error) {
		select { // asked again until the snapshot arrives: keep the first
		case resigned <- asked{req, r.Log.EndOffset()}:
		default:
		}
		return &cluster.Partition{}, nil
	}}
	m, lr := leaderReplica(t, "1", repl)
	r = lr
	for i := 0; i < 3; i++ {
		if _, err := r.Log.Append(testBatch(t), 1); err != nil {
			t.Fatal(err)
		}
	}
	follow := func(version uint64, partitionEpoch int32, isr ...int32) {
		t.Helper()
		tp := cluster.Topic{Name: "t", ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "1", "flush.policy": "replication"},
			Partitions: []cluster.Partition{{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 2, PartitionEpoch: partitionEpoch, ISR: isr}}}
		if err := m.Apply(&cluster.Snapshot{Version: version, Topics: []cluster.Topic{tp}}, true); err != nil {
			t.Fatal(err)
		}
	}
	follow(2, 1, 1, 2, 3)
	m.ReportCorrupt(r, &seglog.CorruptError{Segment: 0, Pos: int64(len(testBatch(t))), ValidEnd: 1, Err: errors.New("bad CRC")})
	select {
	case a := <-resigned:
		if a.req.LeaderID != 1 || a.req.LeaderEpoch != 2 {
			t.Fatalf("resign request %+v, want node 1 at leader epoch 2", a.req)
		}
		if a.end != 3 {
			t.Fatalf("the log ended at %d when the follower asked to leave the ISR, want 3 (uncut)", a.end)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a damaged follower in the ISR never asked to leave it")
	}
	if end := r.Log.EndOffset(); end != 3 {
		t.Fatalf("cut to %d while still in the ISR", end)
	}
	follow(3, 2, 2, 3) // metadata took it out
	testkit.WaitFor(t, 10*time.Second, "the log cut at 1 after leaving the ISR", func() bool { return r.Log.EndOffset() == 1 })
}
