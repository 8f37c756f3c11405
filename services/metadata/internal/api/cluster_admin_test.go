package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

func partOf(_ *cluster.Partition, err error) error { return err }

// TestReassignmentRoutes drives the reassignment and decommission routes
// through a follower (relayed to the leader) and checks each answer's code.
func TestReassignmentRoutes(t *testing.T) {
	ms := startCluster(t, 3, clusterOpts{})
	f := follower(t, ms)
	c := client(f)
	ctx := context.Background()
	registerNodes(t, c, 4)
	tp, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	before := tp.Partitions[0].Replicas
	spare := int32(10 - before[0] - before[1] - before[2]) // 1+2+3+4 = 10
	target := []int32{spare, before[1], before[2]}

	wantCode(t, partOf(c.ReassignPartition(ctx, "t", 0, before[:2])), protocol.InvalidReplicaAssignment)
	wantCode(t, partOf(c.ReassignPartition(ctx, "t", 0, []int32{1, 2, 7})), protocol.InvalidReplicaAssignment)
	wantCode(t, partOf(c.ReassignPartition(ctx, "t", 3, target)), protocol.UnknownTopicOrPartition)
	wantCode(t, partOf(c.ReassignPartition(ctx, "nope", 0, target)), protocol.UnknownTopicOrPartition)
	wantCode(t, partOf(c.CancelReassignment(ctx, "t", 0)), protocol.NoReassignmentInProgress)
	p, err := c.ReassignPartition(ctx, "t", 0, target)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.TargetReplicas, target) || !slices.Equal(p.AddingReplicas, []int32{spare}) || !slices.Equal(p.Replicas, append(slices.Clone(before), spare)) {
		t.Fatalf("started: %+v", p)
	}
	wantCode(t, partOf(c.ReassignPartition(ctx, "t", 0, before)), protocol.ReassignmentInProgress)
	p, err = c.CancelReassignment(ctx, "t", 0)
	if err != nil || !slices.Equal(p.Replicas, before) || p.Reassigning() {
		t.Fatalf("cancel: %+v, %v", p, err)
	}
	if status, eb := rawDo(t, http.MethodPost, "http://"+f.http+"/v1/topics/t/partitions/x/reassignment", []byte(`{}`)); status != http.StatusNotFound || eb.ErrorCode != int16(protocol.UnknownTopicOrPartition) {
		t.Fatalf("bad partition number: %d %+v", status, eb)
	}
	if status, _ := rawDo(t, http.MethodGet, "http://"+f.http+"/v1/topics/t/partitions/0/reassignment", nil); status != http.StatusMethodNotAllowed {
		t.Fatalf("GET reassignment: %d", status)
	}

	// Four nodes, replication factor 3: one node can leave.
	r, err := c.DecommissionNode(ctx, before[0])
	if err != nil || len(r.Started) != 1 || r.Replicas != 1 || slices.Contains(r.Started[0].Replicas, before[0]) {
		t.Fatalf("decommission: %+v, %v", r, err)
	}
	if _, err := c.DecommissionNode(ctx, 9); protocol.CodeOf(err) != protocol.UnknownNode {
		t.Fatalf("decommission of an unknown node: %v", err)
	}
	if status, _ := rawDo(t, http.MethodPost, "http://"+f.http+"/v1/nodes/abc/decommission", nil); status != http.StatusBadRequest {
		t.Fatalf("bad node id: %d", status)
	}
	if err := c.RecommissionNode(ctx, before[0]); err != nil {
		t.Fatal(err)
	}
	snap, err := client(leader(ms)).Snapshot(ctx) // the leader has applied every change it answered
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := snap.Node(before[0]); n.Decommissioned {
		t.Fatal("recommission did not lift the mark")
	}
}

// TestQuotaRoute: PUT /v1/quotas through a follower sets, replaces and (with
// both rates 0) removes a quota, which the cluster snapshot then carries; a
// negative rate is refused.
func TestQuotaRoute(t *testing.T) {
	ms := startCluster(t, 3, clusterOpts{})
	f := follower(t, ms)
	c := client(f)
	ctx := context.Background()
	for _, q := range []cluster.Quota{{ClientID: "etl", ProduceBytesPerSec: 5}, {ClientID: "", FetchBytesPerSec: 9}, {ClientID: "etl", ProduceBytesPerSec: 6}} {
		if err := c.SetQuota(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, c.SetQuota(ctx, cluster.Quota{ClientID: "x", FetchBytesPerSec: -1}), protocol.InvalidRequest)
	read := client(leader(ms)) // the leader has applied every change it answered
	snap, err := read.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []cluster.Quota{{ClientID: "", FetchBytesPerSec: 9}, {ClientID: "etl", ProduceBytesPerSec: 6}}
	if !slices.Equal(snap.Quotas, want) {
		t.Fatalf("quotas %+v, want %+v", snap.Quotas, want)
	}
	if err := c.SetQuota(ctx, cluster.Quota{ClientID: "etl"}); err != nil {
		t.Fatal(err)
	}
	if snap, _ := read.Snapshot(ctx); len(snap.Quotas) != 1 {
		t.Fatalf("after removing etl's quota: %+v", snap.Quotas)
	}
}

// TestPrincipalNames: a principal's name may not have surrounding spaces or
// control characters (names travel in the relay header); a plain one is
// kept.
func TestPrincipalNames(t *testing.T) {
	ms := startCluster(t, 1, clusterOpts{})
	testkit.WaitFor(t, 10*time.Second, "a leader", func() bool { return leader(ms) != nil })
	c := client(leader(ms))
	ctx := context.Background()
	hash := strings.Repeat("ab", 32)
	for _, name := range []string{" bob", "bob ", "bo\nb", "\t"} {
		wantCode(t, c.SetPrincipal(ctx, cluster.Principal{Name: name, TokenSHA256: hash}, false), protocol.InvalidRequest)
	}
	if err := c.SetPrincipal(ctx, cluster.Principal{Name: "bob smith", TokenSHA256: hash}, false); err != nil {
		t.Fatal(err)
	}
	if snap, err := c.Snapshot(ctx); err != nil || len(snap.Principals) != 1 || snap.Principals[0].Name != "bob smith" {
		t.Fatalf("principals %+v, %v", snap, err)
	}
}
