package kafkaapi

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
)

// listOffsets answers ListOffsets by asking each partition's storage
// leader: earliest (-2), latest (-1, the high watermark, or the last stable
// offset at read_committed), the largest timestamp (-3) or the first offset
// at or after a timestamp.
func (s *Service) listOffsets(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	var asks []func()
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewListOffsetsResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		allowed := s.broker.Describes(c, "ListOffsets", rt.Topic)
		for j, rp := range rt.Partitions {
			p := &out.Partitions[j]
			*p = kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.Offset, p.Timestamp, p.LeaderEpoch = rp.Partition, -1, -1, -1
			if !allowed {
				p.ErrorCode = int16(protocol.TopicAuthorizationFailed)
				continue
			}
			epoch := rp.CurrentLeaderEpoch
			if r.Version < 4 {
				epoch = -1
			}
			asks = append(asks, func() {
				if rt.Topic == groups.OffsetsLogTopic {
					p.Offset, p.Timestamp, p.ErrorCode = s.offsetsLogOffset(ctx, c, rp.Partition, rp.Timestamp)
					p.LeaderEpoch = 0
					return
				}
				var lr protocol.ListOffsetsResponse
				req := &protocol.ListOffsetsRequest{Topic: rt.Topic, Partition: rp.Partition, Timestamp: rp.Timestamp, CurrentLeaderEpoch: epoch,
					Isolation: r.IsolationLevel}
				if p.ErrorCode = s.atLeader(ctx, rt.Topic, rp.Partition, protocol.APIListOffsets, req, &lr); p.ErrorCode != 0 {
					return
				}
				p.Offset, p.Timestamp, p.LeaderEpoch = lr.Offset, lr.Timestamp, lr.LeaderEpoch
			})
		}
	}
	runAll(asks)
	return kafka.Reply{Msg: resp}
}

// offsetForLeaderEpoch answers OffsetForLeaderEpoch (a consumer checking
// its position after a leader change, KIP-320) from the storage leaders.
func (s *Service) offsetForLeaderEpoch(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	var asks []func()
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewOffsetForLeaderEpochResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		allowed := s.broker.Describes(c, "OffsetForLeaderEpoch", rt.Topic)
		for j, rp := range rt.Partitions {
			p := &out.Partitions[j]
			*p = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, -1, -1
			if !allowed {
				p.ErrorCode = int16(protocol.TopicAuthorizationFailed)
				continue
			}
			asks = append(asks, func() {
				if rt.Topic == groups.OffsetsLogTopic {
					p.LeaderEpoch, p.EndOffset, p.ErrorCode = s.offsetsLogEpochEnd(ctx, c, rp.Partition)
					return
				}
				var er protocol.OffsetForLeaderEpochResponse
				req := &protocol.OffsetForLeaderEpochRequest{Topic: rt.Topic, Partition: rp.Partition, CurrentLeaderEpoch: rp.CurrentLeaderEpoch, LeaderEpoch: rp.LeaderEpoch}
				if p.ErrorCode = s.atLeader(ctx, rt.Topic, rp.Partition, protocol.APIOffsetForLeaderEpoch, req, &er); p.ErrorCode != 0 {
					return
				}
				p.LeaderEpoch, p.EndOffset = er.LeaderEpoch, er.EndOffset
			})
		}
	}
	runAll(asks)
	return kafka.Reply{Msg: resp}
}

// deleteRecords answers DeleteRecords (admins only): each partition's
// storage leader moves its log start offset; retention then deletes the
// whole segments below it.
func (s *Service) deleteRecords(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	if r.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	var asks []func()
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewDeleteRecordsResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			p := &out.Partitions[j]
			*p = kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.LowWatermark = rp.Partition, -1
			if !s.broker.Allowed(c, cluster.OpDelete, rt.Topic) { // an admin, or a delete ACL
				p.ErrorCode = int16(protocol.TopicAuthorizationFailed)
				continue
			}
			asks = append(asks, func() {
				var dr protocol.DeleteRecordsResponse
				req := &protocol.DeleteRecordsRequest{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset}
				if p.ErrorCode = s.atLeader(ctx, rt.Topic, rp.Partition, protocol.APIDeleteRecords, req, &dr); p.ErrorCode != 0 {
					return
				}
				p.LowWatermark = dr.LowWatermark
				c.Log().Info("kafka records deleted", "topic", rt.Topic, "partition", rp.Partition, "log_start_offset", dr.LowWatermark)
			})
		}
	}
	runAll(asks)
	return kafka.Reply{Msg: resp}
}

// atLeader sends one storage request to a partition's leader and decodes
// its answer into resp; it returns the Kafka code of a failure, 0 when it
// worked.
func (s *Service) atLeader(ctx context.Context, topic string, partition int32, api protocol.APIKey, req, resp protocol.Body) int16 {
	res, err := s.fetcher.AtLeader(ctx, topic, partition, api, req, resp)
	res.Release()
	return protocol.KafkaOf(err, protocol.DataAnswer)
}
