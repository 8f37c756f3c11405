package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// TestReassignAndDecommissionUnderLoad: on four storage nodes, under an
// idempotent acks=all SDK load that never stops, `sluicectl partition
// reassign` moves a partition off its leader's node (the new replica copies
// the log and joins the ISR before the old one leaves, and the leadership
// moves), another moves through Kafka's AlterPartitionReassignments, then
// `sluicectl node decommission` empties a node. No record
// fails, the moved replicas are deleted from the nodes they left, and the
// read-back finds every record exactly once in per-key order.
func TestReassignAndDecommissionUnderLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, partitions = "move", 4
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: partitions, ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "2"}})
	itest.WaitFullISR(t, ctx, c, topic, 3)
	p := itest.QuietProducer(t, c.FrontendURLs())
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	go func() { done <- loadcheck.Run(t, p, topic, 40, 200, stop) }()
	time.Sleep(2 * time.Second)

	// Reassign partition 0: its leader's slot goes to the node it lacks.
	leader, p0 := itest.LeaderOf(t, ctx, c, topic, 0)
	spare := int32(0)
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(p0.Replicas, id) {
			spare = id
		}
	}
	target := slices.Clone(p0.Replicas)
	target[slices.Index(target, leader)] = spare
	out := itest.MustSluicectl(t, c, "partition", "reassign", fmt.Sprintf("%s/0", topic), "--replicas", ids32(target), "--timeout", "2m")
	if !strings.Contains(out, "reassigning "+topic+"-0") || !strings.Contains(out, "done: replicas "+ids32(target)) {
		t.Fatalf("partition reassign said:\n%s", out)
	}
	t.Logf("partition reassign:\n%s", out)
	newLeader, moved := itest.LeaderOf(t, ctx, c, topic, 0)
	if !slices.Equal(moved.Replicas, target) || moved.Reassigning() || !slices.Contains(target, newLeader) || moved.LeaderEpoch <= p0.LeaderEpoch {
		t.Fatalf("after the reassignment: %+v (leader was %d at epoch %d)", moved, leader, p0.LeaderEpoch)
	}
	waitReplicaGone(t, c, topic, 0, leader)

	// Partition 1 moves the same way through Kafka's admin API (franz-go's
	// kadm): AlterPartitionReassignments starts it, ListPartitionReassignments
	// answers while it runs, and a cancel of a partition not moving is
	// NO_REASSIGNMENT_IN_PROGRESS.
	adm := kadm.NewClient(itest.FranzClient(t, c))
	_, p1 := itest.LeaderOf(t, ctx, c, topic, 1)
	target1 := slices.Clone(p1.Replicas)
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(p1.Replicas, id) {
			target1[2] = id
		}
	}
	moves, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{topic: {1: target1}})
	if err != nil || moves.Error() != nil {
		t.Fatalf("AlterPartitionReassignments of %s-1 to %v: %v %+v", topic, target1, err, moves)
	}
	if _, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {1: {}}}); err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}
	cancelled, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{topic: {2: nil}})
	if err != nil || !errors.Is(cancelled.Error(), kerr.NoReassignmentInProgress) {
		t.Fatalf("cancelling a partition not moving: %v %+v", err, cancelled)
	}
	testkit.Eventually(t, 2*time.Minute, func() error {
		if _, p := itest.LeaderOf(t, ctx, c, topic, 1); !slices.Equal(p.Replicas, target1) || p.Reassigning() {
			return fmt.Errorf("%s-1 is at %+v, moving to %v", topic, p, target1)
		}
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {1: {}}})
		if err != nil {
			return err
		}
		if len(listed[topic]) != 0 {
			return fmt.Errorf("ListPartitionReassignments still lists %+v", listed[topic])
		}
		return nil
	})

	// Decommission a node holding replicas of the other partitions.
	victim := p0.Replicas[1]
	if victim == leader {
		victim = p0.Replicas[2]
	}
	if victim == spare {
		t.Fatalf("picked the spare node %d", victim)
	}
	out = itest.MustSluicectl(t, c, "node", "decommission", fmt.Sprint(victim), "--timeout", "3m")
	if !strings.Contains(out, fmt.Sprintf("node %d holds no replicas", victim)) {
		t.Fatalf("node decommission said:\n%s", out)
	}
	t.Logf("node decommission:\n%s", out)
	status := itest.MustSluicectl(t, c, "cluster", "status")
	if !strings.Contains(status, "alive,decommissioned") {
		t.Fatalf("cluster status does not show the decommissioned node:\n%s", status)
	}
	tp, err := cluster.NewClient(c.MetadataURLs()).DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range tp.Partitions {
		if slices.Contains(part.Replicas, victim) || len(part.Replicas) != 3 {
			t.Fatalf("partition %d after decommission: %+v", part.ID, part)
		}
		waitReplicaGone(t, c, topic, part.ID, victim)
	}
	// A decommissioned node takes no new replicas: with three nodes left, a
	// topic of replication factor 3 goes on those three.
	itest.CreateTopic(t, ctx, c, "after", 3, 3)
	tp, err = cluster.NewClient(c.MetadataURLs()).DescribeTopic(ctx, "after")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range tp.Partitions {
		if slices.Contains(part.Replicas, victim) {
			t.Fatalf("new partition %d placed on decommissioned node %d: %+v", part.ID, victim, part)
		}
	}

	time.Sleep(time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": reassignment and decommission must not interrupt acks=all producers")
	loadcheck.CheckExactlyOnceInOrder(t, itest.ReadValues(t, ctx, c, topic, partitions), l)
	t.Logf("%d records acknowledged and read back exactly once in order", l.Sent)
}

// waitReplicaGone waits until node no longer reports a replica of the
// partition (topic describe lists what each node reports).
func waitReplicaGone(t *testing.T, c *localcluster.Cluster, topic string, partition, node int32) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() error {
		var d itest.DescribedTopicJSON
		if err := json.Unmarshal([]byte(itest.MustSluicectl(t, c, "topic", "describe", topic, "-o", "json")), &d); err != nil {
			t.Fatal(err)
		}
		for _, r := range d.Replicas {
			if r.Partition == partition && r.Node == node {
				return fmt.Errorf("node %d still reports a replica of %s-%d", node, topic, partition)
			}
		}
		return nil
	})
}

func ids32(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
