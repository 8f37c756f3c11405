package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

func createCmd(name string, config map[string]string, replicas ...[]int32) fsm.Command {
	return fsm.Command{Type: fsm.TypeCreateTopic, CreateTopic: &fsm.CreateTopic{
		Name: name, ReplicationFactor: len(replicas[0]), Config: config, Replicas: replicas}}
}

// setup registers nodes 1..3 and creates "orders" (p0 on 1,2,3; p1 on
// 2,1,3) and "solo" (p0 on 1,2 with node 1 alone in the ISR). It returns
// the nodes' epochs by id.
func setup(t *testing.T, c *Controller, r *fakeRaft) map[int32]int64 {
	t.Helper()
	ctx := context.Background()
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		e, err := c.Register(ctx, cluster.RegisterRequest{ID: id, Addr: "n:1"})
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = e
	}
	for _, cmd := range []fsm.Command{
		createCmd("orders", nil, []int32{1, 2, 3}, []int32{2, 1, 3}),
		createCmd("solo", nil, []int32{1, 2}),
	} {
		if res, err := r.Propose(ctx, cmd); err != nil || res.Err != nil {
			t.Fatalf("create: %v %v", err, res.Err)
		}
	}
	if _, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "solo", LeaderID: 1, NodeEpoch: epochs[1], ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	return epochs
}

func partitionOf(t *testing.T, f *fsm.FSM, topic string, id int32) cluster.Partition {
	t.Helper()
	tp, ok := f.Topic(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	return tp.Partitions[id]
}

func wantPartition(t *testing.T, f *fsm.FSM, topic string, id, leader, leaderEpoch, partitionEpoch int32, isr ...int32) {
	t.Helper()
	p := partitionOf(t, f, topic, id)
	if p.Leader != leader || p.LeaderEpoch != leaderEpoch || p.PartitionEpoch != partitionEpoch || !slices.Equal(p.ISR, isr) {
		t.Fatalf("%s-%d = leader %d, leader epoch %d, partition epoch %d, ISR %v; want %d, %d, %d, %v",
			topic, id, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR, leader, leaderEpoch, partitionEpoch, isr)
	}
}

// silence lets every node but keep miss its heartbeats for longer than the
// session timeout, then checks sessions.
func silence(t *testing.T, c *Controller, clk *clock, epochs map[int32]int64, keep ...int32) {
	t.Helper()
	clk.advance(4 * time.Second)
	for _, id := range keep {
		if err := c.Heartbeat(cluster.HeartbeatRequest{ID: id, Epoch: epochs[id]}); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(3 * time.Second)
	c.checkSessions()
}

func TestFailoverOnSessionExpiry(t *testing.T) {
	c, r, clk := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	silence(t, c, clk, epochs, 2, 3) // node 1 expires

	wantPartition(t, r.f, "orders", 0, 2, 1, 1, 2, 3) // led by 1: next ISR replica, leader epoch +1
	wantPartition(t, r.f, "orders", 1, 2, 0, 1, 2, 3) // 1 was a follower: ISR shrinks only
	wantPartition(t, r.f, "solo", 0, -1, 1, 2, 1)     // 1 was the last ISR member: kept, offline
	ctx := context.Background()
	_, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", Partition: 0, LeaderID: 1, NodeEpoch: epochs[1],
		LeaderEpoch: 0, PartitionEpoch: 0, ISR: []int32{1, 2}})
	if !errors.Is(err, fsm.ErrStaleNodeEpoch) {
		t.Fatalf("AlterPartition from the fenced node = %v; want ErrStaleNodeEpoch", err)
	}
	v := r.f.Version()
	c.checkSessions()
	if r.f.Version() != v {
		t.Fatal("a second check changed the state: reconciliation is not idempotent")
	}

	// Node 1 returns: it leads its offline partition again and joins no ISR.
	e1, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "n:1"})
	if err != nil {
		t.Fatal(err)
	}
	c.checkSessions() // what the kick of Register runs
	wantPartition(t, r.f, "solo", 0, 1, 2, 3, 1)
	wantPartition(t, r.f, "orders", 0, 2, 1, 1, 2, 3)
	wantPartition(t, r.f, "orders", 1, 2, 0, 1, 2, 3)
	// With nodes 1 and 2 silent, 3 alone leads "orders"; "solo" keeps its
	// last ISR member 1 and goes offline again.
	epochs[1] = e1
	silence(t, c, clk, epochs, 3)
	wantPartition(t, r.f, "orders", 0, 3, 2, 2, 3)
	wantPartition(t, r.f, "orders", 1, 3, 1, 2, 3)
	wantPartition(t, r.f, "solo", 0, -1, 3, 4, 1)
}

