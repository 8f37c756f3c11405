package fakecluster

import (
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/libs/protocol"
)

// describeReplicas answers the state of every partition log the node holds
// (of one topic, or of all when the request names none), as a real node's
// DescribeReplicas does: the fake leads every partition it holds, its high
// watermark and flushed offset are the log end, and its size is the bytes of
// the batches it appended.
func (s *Storage) describeReplicas(dec *protocol.Decoder) (protocol.DescribeReplicasResponse, error) {
	var req protocol.DescribeReplicasRequest
	if err := dec.Body(&req); err != nil {
		return protocol.DescribeReplicasResponse{}, protocol.MalformedFrame.Err("%v", err)
	}
	resp := protocol.DescribeReplicasResponse{Replicas: []protocol.ReplicaInfo{}}
	s.mu.Lock()
	for k, l := range s.logs {
		i := strings.LastIndexByte(k, '/')
		topic := k[:i]
		partition, err := strconv.ParseInt(k[i+1:], 10, 32)
		if err != nil || (req.Topic != "" && topic != req.Topic) {
			continue
		}
		var size int64
		for _, b := range l.batches {
			size += int64(len(b))
		}
		resp.Replicas = append(resp.Replicas, protocol.ReplicaInfo{Topic: topic, Partition: int32(partition), Leader: true,
			LogStartOffset: l.start, LogEndOffset: l.end, HighWatermark: l.end, FlushedOffset: l.end, SizeBytes: size})
	}
	s.mu.Unlock()
	sort.Slice(resp.Replicas, func(i, j int) bool {
		a, b := resp.Replicas[i], resp.Replicas[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return resp, nil
}
