package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/record"
)

// TestOffsetsLogBatches: change-log records become Kafka's
// __consumer_offsets records at their positions, decodable with Kafka's
// own schemas (kmsg): a commit with its leader epoch, a classic group with
// its members' bytes, a consumer-protocol group with subscriptions and
// assignments in the consumer protocol's encoding; maxBytes stops the
// batches, the first always included.
func TestOffsetsLogBatches(t *testing.T) {
	epoch := int32(4)
	recs := []groups.OffsetsLogRecord{
		{Position: 1<<20 | 1, Group: "g", Offset: &groups.Committed{Topic: "t", Partition: 2, Offset: 99, Metadata: "m", CommitTimeMs: 1234, LeaderEpoch: &epoch}},
		{Position: 5 << 20, Group: "classic", State: &groups.GroupState{Protocol: groups.ProtocolClassic, ProtocolType: "connect", ProtocolName: "sessioned",
			Epoch: 7, Leader: "a", Members: []groups.GroupStateMember{{MemberID: "a", InstanceID: "i", Metadata: []byte{1, 2}, AssignmentBytes: []byte{3}}}}},
		{Position: 9 << 20, Group: "modern", State: &groups.GroupState{Assignor: "sticky", Epoch: 3,
			Members: []groups.GroupStateMember{{MemberID: "m", Topics: []string{"t"}, Assignment: []groups.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}}}},
	}
	data, err := OffsetsLogBatches(recs, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	it := record.NewIterator(data)
	var got []record.Record
	for it.Next() {
		r := *it.Record()
		r.Key, r.Value = append([]byte(nil), r.Key...), append([]byte(nil), r.Value...)
		got = append(got, r)
	}
	if it.Err() != nil || len(got) != 3 {
		t.Fatalf("%d records, %v", len(got), it.Err())
	}
	for i, r := range got {
		if r.Offset != recs[i].Position {
			t.Fatalf("record %d at offset %d, want %d", i, r.Offset, recs[i].Position)
		}
	}
	var ck kmsg.OffsetCommitKey
	var cv kmsg.OffsetCommitValue
	if ck.ReadFrom(got[0].Key) != nil || cv.ReadFrom(got[0].Value) != nil || ck.Version != 1 || ck.Group != "g" || ck.Topic != "t" || ck.Partition != 2 ||
		cv.Version != 3 || cv.Offset != 99 || cv.LeaderEpoch != 4 || cv.Metadata != "m" || cv.CommitTimestamp != 1234 || got[0].Timestamp != 1234 {
		t.Fatalf("commit: %+v %+v", ck, cv)
	}
	var gk kmsg.GroupMetadataKey
	var gv kmsg.GroupMetadataValue
	if gk.ReadFrom(got[1].Key) != nil || gv.ReadFrom(got[1].Value) != nil || gk.Version != 2 || gk.Group != "classic" || gv.ProtocolType != "connect" ||
		*gv.Protocol != "sessioned" || gv.Generation != 7 || *gv.Leader != "a" || len(gv.Members) != 1 || *gv.Members[0].InstanceID != "i" ||
		string(gv.Members[0].Subscription) != "\x01\x02" || string(gv.Members[0].Assignment) != "\x03" {
		t.Fatalf("classic group: %+v %+v", gk, gv)
	}
	if gv.ReadFrom(got[2].Value) != nil || gv.ProtocolType != "consumer" || *gv.Protocol != "sticky" || gv.Generation != 3 || len(gv.Members) != 1 {
		t.Fatalf("consumer-protocol group: %+v", gv)
	}
	var sub kmsg.ConsumerMemberMetadata
	var asg kmsg.ConsumerMemberAssignment
	if sub.ReadFrom(gv.Members[0].Subscription) != nil || len(sub.Topics) != 1 || sub.Topics[0] != "t" ||
		asg.ReadFrom(gv.Members[0].Assignment) != nil || len(asg.Topics) != 1 || len(asg.Topics[0].Partitions) != 2 {
		t.Fatalf("member: subscription %+v, assignment %+v", sub, asg)
	}

	one, err := OffsetsLogBatches(recs, 1)
	if err != nil || record.NewIterator(one).Next() == false || len(one) >= len(data) {
		t.Fatalf("with 1 byte allowed: %d bytes of %d, %v", len(one), len(data), err)
	}
}