func TestUncleanElectionOnlyWhenTheTopicAllowsIt(t *testing.T) {
	c, r, clk := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	ctx := context.Background()
	if res, err := r.Propose(ctx, createCmd("dirty", map[string]string{cluster.ConfigUncleanElection: "true"}, []int32{1, 2})); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if _, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "dirty", LeaderID: 1, NodeEpoch: epochs[1], ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	silence(t, c, clk, epochs, 2, 3)
	wantPartition(t, r.f, "solo", 0, -1, 1, 2, 1) // clean: offline
	wantPartition(t, r.f, "dirty", 0, 2, 1, 2, 2) // unclean: 2 leads alone
}

func TestControlledShutdown(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	ctx := context.Background()

	if _, err := c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: 1, Epoch: epochs[1] - 1}); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("shutdown with a stale epoch = %v; want ErrFencedEpoch", err)
	}
	if _, err := c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: 9, Epoch: 1}); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("shutdown of an unknown node = %v; want ErrUnknownNode", err)
	}
	remaining, err := c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: 1, Epoch: epochs[1]})
	if err != nil || remaining != 1 {
		t.Fatalf("shutdown = %d, %v; want 1 (solo-0, where 1 is the only ISR member)", remaining, err)
	}
	wantPartition(t, r.f, "orders", 0, 2, 1, 1, 2, 3) // leadership moved, leader epoch +1
	wantPartition(t, r.f, "orders", 1, 2, 0, 1, 2, 3) // out of the ISR
	wantPartition(t, r.f, "solo", 0, 1, 0, 1, 1)      // the only ISR member keeps it
	if !r.f.View().ShuttingDown[1] {
		t.Fatal("node 1 not marked as shutting down")
	}

	// Leaders cannot take it back into an ISR; neither the session check nor
	// the preferred-leader timer gives it anything back.
	_, err = c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", Partition: 1, LeaderID: 2, NodeEpoch: epochs[2],
		LeaderEpoch: 0, PartitionEpoch: 1, ISR: []int32{2, 3, 1}})
	if !errors.Is(err, fsm.ErrIneligibleReplica) {
		t.Fatalf("adding a shutting-down node = %v; want ErrIneligibleReplica", err)
	}
	v := r.f.Version()
	c.checkSessions()
	c.electPreferred()
	again, err := c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: 1, Epoch: epochs[1]})
	if err != nil || again != 1 || r.f.Version() != v {
		t.Fatalf("repeated shutdown = %d, %v, version %d -> %d; want 1 and no change", again, err, v, r.f.Version())
	}

	// Registering again ends the shutdown state.
	if _, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "n:1"}); err != nil {
		t.Fatal(err)
	}
	if len(r.f.View().ShuttingDown) != 0 {
		t.Fatal("registration did not end the shutdown state")
	}
}

