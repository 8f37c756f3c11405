package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/placement"
)

// addNode registers one more node and returns its epoch.
func addNode(t *testing.T, c *Controller, id int32) int64 {
	t.Helper()
	e, err := c.Register(context.Background(), cluster.RegisterRequest{ID: id, Addr: "n:1"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestReassignmentCompletesOnceTheNewReplicaIsInSync(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	addNode(t, c, 4)
	ctx := context.Background()

	p, err := c.ReassignPartition(ctx, "orders", 0, []int32{4, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Replicas, []int32{1, 2, 3, 4}) || !slices.Equal(p.AddingReplicas, []int32{4}) {
		t.Fatalf("started: %+v", p)
	}
	// The move is counted as such, not as a missing replica ("solo" is
	// under-replicated from setup).
	if h := r.f.Health(); h.Reassigning != 1 || h.UnderReplicated != 1 {
		t.Fatalf("health during the move: %+v", h)
	}
	if got := gaugeValue(t, c, "sluice_metadata_reassigning_partitions"); got != 1 {
		t.Fatalf("reassigning partitions gauge = %v", got)
	}
	c.checkSessions()
	if got := partitionOf(t, r.f, "orders", 0); !got.Reassigning() || got.Leader != 1 {
		t.Fatalf("completed before the new replica joined the ISR: %+v", got)
	}
	if _, err := c.ReassignPartition(ctx, "orders", 0, []int32{1, 2, 3}); !errors.Is(err, fsm.ErrReassignmentInProgress) {
		t.Fatalf("a second reassignment: %v", err)
	}
	// The leader (1) sees 4 caught up and adds it to the ISR.
	if _, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", LeaderID: 1, NodeEpoch: epochs[1],
		PartitionEpoch: p.PartitionEpoch, ISR: []int32{1, 2, 3, 4}}); err != nil {
		t.Fatal(err)
	}
	c.checkSessions() // what the kick of AlterPartition runs
	if h := r.f.Health(); h.Reassigning != 0 {
		t.Fatalf("health after the move: %+v", h)
	}
	got := partitionOf(t, r.f, "orders", 0)
	if got.Reassigning() || !slices.Equal(got.Replicas, []int32{4, 2, 3}) || !slices.Equal(got.ISR, []int32{2, 3, 4}) || got.Leader != 4 || got.LeaderEpoch != 1 {
		t.Fatalf("after completion: %+v", got)
	}
}

func TestCancelReassignment(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	setup(t, c, r)
	addNode(t, c, 4)
	ctx := context.Background()
	if _, err := c.CancelReassignment(ctx, "orders", 1); !errors.Is(err, fsm.ErrNoReassignmentInProgress) {
		t.Fatalf("cancel without a reassignment: %v", err)
	}
	if _, err := c.ReassignPartition(ctx, "orders", 1, []int32{4, 1, 3}); err != nil {
		t.Fatal(err)
	}
	p, err := c.CancelReassignment(ctx, "orders", 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Reassigning() || !slices.Equal(p.Replicas, []int32{2, 1, 3}) || p.Leader != 2 {
		t.Fatalf("after cancel: %+v", p)
	}
}

func TestDecommissionMovesEveryReplica(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	setup(t, c, r)
	ctx := context.Background()
	// Three nodes and replication factor 3: node 1's replicas have nowhere
	// to go, so the decommission is refused and nothing is marked.
	if _, err := c.Decommission(ctx, 1, true); !errors.Is(err, placement.ErrNotEnoughNodes) {
		t.Fatalf("decommission without room: %v", err)
	}
	if n, _ := r.f.Node(1); n.Decommissioned {
		t.Fatal("a refused decommission marked the node")
	}
	if _, err := c.Decommission(ctx, 9, true); !errors.Is(err, fsm.ErrUnknownNode) {
		t.Fatalf("unknown node: %v", err)
	}

	addNode(t, c, 4)
	res, err := c.Decommission(ctx, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Started) != 3 || res.Replicas != 3 {
		t.Fatalf("decommission answer: %+v; want 3 moves started and 3 replicas still on node 1", res)
	}
	// Least loaded first: node 4 (empty) takes both "orders" partitions,
	// then ties with node 3 and the lower id takes "solo".
	want := map[string][]int32{"orders-0": {4, 2, 3}, "orders-1": {2, 4, 3}, "solo-0": {3, 2}}
	for _, m := range res.Started {
		if w := want[fmt.Sprintf("%s-%d", m.Topic, m.Partition)]; !slices.Equal(m.Replicas, w) {
			t.Fatalf("move %+v; want replicas %v", m, w)
		}
	}
	// New topics avoid the node.
	if got := placement.LiveNodes(r.f.Nodes()); slices.ContainsFunc(got, func(n placement.Node) bool { return n.ID == 1 }) {
		t.Fatalf("node 1 is still a placement candidate: %v", got)
	}
	// Each leader adds the new replica to its ISR; the controller completes
	// the moves and node 1 holds nothing.
	for _, t0 := range r.f.Topics() {
		for _, p := range t0.Partitions {
			leader, _ := r.f.Node(p.Leader)
			if _, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: t0.Name, Partition: p.ID, LeaderID: p.Leader,
				NodeEpoch: leader.Epoch, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: append(slices.Clone(p.ISR), p.AddingReplicas...)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.checkSessions()
	if n := replicasOn(r.f.Topics(), 1); n != 0 {
		t.Fatalf("node 1 still holds %d replicas: %+v", n, r.f.Topics())
	}
	if led := ledBy(r.f.Topics(), 1); led != 0 {
		t.Fatalf("node 1 still leads %d partitions", led)
	}
	// Recommission lifts the mark only.
	if _, err := c.Decommission(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.f.Node(1); n.Decommissioned || replicasOn(r.f.Topics(), 1) != 0 {
		t.Fatalf("after recommission: %+v", n)
	}
}

// gaugeValue reads one of the controller's collectors by metric name.
func gaugeValue(t *testing.T, c *Controller, name string) float64 {
	t.Helper()
	for _, col := range c.Collectors() {
		if testutil.CollectAndCount(col, name) == 1 {
			return testutil.ToFloat64(col)
		}
	}
	t.Fatalf("no collector serves %s", name)
	return 0
}

func TestResignLeadership(t *testing.T) {
	c, r, _ := newTest(t, nil)
	lead(t, c)
	epochs := setup(t, c, r)
	ctx := context.Background()
	p, err := c.ResignLeadership(ctx, cluster.ResignRequest{Topic: "orders", Partition: 0, LeaderID: 1, NodeEpoch: epochs[1], LeaderEpoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	wantPartition(t, r.f, "orders", 0, 2, 1, p.PartitionEpoch, 2, 3)
	if _, err := c.ResignLeadership(ctx, cluster.ResignRequest{Topic: "orders", Partition: 0, LeaderID: 1, NodeEpoch: epochs[1], LeaderEpoch: 0}); !errors.Is(err, fsm.ErrFencedLeaderEpoch) {
		t.Fatalf("resigning again at the old epoch: %v", err)
	}
	// A damaged follower leaves the ISR; the leader stays.
	p, err = c.ResignLeadership(ctx, cluster.ResignRequest{Topic: "orders", Partition: 1, LeaderID: 1, NodeEpoch: epochs[1], LeaderEpoch: 0})
	if err != nil {
		t.Fatalf("a follower resigning: %v", err)
	}
	wantPartition(t, r.f, "orders", 1, 2, 0, p.PartitionEpoch, 2, 3)
	// Out of the ISR already: nothing changes.
	v := r.f.Version()
	if p, err := c.ResignLeadership(ctx, cluster.ResignRequest{Topic: "orders", Partition: 1, LeaderID: 1, NodeEpoch: epochs[1], LeaderEpoch: 0}); err != nil || slices.Contains(p.ISR, 1) {
		t.Fatalf("a follower out of the ISR resigning again: %+v, %v", p, err)
	}
	if r.f.Version() != v {
		t.Fatal("resigning out of the ISR changed the state")
	}
	// "solo" has node 1 alone in its ISR: nobody can take over.
	if _, err := c.ResignLeadership(ctx, cluster.ResignRequest{Topic: "solo", Partition: 0, LeaderID: 1, NodeEpoch: epochs[1], LeaderEpoch: 0}); !errors.Is(err, ErrNoOtherLeader) {
		t.Fatalf("resigning the only in-sync replica: %v", err)
	}
	if _, err := c.ResignLeadership(ctx, cluster.ResignRequest{Topic: "orders", Partition: 1, LeaderID: 2, NodeEpoch: epochs[2] + 1, LeaderEpoch: 0}); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("a stale registration: %v", err)
	}
}
