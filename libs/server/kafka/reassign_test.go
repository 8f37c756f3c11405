package kafka

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/protocol"
)

// TestPartitionReassignments: moves start and cancel at the controller, one
// refused there answers its code, a replication factor change is refused
// when the request does not allow it; the list shows the partitions moving
// with their adding and removing replicas; a principal that is no admin is
// refused both.
func TestPartitionReassignments(t *testing.T) {
	b, m, a := testBroker(true)
	alter := func(who string, allowRF bool, parts map[string]map[int32][]int32) (*kmsg.AlterPartitionAssignmentsResponse, map[string]int16) {
		t.Helper()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.Version, req.AllowReplicationFactorChange = 1, allowRF
		for _, topic := range []string{"audit", "orders"} {
			ps, ok := parts[topic]
			if !ok {
				continue
			}
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = topic
			for _, id := range []int32{0, 1} {
				if replicas, ok := ps[id]; ok {
					rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
					rp.Partition, rp.Replicas = id, replicas
					rt.Partitions = append(rt.Partitions, rp)
				}
			}
			req.Topics = append(req.Topics, rt)
		}
		reply := b.alterPartitionReassignments(context.Background(), connAs(who), req)
		if reply.Async != nil {
			reply = reply.Async()
		}
		resp := reply.Msg.(*kmsg.AlterPartitionAssignmentsResponse)
		codes := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				codes[rt.Topic+"-"+string(rune('0'+p.Partition))] = p.ErrorCode
			}
		}
		return resp, codes
	}
	_, codes := alter("root", true, map[string]map[int32][]int32{"orders": {0: {2, 3, 4}, 1: nil}, "audit": {0: {2}}})
	if codes["orders-0"] != 0 || codes["orders-1"] != 0 || codes["audit-0"] != int16(protocol.ReassignmentInProgress) {
		t.Fatalf("codes %v", codes)
	}
	if !slices.Equal(a.reassigned, []string{"orders-0:[2 3 4]", "orders-1:cancel"}) {
		t.Fatalf("the controller was asked %v", a.reassigned)
	}
	if _, codes := alter("root", false, map[string]map[int32][]int32{"orders": {0: {2, 3, 4}}}); codes["orders-0"] != int16(protocol.InvalidReplicationFactor) {
		t.Fatalf("three replicas for a partition of two without allowing it: %v", codes)
	}
	if resp, _ := alter("alice", true, map[string]map[int32][]int32{"orders": {0: {2, 3}}}); resp.ErrorCode != int16(protocol.ClusterAuthorizationFailed) {
		t.Fatalf("alice: %d", resp.ErrorCode)
	}

	// orders-1 moving from 2,1 to 1,3: 3 being added, 2 to be removed.
	m.snap.Topics[1].Partitions[1].Replicas = []int32{2, 1, 3}
	m.snap.Topics[1].Partitions[1].TargetReplicas = []int32{1, 3}
	m.snap.Topics[1].Partitions[1].AddingReplicas = []int32{3}
	list := func(who string, topics []kmsg.ListPartitionReassignmentsRequestTopic) *kmsg.ListPartitionReassignmentsResponse {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		req.Topics = topics
		return b.listPartitionReassignments(context.Background(), connAs(who), req).Msg.(*kmsg.ListPartitionReassignmentsResponse)
	}
	resp := list("root", nil)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "orders" || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("moves in progress: %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.Partition != 1 || !slices.Equal(p.Replicas, []int32{2, 1, 3}) || !slices.Equal(p.AddingReplicas, []int32{3}) || !slices.Equal(p.RemovingReplicas, []int32{2}) {
		t.Fatalf("orders-1: %+v", p)
	}
	only := kmsg.NewListPartitionReassignmentsRequestTopic()
	only.Topic, only.Partitions = "orders", []int32{0}
	if resp := list("root", []kmsg.ListPartitionReassignmentsRequestTopic{only}); len(resp.Topics) != 0 {
		t.Fatalf("orders-0 is not moving: %+v", resp.Topics)
	}
	if resp := list("alice", nil); resp.ErrorCode != int16(protocol.ClusterAuthorizationFailed) {
		t.Fatalf("alice listing: %d", resp.ErrorCode)
	}
}