func TestPreferredLeaderReturns(t *testing.T) {
	c, r, clk := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	ctx := context.Background()
	silence(t, c, clk, epochs, 2, 3)
	wantPartition(t, r.f, "orders", 0, 2, 1, 1, 2, 3)
	if _, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "n:1"}); err != nil {
		t.Fatal(err)
	}
	c.checkSessions()
	c.electPreferred() // 1 is alive but not in the ISR: stays a follower
	wantPartition(t, r.f, "orders", 0, 2, 1, 1, 2, 3)

	// The leader takes 1 back into the ISR once it caught up ...
	p, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", Partition: 0, LeaderID: 2, NodeEpoch: epochs[2],
		LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{2, 3, 1}})
	if err != nil || p.PartitionEpoch != 2 || p.LeaderEpoch != 1 || p.Leader != 2 {
		t.Fatalf("AlterPartition = %+v, %v", p, err)
	}
	// ... and the preferred-leader election hands leadership back.
	c.electPreferred()
	wantPartition(t, r.f, "orders", 0, 1, 2, 3, 2, 3, 1)
}

func TestPreferredLeaderTimer(t *testing.T) {
	f := fsm.New()
	r := &fakeRaft{f: f}
	cfg := Config{SessionTimeout: time.Hour, PreferredLeaderInterval: 20 * time.Millisecond, ProposeTimeout: time.Second}
	c, err := New(cfg, r, f, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Stop()
	c.SetLeader(true)
	testkit.WaitFor(t, 5*time.Second, "the controller to activate", c.Active)
	ctx := context.Background()
	for id := int32(1); id <= 2; id++ {
		if _, err := c.Register(ctx, cluster.RegisterRequest{ID: id, Addr: "n:1"}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := r.Propose(ctx, createCmd("t", nil, []int32{1, 2})); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	// Leadership moved to 2 by hand: the timer brings it back to 1.
	if res, err := r.Propose(ctx, fsm.Command{Type: fsm.TypeUpdatePartition, UpdatePartition: &fsm.UpdatePartition{
		Topic: "t", Leader: 2, ISR: []int32{1, 2}}}); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	testkit.WaitFor(t, 5*time.Second, "the preferred leader back", func() bool {
		p := partitionOf(t, f, "t", 0)
		return p.Leader == 1 && p.LeaderEpoch == 2
	})
}

func TestAlterPartitionNeedsLeadership(t *testing.T) {
	c, _, _ := newTest(t, nil)
	if _, err := c.AlterPartition(context.Background(), cluster.AlterPartitionRequest{Topic: "t", ISR: []int32{1}}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("AlterPartition before leadership = %v; want ErrNotActive", err)
	}
	if _, err := c.ControlledShutdown(context.Background(), cluster.ShutdownRequest{ID: 1, Epoch: 1}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("ControlledShutdown before leadership = %v; want ErrNotActive", err)
	}
}

// TestRestartedNodeLeavesISRs: a node that registers again before its session
// expired (it restarted, perhaps with fewer records than it had) leaves the
// ISRs where another alive member remains and hands over what it led; where
// it is alone in the ISR it stays leader at a new epoch.
func TestRestartedNodeLeavesISRs(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	setup(t, c, r)
	before := partitionOf(t, r.f, "solo", 0)
	if _, err := c.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "n:1"}); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, r.f, "orders", 0, 2, 1, 1, 2, 3) // led by node 1: node 2 takes over
	wantPartition(t, r.f, "orders", 1, 2, 0, 1, 2, 3) // followed by node 1
	wantPartition(t, r.f, "solo", 0, 1, before.LeaderEpoch+1, before.PartitionEpoch+1, 1)
}

