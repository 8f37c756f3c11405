package protocol

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestDescribeReplicasRoundTrip: request and response decode to what was
// encoded; an empty list stays a list.
func TestDescribeReplicasRoundTrip(t *testing.T) {
	resp := &DescribeReplicasResponse{Replicas: []ReplicaInfo{
		{Topic: "a", Partition: 0, Leader: true, LeaderEpoch: 3, LogStartOffset: 10, LogEndOffset: 99, HighWatermark: 90, FlushedOffset: 95},
		{Topic: "b", Partition: 7, LeaderEpoch: 1, LogStartOffset: 0, LogEndOffset: 5, HighWatermark: 5, FlushedOffset: -1},
	}}
	for _, tc := range []struct{ in, out Body }{
		{&DescribeReplicasRequest{Topic: "orders"}, &DescribeReplicasRequest{}},
		{resp, &DescribeReplicasResponse{}},
		{&DescribeReplicasResponse{Replicas: []ReplicaInfo{}}, &DescribeReplicasResponse{}},
	} {
		var buf bytes.Buffer
		if err := tc.in.EncodeMsgpack(msgpack.NewEncoder(&buf)); err != nil {
			t.Fatal(err)
		}
		if err := tc.out.DecodeMsgpack(msgpack.NewDecoder(&buf)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tc.in, tc.out) {
			t.Fatalf("decoded %+v, encoded %+v", tc.out, tc.in)
		}
	}
}

// TestDescribeReplicasRejectsHostileLengths: a response claiming more
// replicas than allowed, or truncated, is an error, not an allocation.
func TestDescribeReplicasRejectsHostileLengths(t *testing.T) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(MaxDescribedReplicas + 1)
	if err := (&DescribeReplicasResponse{}).DecodeMsgpack(msgpack.NewDecoder(&buf)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("oversized list: %v", err)
	}
	buf.Reset()
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(2)
	_ = e.EncodeArrayLen(8)
	_ = e.EncodeString("a")
	if err := (&DescribeReplicasResponse{}).DecodeMsgpack(msgpack.NewDecoder(&buf)); err == nil {
		t.Fatal("truncated list decoded")
	}
}
