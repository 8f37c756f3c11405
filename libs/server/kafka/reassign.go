package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Partition reassignments (KIP-455) map onto the metadata controller's:
// AlterPartitionReassignments starts moving a partition to a replica list
// (of storage node ids, the replica ids Metadata lists) or, with a null
// list, cancels its move; ListPartitionReassignments shows the moves in
// progress. Unlike Kafka, a partition already moving is not given a new
// target: it answers REASSIGNMENT_IN_PROGRESS until the move completes or
// is cancelled. Both need an admin principal (Kafka asks for ALTER or
// DESCRIBE on the cluster).

// alterPartitionReassignments answers AlterPartitionReassignments.
func (b *Broker) alterPartitionReassignments(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	resp.AllowReplicationFactorChange = r.AllowReplicationFactorChange
	if !b.OnCluster(c, "AlterPartitionReassignments", cluster.OpAlter) {
		resp.ErrorCode = int16(protocol.ClusterAuthorizationFailed)
		return Reply{Msg: resp}
	}
	keepRF := r.Version >= 1 && !r.AllowReplicationFactorChange
	return Reply{Async: func() Reply {
		actx, cancel := b.adminContext(ctx, r.TimeoutMillis)
		defer cancel()
		snap := b.Snapshot(actx)
		changed := false
		for _, rt := range r.Topics {
			out := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			out.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				p.Partition = rp.Partition
				err := b.reassign(actx, snap, rt.Topic, rp.Partition, rp.Replicas, keepRF)
				p.ErrorCode, p.ErrorMessage = errorFields(err)
				if err == nil {
					changed = true
					c.Log().Info("kafka partition reassignment", "topic", rt.Topic, "partition", rp.Partition, "replicas", rp.Replicas, "cancel", rp.Replicas == nil)
				}
				out.Partitions = append(out.Partitions, p)
			}
			resp.Topics = append(resp.Topics, out)
		}
		if changed {
			_, _ = b.model.Refresh(ctx)
		}
		return Reply{Msg: resp}
	}}
}

// reassign starts (replicas) or cancels (nil) one partition's move.
func (b *Broker) reassign(ctx context.Context, snap *cluster.Snapshot, topic string, partition int32, replicas []int32, keepRF bool) error {
	if replicas == nil {
		_, err := b.admin.CancelReassignment(ctx, topic, partition)
		return err
	}
	if keepRF && snap != nil {
		if t, ok := snap.Topic(topic); ok && partition >= 0 && int(partition) < len(t.Partitions) {
			p := t.Partitions[partition]
			have := len(p.Replicas) - len(p.AddingReplicas)
			if len(replicas) != have {
				return protocol.InvalidReplicationFactor.Err("%d replicas for %s-%d, which has %d, and the request does not allow changing the replication factor",
					len(replicas), topic, partition, have)
			}
		}
	}
	_, err := b.admin.ReassignPartition(ctx, topic, partition, replicas)
	return err
}

// listPartitionReassignments answers ListPartitionReassignments: the
// partitions asked for (every partition when none are) that are moving.
func (b *Broker) listPartitionReassignments(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.ListPartitionReassignmentsRequest)
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	snap, code := b.clusterSnapshot(ctx, c, "ListPartitionReassignments", cluster.OpDescribe)
	if snap == nil {
		resp.ErrorCode = int16(code)
		return Reply{Msg: resp}
	}
	add := func(t *cluster.Topic, ids []int32) {
		out := kmsg.NewListPartitionReassignmentsResponseTopic()
		out.Topic = t.Name
		for _, p := range t.Partitions {
			if !p.Reassigning() || ids != nil && !slices.Contains(ids, p.ID) {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition, rp.Replicas = p.ID, slices.Clone(p.Replicas)
			rp.AddingReplicas, rp.RemovingReplicas = slices.Clone(p.AddingReplicas), p.RemovingReplicas()
			if rp.AddingReplicas == nil {
				rp.AddingReplicas = []int32{}
			}
			if rp.RemovingReplicas == nil {
				rp.RemovingReplicas = []int32{}
			}
			out.Partitions = append(out.Partitions, rp)
		}
		if len(out.Partitions) > 0 {
			resp.Topics = append(resp.Topics, out)
		}
	}
	if r.Topics == nil {
		for i := range snap.Topics {
			add(&snap.Topics[i], nil)
		}
		return Reply{Msg: resp}
	}
	for _, rt := range r.Topics {
		if t, ok := snap.Topic(rt.Topic); ok {
			add(t, rt.Partitions)
		}
	}
	return Reply{Msg: resp}
}
