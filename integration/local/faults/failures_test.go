package faults

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestSlowFollowerAndMinInsyncReplicas pauses a follower: the leader drops it
// from the ISR, acks=all produces then fail with NOT_ENOUGH_REPLICAS (never
// silently accepted), and once the follower resumes it catches up, rejoins
// the ISR and produces succeed again with nothing lost.
func TestSlowFollowerAndMinInsyncReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3, "-replica-lag-time-max", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := cluster.NewClient([]string{c.FrontendURL()})
	if _, err := admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "mis", Partitions: 1, ReplicationFactor: 3,
		Config: map[string]string{"min.insync.replicas": "3"}}); err != nil {
		t.Fatal(err)
	}
	itest.WaitFullISR(t, ctx, c, "mis", 3)
	if code, err := itest.ProduceOne(ctx, c.FrontendURL(), "mis", "before"); err != nil || code != 0 {
		t.Fatalf("produce with a full ISR: code %d, %v", code, err)
	}
	leader, p := itest.LeaderOf(t, ctx, c, "mis", 0)
	var follower int32 = -1
	for _, id := range p.Replicas {
		if id != leader {
			follower = id
			break
		}
	}
	proc := c.Proc("storage-" + strconv.Itoa(int(follower)))
	if err := c.Pause(proc); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = c.Resume(proc)
		}
	}()
	// The ISR shrinks below min.insync.replicas: acks=all is refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := itest.ProduceOne(ctx, c.FrontendURL(), "mis", "during")
		if err == nil && code == int16(protocol.NotEnoughReplicas) {
			break
		}
		if err == nil && code == 0 {
			_, p := itest.LeaderOf(t, ctx, c, "mis", 0)
			t.Logf("accepted while the ISR is %v", p.ISR)
		}
		if time.Now().After(deadline) {
			t.Fatalf("acks=all never refused with NOT_ENOUGH_REPLICAS (last code %d, %v)", code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.Resume(proc); err != nil {
		t.Fatal(err)
	}
	resumed = true
	itest.WaitFullISR(t, ctx, c, "mis", 3)
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, err := itest.ProduceOne(ctx, c.FrontendURL(), "mis", "after")
		if err == nil && code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce after the follower returned: code %d, %v", code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := readAll(t, ctx, c, "mis", 1)
	values := map[string]bool{}
	for _, v := range got {
		values[v] = true
	}
	if !values["before"] || !values["after"] {
		t.Fatalf("records lost: %v", values)
	}
}

// TestMetadataLeaderKillAndFullRestart kills the metadata Raft leader during
// produce (a new one is elected and produce continues), then stops the whole
// cluster and starts it again: every acknowledged record is there.
func TestMetadataLeaderKillAndFullRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	itest.CreateReplicated(t, ctx, c, "full", 3, "1")
	stopLoad := startLoad(ctx, t, c, "full")
	time.Sleep(time.Second)
	snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := c.MetadataLeader(snap.Leader)
	if old == nil {
		t.Fatalf("no voter at leader address %q", snap.Leader)
	}
	c.StopProc(old, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
		if err == nil && s.Leader != "" && s.Leader != snap.Leader {
			if _, ok := s.Topic("full"); !ok {
				t.Fatal("topic missing after metadata failover")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new metadata leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	got := stopLoad()
	if err := c.StartProc(ctx, old); err != nil {
		t.Fatal(err)
	}

	// Whole cluster down and up again.
	c.Stop()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	itest.WaitFullISR(t, ctx, c, "full", 3)
	checkAcked(t, got, readAll(t, ctx, c, "full", 3))
	t.Logf("%d acknowledged records survived a metadata leader kill and a full restart", len(got))
}

// TestIsolatedLeaderIsFencedAndRejoins cuts the leader of a partition off from
// metadata and its followers under acks=all load, in two ways: a paused
// process (frozen, then resumed with its stale state) and a network partition
// (running, but unreachable). A new leader is elected; when the old one comes
// back it acknowledges nothing of what it may still hold for its old epoch,
// truncates to the new leader's log and catches up; every acknowledged record
// is in the final log, and the replicas converge. It runs alone (not
// t.Parallel): its network namespaces are named by the process (doc.go).
func TestIsolatedLeaderIsFencedAndRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	t.Run("paused", func(t *testing.T) {
		c := itest.StartCluster(t, 3)
		isolatedLeader(t, c, func(node int32) func() {
			proc := c.Proc("storage-" + strconv.Itoa(int(node)))
			if err := c.Pause(proc); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := c.Resume(proc); err != nil {
					t.Error(err)
				}
			}
		})
	})
	t.Run("partitioned", func(t *testing.T) {
		c := itest.StartNetnsCluster(t, 3)
		isolatedLeader(t, c, func(node int32) func() {
			var others []int
			for i := 0; i <= 3; i++ { // 0: metadata, frontend and this test
				if i != int(node) {
					others = append(others, i)
					if err := c.Cut(int(node), i); err != nil {
						t.Fatal(err)
					}
				}
			}
			return func() {
				for _, i := range others {
					if err := c.Heal(int(node), i); err != nil {
						t.Error(err)
					}
				}
			}
		})
	})
}

// isolatedLeader runs the isolation scenario; isolate cuts a node off and
// returns the function that brings it back.
func isolatedLeader(t *testing.T, c *localcluster.Cluster, isolate func(node int32) (restore func())) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	itest.CreateReplicated(t, ctx, c, "iso", 1, "2")
	stopLoad := startLoad(ctx, t, c, "iso")
	time.Sleep(time.Second)
	old, before := itest.LeaderOf(t, ctx, c, "iso", 0)
	restore := isolate(old)
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	waitNewLeader(t, ctx, c, "iso", old, before.LeaderEpoch)
	time.Sleep(2 * time.Second) // the new leader takes writes
	restore()
	restored = true
	time.Sleep(2 * time.Second) // the old leader learns the new epoch under load
	got := stopLoad()
	itest.WaitFullISR(t, ctx, c, "iso", 3)
	stored := readSettled(t, ctx, c, "iso", 1)
	checkAcked(t, got, stored)
	t.Logf("%d acknowledged records present after the old leader (node %d) rejoined", len(got), old)

	// The replicas converged: move leadership twice in a row (controlled
	// shutdown of each leader in turn) and every new leader serves exactly
	// the same log.
	for round := 0; round < 2; round++ {
		l, _ := itest.LeaderOf(t, ctx, c, "iso", 0)
		p := c.Proc("storage-" + strconv.Itoa(int(l)))
		c.StopProc(p, false)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if nl, _ := itest.LeaderOf(t, ctx, c, "iso", 0); nl != l && nl >= 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("leadership did not move on controlled shutdown")
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A new leader's high watermark catches up once its followers
		// fetch from it (as in Kafka); then it must serve the same log.
		again := readAll(t, ctx, c, "iso", 1)
		for wait := time.Now().Add(15 * time.Second); len(again) < len(stored) && time.Now().Before(wait); {
			time.Sleep(200 * time.Millisecond)
			again = readAll(t, ctx, c, "iso", 1)
		}
		if len(again) != len(stored) {
			t.Fatalf("round %d: new leader holds %d records, the previous one %d", round, len(again), len(stored))
		}
		for id, v := range stored {
			if again[id] != v {
				t.Fatalf("round %d: offset %s differs between replicas: %q vs %q", round, id, again[id], v)
			}
		}
		if err := c.StartProc(ctx, p); err != nil {
			t.Fatal(err)
		}
		itest.WaitFullISR(t, ctx, c, "iso", 3)
	}
}