// TestRestartedNodeLeavesISRsToFreshMembersOnly: a member the controller has
// not heard from within half a session timeout may be down itself: it does
// not take over, nor count as what remains of an ISR.
func TestRestartedNodeLeavesISRsToFreshMembersOnly(t *testing.T) {
	c, r, clk := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	clk.advance(4 * time.Second) // past half the 6 s session: nobody is fresh
	if err := c.Heartbeat(cluster.HeartbeatRequest{ID: 3, Epoch: epochs[3]}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(context.Background(), cluster.RegisterRequest{ID: 1, Addr: "n:1"}); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, r.f, "orders", 0, 3, 1, 1, 2, 3) // node 3, the one heard from, takes over
	wantPartition(t, r.f, "orders", 1, 2, 0, 1, 2, 3) // node 3 remains: node 1 leaves
	// Nobody heard from lately: node 2 stays in its ISRs.
	clk.advance(4 * time.Second)
	before := partitionOf(t, r.f, "orders", 1)
	if _, err := c.Register(context.Background(), cluster.RegisterRequest{ID: 2, Addr: "n:1"}); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, r.f, "orders", 1, 2, before.LeaderEpoch+1, before.PartitionEpoch+1, 2, 3)
}

// TestElectLeaders: elections asked for now. Preferred: not needed while
// the preferred replica leads, not available while it is out of the ISR,
// done once it is back; unclean: not needed while a live leader leads, done
// for an offline partition (a live replica out of sync leads alone); an
// unknown partition answers its code, an unknown topic is an error.
func TestElectLeaders(t *testing.T) {
	c, r, clk := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	ctx := context.Background()
	elect := func(req cluster.ElectRequest) ([]protocol.Code, []cluster.ElectResult) {
		t.Helper()
		res, err := c.ElectLeaders(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var out []protocol.Code
		for _, x := range res {
			out = append(out, x.Code)
		}
		return out, res
	}
	if got, _ := elect(cluster.ElectRequest{Topic: "orders", Partitions: []int32{0, 1, 7}}); !slices.Equal(got,
		[]protocol.Code{protocol.ElectionNotNeeded, protocol.ElectionNotNeeded, protocol.UnknownTopicOrPartition}) {
		t.Fatalf("preferred replicas leading: %v", got)
	}
	silence(t, c, clk, epochs, 2, 3) // 1 fails: orders-0 goes to 2, solo-0 (ISR 1) is offline
	wantPartition(t, r.f, "orders", 0, 2, 1, 1, 2, 3)
	wantPartition(t, r.f, "solo", 0, -1, 1, 2, 1)
	if got, _ := elect(cluster.ElectRequest{Topic: "orders", Partitions: []int32{1}, Unclean: true}); !slices.Equal(got, []protocol.Code{protocol.ElectionNotNeeded}) {
		t.Fatalf("unclean election of a led partition: %v", got)
	}
	if got, res := elect(cluster.ElectRequest{Topic: "solo", Unclean: true}); !slices.Equal(got, []protocol.Code{protocol.None}) || res[0].Leader != 2 {
		t.Fatalf("unclean election of offline solo-0: %+v", res)
	}
	wantPartition(t, r.f, "solo", 0, 2, 2, 3, 2)

	if _, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "n:1"}); err != nil {
		t.Fatal(err)
	}
	c.checkSessions()
	if got, _ := elect(cluster.ElectRequest{Topic: "orders", Partitions: []int32{0}}); !slices.Equal(got, []protocol.Code{protocol.PreferredLeaderNotAvailable}) {
		t.Fatalf("the preferred replica out of the ISR: %v", got)
	}
	if _, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", Partition: 0, LeaderID: 2, NodeEpoch: epochs[2],
		LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{2, 3, 1}}); err != nil {
		t.Fatal(err)
	}
	if got, res := elect(cluster.ElectRequest{Topic: "orders"}); !slices.Equal(got, []protocol.Code{protocol.None, protocol.ElectionNotNeeded}) || res[0].Leader != 1 {
		t.Fatalf("the preferred replica back in the ISR: %+v", res)
	}
	wantPartition(t, r.f, "orders", 0, 1, 2, 3, 2, 3, 1)
	if _, err := c.ElectLeaders(ctx, cluster.ElectRequest{Topic: "nope"}); !errors.Is(err, fsm.ErrUnknownPartition) {
		t.Fatalf("an unknown topic: %v", err)
	}
}
