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
		{Topic: "a", Partition: 0, Leader: true, LeaderEpoch: 3, LogStartOffset: 10, LogEndOffset: 99, HighWatermark: 90, FlushedOffset: 95, SizeBytes: 4096, CleanableBytes: 1024, FirstDirtyOffset: 50},
		{Topic: "b", Partition: 7, LeaderEpoch: 1, LogStartOffset: 0, LogEndOffset: 5, HighWatermark: 5, FlushedOffset: -1, SizeBytes: -1, CleanableBytes: -1, FirstDirtyOffset: -1},
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

// TestDescribeReplicasSizeIsOptional: a replica in the eight-field form of
// nodes from before the size field decodes with SizeBytes -1 (and the
// cleaner's fields -1 when absent too), and fields a newer node appends
// after the last known one are skipped.
func TestDescribeReplicasSizeIsOptional(t *testing.T) {
	encode := func(fields int) *bytes.Buffer {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(fields)
		_ = e.EncodeString("a")
		_ = e.EncodeInt(2)
		_ = e.EncodeBool(true)
		// epoch, start, end, hw, flushed, size, cleanable, first dirty,
		// and a field from the future
		for _, v := range []int64{4, 10, 20, 18, 19, 777, 300, 15, 5}[:fields-3] {
			_ = e.EncodeInt(v)
		}
		return &buf
	}
	for _, tc := range []struct {
		fields                 int
		size, cleanable, dirty int64
	}{{8, -1, -1, -1}, {9, 777, -1, -1}, {10, 777, 300, -1}, {11, 777, 300, 15}, {12, 777, 300, 15}} {
		var resp DescribeReplicasResponse
		if err := resp.DecodeMsgpack(msgpack.NewDecoder(encode(tc.fields))); err != nil {
			t.Fatalf("%d fields: %v", tc.fields, err)
		}
		want := ReplicaInfo{Topic: "a", Partition: 2, Leader: true, LeaderEpoch: 4, LogStartOffset: 10, LogEndOffset: 20,
			HighWatermark: 18, FlushedOffset: 19, SizeBytes: tc.size, CleanableBytes: tc.cleanable, FirstDirtyOffset: tc.dirty}
		if len(resp.Replicas) != 1 || resp.Replicas[0] != want {
			t.Fatalf("%d fields: decoded %+v, want %+v", tc.fields, resp.Replicas, want)
		}
	}
}