// readSettled reads the topic once its log stopped growing: a produce the
// load gave up on when it stopped may still be committed by the frontend a
// moment later. It reads until two reads 500ms apart agree (at most 15s).
func readSettled(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions int) map[string]string {
	t.Helper()
	prev := readAll(t, ctx, c, topic, partitions)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		cur := readAll(t, ctx, c, topic, partitions)
		if len(cur) == len(prev) {
			return cur
		}
		prev = cur
	}
	return prev
}

// TestCutLinkBetweenLeaderAndFollowers partitions the network between a
// partition's leader and both its followers while the leader still reaches
// metadata: the followers stop fetching, the leader shrinks the ISR to itself,
// and acks=all is refused with NOT_ENOUGH_REPLICAS (min.insync.replicas=2)
// instead of being acknowledged by one copy. When the links heal the
// followers catch up, rejoin the ISR, and every acknowledged record is there.
// It runs alone, as TestIsolatedLeaderIsFencedAndRejoins does.
func TestCutLinkBetweenLeaderAndFollowers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartNetnsCluster(t, 3, "-replica-lag-time-max", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	itest.CreateReplicated(t, ctx, c, "cut", 1, "2")
	stopLoad := startLoad(ctx, t, c, "cut")
	time.Sleep(time.Second)
	leader, p := itest.LeaderOf(t, ctx, c, "cut", 0)
	var followers []int
	for _, id := range p.Replicas {
		if id != leader {
			followers = append(followers, int(id))
			if err := c.Cut(int(leader), int(id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	healed := false
	heal := func() {
		for _, f := range followers {
			if err := c.Heal(int(leader), f); err != nil {
				t.Error(err)
			}
		}
		healed = true
	}
	defer func() {
		if !healed {
			heal()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := itest.ProduceOne(ctx, c.FrontendURL(), "cut", "during")
		if err == nil && code == int16(protocol.NotEnoughReplicas) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acks=all never refused while the leader was cut from its followers (code %d, %v)", code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if l, p := itest.LeaderOf(t, ctx, c, "cut", 0); l != leader || len(p.ISR) != 1 {
		t.Fatalf("leader %d ISR %v; want leader %d alone in the ISR", l, p.ISR, leader)
	}
	heal()
	itest.WaitFullISR(t, ctx, c, "cut", 3)
	got := stopLoad()
	checkAcked(t, got, readAll(t, ctx, c, "cut", 1))
	t.Logf("%d acknowledged records present after the partition healed", len(got))
}

// TestNodeBackWithAnEmptyDiskWithinItsSession: a partition's leader is
// killed, its disk emptied (a replaced disk) and started again before its
// session expires. It must not go on leading an empty log that its followers
// would truncate to: it leaves the ISR when it registers again, another
// replica leads, and every acknowledged record is still there once it has
// caught up and rejoined.
func TestNodeBackWithAnEmptyDiskWithinItsSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	// A long session, so the restart surely lands within it however slow the
	// machine.
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Extra: map[string][]string{"metadata": {"-session-timeout", "20s"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateReplicated(t, ctx, c, "wiped", 1, "2")
	want := itest.ProduceValues(t, c, "wiped", "w", 2000)
	leader, _ := itest.LeaderOf(t, ctx, c, "wiped", 0)
	meta := cluster.NewClient(c.MetadataURLs())
	epochOf := func() (int64, bool) {
		snap, err := meta.Snapshot(ctx)
		if err != nil {
			return 0, false
		}
		for _, n := range snap.Nodes {
			if n.ID == leader {
				return n.Epoch, n.Alive
			}
		}
		return 0, false
	}
	before, _ := epochOf()
	p := c.Proc("storage-" + strconv.Itoa(int(leader)))
	c.StopProc(p, true)
	dir := p.Args[slices.Index(p.Args, "-data-dir")+1]
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.StartProc(ctx, p); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if e, alive := epochOf(); e == before || !alive {
			return fmt.Errorf("node %d has not registered again (epoch %d, alive %v)", leader, e, alive)
		}
		return nil
	})
	if e, alive := epochOf(); e == 0 || !alive {
		t.Fatal("the node expired: its restart was not within its session")
	}
	itest.WaitFullISR(t, ctx, c, "wiped", 3)
	stored := map[string]bool{}
	for _, v := range readAll(t, ctx, c, "wiped", 1) {
		stored[v] = true
	}
	missing := 0
	for _, v := range want {
		if !stored[v] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records lost after node %d came back with an empty disk", missing, len(want), leader)
	}
}
