package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// maxDescribedPartitions bounds the partitions one DescribeTopicPartitions
// answer holds (Kafka's max.request.partition.size.limit).
const maxDescribedPartitions = 2000

// describeTopicPartitions answers DescribeTopicPartitions (KIP-966's paged
// Metadata, which the Java admin client's describeTopics uses): the topics
// asked for, or every topic the principal may describe, by name, with the
// partitions as Metadata shows them, at most ResponsePartitionLimit
// partitions (2000 at most) from the cursor on, and the cursor to go on
// from. A cursor naming a topic that was not asked for is INVALID_REQUEST
// on every topic asked for, as in Kafka.
func (b *Broker) describeTopicPartitions(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeTopicPartitionsRequest)
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	failAll := func(code protocol.Code) Reply {
		for _, rt := range r.Topics {
			out := kmsg.NewDescribeTopicPartitionsResponseTopic()
			out.Topic, out.ErrorCode = kmsg.StringPtr(rt.Topic), int16(code)
			resp.Topics = append(resp.Topics, out)
		}
		return Reply{Msg: resp}
	}
	snap := b.Snapshot(ctx)
	if snap == nil {
		return failAll(protocol.LeaderNotAvailable)
	}
	w := b.who(c, snap)
	names := describedTopics(snap, w, r)
	from, fromPartition := "", int32(0)
	if cur := r.Cursor; cur != nil {
		if cur.Partition < 0 || len(r.Topics) > 0 && !slices.Contains(names, cur.Topic) {
			return failAll(protocol.InvalidRequest)
		}
		from, fromPartition = cur.Topic, cur.Partition
	}
	left := r.ResponsePartitionLimit
	if left <= 0 || left > maxDescribedPartitions {
		left = maxDescribedPartitions
	}
	for i, name := range names {
		if name < from {
			continue
		}
		out := kmsg.NewDescribeTopicPartitionsResponseTopic()
		out.Topic = kmsg.StringPtr(name)
		mt, ok := b.kafkaTopic(snap, name)
		switch {
		case !w.describe(name):
			out.ErrorCode = b.denied(c, "DescribeTopicPartitions", name)
		case !ok:
			out.ErrorCode = int16(protocol.UnknownTopicOrPartition)
		default:
			out.TopicID, out.IsInternal, out.AuthorizedOperations = mt.TopicID, mt.IsInternal, w.topicOps(name)
			for _, mp := range mt.Partitions {
				if name == from && mp.Partition < fromPartition {
					continue
				}
				if left == 0 {
					resp.Topics = append(resp.Topics, out)
					resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: mp.Partition}
					return Reply{Msg: resp}
				}
				left--
				out.Partitions = append(out.Partitions, describedPartition(mp))
			}
		}
		resp.Topics = append(resp.Topics, out)
		if left == 0 && i+1 < len(names) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: names[i+1], Partition: 0}
			return Reply{Msg: resp}
		}
	}
	return Reply{Msg: resp}
}

// describedTopics are the names of the topics a DescribeTopicPartitions
// request asks for, sorted: those it names, or every topic the principal
// may describe (the offsets log's included).
func describedTopics(snap *cluster.Snapshot, w who, r *kmsg.DescribeTopicPartitionsRequest) []string {
	var names []string
	for _, rt := range r.Topics {
		names = append(names, rt.Topic)
	}
	if len(names) == 0 {
		for i := range snap.Topics {
			if w.describe(snap.Topics[i].Name) {
				names = append(names, snap.Topics[i].Name)
			}
		}
		if _, listed := offsetsLogMetadata(snap); listed && w.describe(groups.OffsetsLogTopic) {
			names = append(names, groups.OffsetsLogTopic)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// describedPartition is a partition's answer as its metadata has it.
func describedPartition(mp kmsg.MetadataResponseTopicPartition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	p.ErrorCode, p.Partition, p.LeaderID, p.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
	p.Replicas, p.ISR, p.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
	return p
}

// describeCluster answers DescribeCluster (the Java admin client's view of
// the brokers).
func (b *Broker) describeCluster(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType = 1 // brokers
	resp.ControllerID = -1
	resp.ClusterAuthorizedOperations = opsNotRequested
	if r.Version >= 1 && r.EndpointType != 1 {
		resp.ErrorCode = int16(protocol.UnsupportedEndpointType)
		msg := "only the brokers endpoint type (1) is served"
		resp.ErrorMessage = &msg
		return Reply{Msg: resp}
	}
	snap := b.Snapshot(ctx)
	if snap == nil {
		resp.ErrorCode = int16(protocol.BrokerNotAvailable)
		return Reply{Msg: resp}
	}
	resp.ClusterID, resp.ControllerID = snap.ClusterID, controllerID(snap)
	for _, br := range Brokers(snap) {
		d := kmsg.NewDescribeClusterResponseBroker()
		d.NodeID, d.Host, d.Port, d.Rack = br.NodeID, br.Host, br.Port, br.Rack
		resp.Brokers = append(resp.Brokers, d)
	}
	if r.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.who(c, snap).clusterOps()
	}
	return Reply{Msg: resp}
}
