package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/shares"
)

// The share groups' offset admin APIs (KIP-932: DescribeShareGroupOffsets,
// AlterShareGroupOffsets, DeleteShareGroupOffsets) over the offsets
// service's share groups: a share-partition's start offset is the group's
// position (every record before it acknowledged or archived). Altering or
// deleting needs the group without members: none here (Kafka share
// consumers the frontend coordinates) and no record of the topic under lock
// at the offsets service (NON_EMPTY_GROUP otherwise), as Kafka needs the
// group empty. Describing needs describe on the group and its topics;
// altering and deleting need the group (UsesGroups) and consume on the
// topics, as Kafka asks DESCRIBE and READ; the offsets service checks the
// same.

// describeShareGroupOffsets answers DescribeShareGroupOffsets: each
// partition's start offset and (v1) lag; a partition the group has not
// read yet is -1, as in Kafka.
func (s *Service) describeShareGroupOffsets(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := kmsg.NewPtrDescribeShareGroupOffsetsResponse()
	client := s.sharesFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		for _, rg := range r.Groups {
			out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			out.GroupID = rg.GroupID
			if !s.broker.DescribesGroup(c, "DescribeShareGroupOffsets", rg.GroupID) {
				out.ErrorCode = int16(protocol.GroupAuthorizationFailed)
			} else if d, err := client.Describe(c.Context(), rg.GroupID); err != nil {
				out.ErrorCode, out.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
			} else {
				out.Topics = s.shareGroupOffsets(c, d, rg.Topics)
			}
			resp.Groups = append(resp.Groups, out)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// shareGroupOffsets is a described share group's part of the answer: the
// topics asked for, or (nil) every topic the group holds state of, each
// with the partitions asked for or (nil) those the group holds.
func (s *Service) shareGroupOffsets(c *kafka.Conn, d *shares.Description, asked []kmsg.DescribeShareGroupOffsetsRequestGroupTopic) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	held := map[groups.TP]shares.PartitionState{}
	byTopic := map[string][]int32{} // the partitions the group holds, by topic
	var topics []string             // in the group's order
	for _, p := range d.Partitions {
		if _, ok := byTopic[p.Topic]; !ok {
			topics = append(topics, p.Topic)
		}
		byTopic[p.Topic] = append(byTopic[p.Topic], p.Partition)
		held[groups.TP{Topic: p.Topic, Partition: p.Partition}] = p
	}
	if asked == nil {
		for _, t := range topics {
			rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			rt.Topic = t
			asked = append(asked, rt)
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, rt := range asked {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = rt.Topic
		t, known := s.topic(rt.Topic)
		if known {
			ot.TopicID = kafka.TopicID(t)
		}
		parts := rt.Partitions
		if parts == nil {
			parts = byTopic[rt.Topic]
		}
		topicAllowed := s.broker.Describes(c, "DescribeShareGroupOffsets", rt.Topic)
		for _, pid := range parts {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition, op.StartOffset, op.LeaderEpoch, op.Lag = pid, -1, -1, -1
			switch st, ok := held[groups.TP{Topic: rt.Topic, Partition: pid}]; {
			case !topicAllowed:
				op.ErrorCode = int16(protocol.TopicAuthorizationFailed)
			case !known || pid < 0 || int(pid) >= len(t.Partitions):
				op.ErrorCode = int16(protocol.UnknownTopicOrPartition)
			case ok:
				op.StartOffset, op.Lag = st.StartOffset, st.Lag
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}

// topic is a topic of the frontend's cluster model.
func (s *Service) topic(name string) (*cluster.Topic, bool) {
	snap := s.cache.Snapshot()
	if snap == nil {
		return nil, false
	}
	return snap.Topic(name)
}

// shareGroupAlterable is the refusal of an alteration of a group's offsets
// by api: the principal may not use groups, or the group has Kafka share
// consumers this frontend coordinates; nil when it may go on.
func (s *Service) shareGroupAlterable(c *kafka.Conn, api, group string) error {
	if !s.broker.UsesGroups(c, api, group) {
		return protocol.GroupAuthorizationFailed.Err("%s of share group %s", api, group)
	}
	s.share.mu.Lock()
	defer s.share.mu.Unlock()
	for k := range s.share.members {
		if k.group == group {
			return protocol.NonEmptyGroup.Err("share group %s has members; stop them before altering its offsets", group)
		}
	}
	return nil
}

// alterShareGroupOffsets answers AlterShareGroupOffsets: each topic's
// partitions move to their start offsets, one reset at the offsets service
// per offset asked for.
func (s *Service) alterShareGroupOffsets(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	if err := s.shareGroupAlterable(c, "AlterShareGroupOffsets", r.GroupID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
		return kafka.Reply{Msg: resp}
	}
	client := s.sharesFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		for _, rt := range r.Topics {
			ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			ot.Topic = rt.Topic
			t, known := s.topic(rt.Topic)
			if known {
				ot.TopicID = kafka.TopicID(t)
			}
			allowed := s.broker.Allowed(c, cluster.OpConsume, rt.Topic)
			byOffset := map[int64][]int32{} // the partitions each offset is asked for
			var offsets []int64
			for _, rp := range rt.Partitions {
				op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				op.Partition = rp.Partition
				switch {
				case !allowed:
					op.ErrorCode = int16(protocol.TopicAuthorizationFailed)
				case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
					op.ErrorCode = int16(protocol.UnknownTopicOrPartition)
				case rp.StartOffset < 0:
					op.ErrorCode = int16(protocol.InvalidRequest)
					op.ErrorMessage = kmsg.StringPtr("a start offset must not be negative")
				default:
					if _, ok := byOffset[rp.StartOffset]; !ok {
						offsets = append(offsets, rp.StartOffset)
					}
					byOffset[rp.StartOffset] = append(byOffset[rp.StartOffset], rp.Partition)
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			failed := map[int32]error{}
			for _, off := range offsets {
				_, err := client.Reset(c.Context(), r.GroupID, groups.ResetRequest{Topic: rt.Topic, Partitions: byOffset[off], To: "offset", Offset: off})
				for _, p := range byOffset[off] {
					if err != nil {
						failed[p] = err
					}
				}
				if err == nil {
					c.Log().Info("kafka share group offsets altered", "group", r.GroupID, "topic", rt.Topic, "partitions", byOffset[off], "start_offset", off)
				}
			}
			for i := range ot.Partitions {
				if err := failed[ot.Partitions[i].Partition]; err != nil {
					ot.Partitions[i].ErrorCode, ot.Partitions[i].ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
				}
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// deleteShareGroupOffsets answers DeleteShareGroupOffsets: the group's
// state of each topic is removed; the topic's partitions start again as the
// group's share.auto.offset.reset says when next read.
func (s *Service) deleteShareGroupOffsets(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	if err := s.shareGroupAlterable(c, "DeleteShareGroupOffsets", r.GroupID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
		return kafka.Reply{Msg: resp}
	}
	client := s.sharesFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		for _, rt := range r.Topics {
			ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			ot.Topic = rt.Topic
			t, known := s.topic(rt.Topic)
			switch {
			case !s.broker.Allowed(c, cluster.OpConsume, rt.Topic):
				ot.ErrorCode = int16(protocol.TopicAuthorizationFailed)
			case !known:
				ot.ErrorCode = int16(protocol.UnknownTopicOrPartition)
			default:
				ot.TopicID = kafka.TopicID(t)
				if err := client.DeleteOffsets(c.Context(), r.GroupID, rt.Topic); err != nil {
					if protocol.CodeOf(err) == protocol.GroupIDNotFound {
						resp.ErrorCode, resp.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
						return kafka.Reply{Msg: resp}
					}
					ot.ErrorCode, ot.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
				} else {
					c.Log().Info("kafka share group offsets deleted", "group", r.GroupID, "topic", rt.Topic)
				}
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return kafka.Reply{Msg: resp}
	}}
}
