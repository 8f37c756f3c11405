package kafkaapi

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// TestListOffsetsAsksEachLeader: ListOffsets answers each partition from its
// storage leader (earliest, latest, a log start moved), an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION, and a leader that cannot be reached
// NOT_LEADER_OR_FOLLOWER, which Kafka clients refresh their metadata on.
func TestListOffsetsAsksEachLeader(t *testing.T) {
	e := newKafkaEnv(t, 2)
	e.addTopic(t, "t", 1, 2)
	if _, err := e.nodes[0].Append("t", 0, record.Record{Value: []byte("a")}, record.Record{Value: []byte("b")}, record.Record{Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	e.nodes[0].SetLogStart("t", 0, 1)
	e.nodes[1].Close() // t-1's leader is gone
	ask := func(topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = partition, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := e.request(t, req).(*kmsg.ListOffsetsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets of %s-%d: %+v", topic, partition, resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := ask("t", 0, -1); p.ErrorCode != 0 || p.Offset != 3 {
		t.Errorf("latest of t-0: offset %d, error %d; want 3", p.Offset, p.ErrorCode)
	}
	if p := ask("t", 0, -2); p.ErrorCode != 0 || p.Offset != 1 {
		t.Errorf("earliest of t-0: offset %d, error %d; want the log start, 1", p.Offset, p.ErrorCode)
	}
	if p := ask("nope", 0, -1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.Offset != -1 {
		t.Errorf("an unknown topic: offset %d, error %d", p.Offset, p.ErrorCode)
	}
	if p := ask("t", 1, -1); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("a leader that is down: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
}

// TestProduceAndFetchThroughTheListener: a produce's records reach the
// partition's storage leader with the offsets it gives, a fetch reads them
// back, a storage refusal keeps its code, and a produce to an unknown
// topic is UNKNOWN_TOPIC_OR_PARTITION.
func TestProduceAndFetchThroughTheListener(t *testing.T) {
	e := newKafkaEnv(t, 1)
	id := e.addTopic(t, "t", 1)
	produce := func(topic string, values ...string) kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = testkit.Batch(t, values...)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := e.request(t, req).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0]
	}
	if p := produce("t", "a", "b"); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first produce: base offset %d, error %d", p.BaseOffset, p.ErrorCode)
	}
	if p := produce("t", "c"); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("second produce: base offset %d, error %d", p.BaseOffset, p.ErrorCode)
	}
	if got := len(e.nodes[0].Appended("t", 0)); got != 2 {
		t.Fatalf("the leader took %d batches, want 2", got)
	}
	if p := produce("nope", "x"); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("a produce to an unknown topic: error %d", p.ErrorCode)
	}
	e.nodes[0].SetReject(func(*protocol.ProduceRequest, int) error {
		return protocol.InvalidRecord.Err("refused by the test")
	})
	if p := produce("t", "d"); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("a produce the leader refuses: error %d, want INVALID_RECORD", p.ErrorCode)
	}

	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 0, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "t", id // v13 and up name topics by id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	fp := e.request(t, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	values := testkit.Values(t, fp.RecordBatches)
	if fp.ErrorCode != 0 || fp.HighWatermark != 3 || len(values) != 3 || values[0] != "a" || values[2] != "c" {
		t.Fatalf("fetch of t-0: error %d, high watermark %d, values %v", fp.ErrorCode, fp.HighWatermark, values)
	}
}

// TestCoordinatorAnswersWhenTheOffsetsServiceIsDown: group answers give
// COORDINATOR_NOT_AVAILABLE for an offsets service that cannot be reached,
// so a Kafka client looks its coordinator up again (the coordinator row of
// the code table), and the offsets service's own codes as they are.
func TestCoordinatorAnswersWhenTheOffsetsServiceIsDown(t *testing.T) {
	e := newKafkaEnv(t, 1)
	fetch := func() kmsg.OffsetFetchResponseGroup {
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		req.Groups = append(req.Groups, g)
		return e.request(t, req).(*kmsg.OffsetFetchResponse).Groups[0]
	}
	if g := fetch(); g.ErrorCode != 0 {
		t.Fatalf("OffsetFetch of g: error %d", g.ErrorCode)
	}
	e.offsets.SetDown(true) // its Raft group has no leader
	if g := fetch(); g.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("OffsetFetch with the offsets service leaderless: error %d, want COORDINATOR_NOT_AVAILABLE", g.ErrorCode)
	}
	e.offsets.SetDown(false)
	e.offsets.SetAnswer(409, `{"error_code":25,"error":"unknown member"}`)
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "g", "m", 1
	if code := e.request(t, req).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("Heartbeat answered UNKNOWN_MEMBER_ID by the offsets service: error %d", code)
	}
	e.offsets.Close() // cannot be reached at all
	if g := fetch(); g.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("OffsetFetch with the offsets service unreachable: error %d, want COORDINATOR_NOT_AVAILABLE", g.ErrorCode)
	}
}
