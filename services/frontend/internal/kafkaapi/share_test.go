package kafkaapi

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

func TestKafkaAcks(t *testing.T) {
	tp := groups.TP{Topic: "t", Partition: 1}
	batch := func(first, last int64, types ...int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
		return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: types}
	}
	got, err := kafkaAcks(tp, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
		batch(0, 4, 1),          // one kind for the batch
		batch(5, 8, 1, 2, 2, 0), // one per offset: joins the first accept, then runs
	}, false)
	want := []shares.Ack{
		{Topic: "t", Partition: 1, FirstOffset: 0, LastOffset: 5, Type: shares.AckAccept},
		{Topic: "t", Partition: 1, FirstOffset: 6, LastOffset: 7, Type: shares.AckRelease},
		{Topic: "t", Partition: 1, FirstOffset: 8, LastOffset: 8, Type: shares.AckGap},
	}
	if err != nil || len(got) != len(want) {
		t.Fatalf("acks %+v, %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ack %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range [][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
		{batch(3, 2, 1)},    // empty range
		{batch(0, 2, 1, 1)}, // two types for three offsets
		{batch(0, 0, 4)},    // renew: only in a renewal request
		{batch(0, 0, 10)},   // Sluice's own defer is not Kafka's
		{batch(0, 0, -1)},
	} {
		if _, err := kafkaAcks(tp, bad, false); protocol.CodeOf(err) != protocol.InvalidRequest {
			t.Errorf("%+v: %v, want INVALID_REQUEST", bad, err)
		}
	}
	if got, err := kafkaAcks(tp, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{batch(0, 1, 4)}, true); err != nil || got[0].Type != shares.AckRenew {
		t.Fatalf("a renewal in a renewal request: %+v, %v", got, err)
	}
}

func TestShareSessionEpochs(t *testing.T) {
	s := &Service{share: shareState{members: map[shareMemberKey]*shareMember{}, sessions: map[shareMemberKey]*shareSession{}}}
	k := shareMemberKey{"g", "m"}
	p0, p1 := groups.TP{Topic: "t", Partition: 0}, groups.TP{Topic: "t", Partition: 1}
	if _, err := s.shareSessionStep(k, 3, nil, nil); protocol.CodeOf(err) != protocol.ShareSessionNotFound {
		t.Fatalf("epoch 3 without a session: %v", err)
	}
	sess, err := s.shareSessionStep(k, 0, []groups.TP{p0, p1}, nil)
	if err != nil || sess.epoch != 1 || len(sess.parts) != 2 {
		t.Fatalf("opening: %+v, %v", sess, err)
	}
	if _, err := s.shareSessionStep(k, 2, nil, nil); protocol.CodeOf(err) != protocol.InvalidShareSessionEpoch {
		t.Fatalf("a skipped epoch: %v", err)
	}
	sess, err = s.shareSessionStep(k, 1, nil, []groups.TP{p1})
	if err != nil || sess.epoch != 2 || !sess.parts[p0] || sess.parts[p1] {
		t.Fatalf("forgetting a partition: %+v, %v", sess, err)
	}
	if sess, err := s.shareSessionStep(k, -1, nil, nil); err != nil || sess != nil {
		t.Fatalf("closing: %+v, %v", sess, err)
	}
	if _, err := s.shareSessionStep(k, 2, nil, nil); protocol.CodeOf(err) != protocol.ShareSessionNotFound {
		t.Fatalf("after closing: %v", err)
	}
}
