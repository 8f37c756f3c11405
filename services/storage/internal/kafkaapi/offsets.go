package kafkaapi

import (
	"context"
	"github.com/sluicemq/sluice/libs/cluster"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
)

// listOffsets answers ListOffsets for the partitions this node leads.
func (s *Service) listOffsets(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	snap := s.model.Snapshot()
	for _, rt := range r.Topics {
		out := kmsg.NewListOffsetsResponseTopic()
		out.Topic = rt.Topic
		allowed := s.broker.Describes(c, "ListOffsets", rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.Offset, p.Timestamp, p.LeaderEpoch = rp.Partition, -1, -1, -1
			epoch := rp.CurrentLeaderEpoch
			if r.Version < 4 {
				epoch = -1
			}
			if !allowed {
				p.ErrorCode = int16(protocol.TopicAuthorizationFailed)
			} else if rep, code := s.leader(snap, rt.Topic, rp.Partition, epoch); code != 0 {
				p.ErrorCode = code
			} else if lr, err := s.remote.ListOffset(ctx, rep, rp.Timestamp, r.IsolationLevel); err != nil {
				p.ErrorCode = codeOf(err)
			} else {
				p.Offset, p.Timestamp, p.LeaderEpoch = lr.Offset, lr.Timestamp, lr.LeaderEpoch
			}
			out.Partitions = append(out.Partitions, p)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return kafka.Reply{Msg: resp}
}

// offsetForLeaderEpoch answers where an epoch ends in the logs this node
// leads (KIP-320: a consumer checking its position after a leader change).
func (s *Service) offsetForLeaderEpoch(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	snap := s.model.Snapshot()
	for _, rt := range r.Topics {
		out := kmsg.NewOffsetForLeaderEpochResponseTopic()
		out.Topic = rt.Topic
		allowed := s.broker.Describes(c, "OffsetForLeaderEpoch", rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, -1, -1
			if !allowed {
				p.ErrorCode = int16(protocol.TopicAuthorizationFailed)
			} else if rep, code := s.leader(snap, rt.Topic, rp.Partition, rp.CurrentLeaderEpoch); code != 0 {
				p.ErrorCode = code
			} else {
				p.EndOffset, p.LeaderEpoch = rep.Log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			out.Partitions = append(out.Partitions, p)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return kafka.Reply{Msg: resp}
}

// describeLogDirs answers DescribeLogDirs: the node's data directory with
// the size of each replica it holds (admins only).
func (s *Service) describeLogDirs(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	if !s.broker.OnCluster(c, "DescribeLogDirs", cluster.OpDescribe) {
		resp.ErrorCode = int16(protocol.ClusterAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	want := map[string]map[int32]bool{}
	for _, t := range r.Topics {
		want[t.Topic] = map[int32]bool{}
		for _, p := range t.Partitions {
			want[t.Topic][p] = true
		}
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = filepath.Clean(s.mgr.DataDir())
	dir.TotalBytes, dir.UsableBytes = -1, s.mgr.Space().Free()
	byTopic := map[string]int{}
	for _, rep := range s.mgr.Replicas() {
		if r.Topics != nil && !want[rep.Key.Topic][rep.Key.Partition] {
			continue
		}
		i, ok := byTopic[rep.Key.Topic]
		if !ok {
			i = len(dir.Topics)
			byTopic[rep.Key.Topic] = i
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = rep.Key.Topic
			dir.Topics = append(dir.Topics, t)
		}
		p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		p.Partition, p.Size = rep.Key.Partition, rep.Log.Size()
		p.OffsetLag = max(rep.Log.EndOffset()-rep.HighWatermark(), 0)
		dir.Topics[i].Partitions = append(dir.Topics[i].Partitions, p)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return kafka.Reply{Msg: resp}
}
