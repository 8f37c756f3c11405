package protocol

import (
	"github.com/vmihailenco/msgpack/v5"
)

// MaxDescribedReplicas bounds the replicas one DescribeReplicas answer may
// list; a decoder refuses more rather than allocate for a hostile length.
const MaxDescribedReplicas = 1 << 20

// DescribeReplicasRequest asks a storage node for the state of its replicas
// of one topic, or of every topic when Topic is empty.
type DescribeReplicasRequest struct {
	Topic string
}

// ReplicaInfo is one replica on the answering node.
type ReplicaInfo struct {
	Topic          string
	Partition      int32
	Leader         bool // this node leads the partition
	LeaderEpoch    int32
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	FlushedOffset  int64 // below it every record is fsynced on this node
	// SizeBytes is the size of the replica's log segments on this node; -1
	// when the node did not report it (a node from before the field, which
	// sends eight fields).
	SizeBytes int64
	// CleanableBytes is the size of a compacted replica's closed segments
	// not yet cleaned, and FirstDirtyOffset the offset below which every
	// record has been through a cleaning pass; both -1 for a replica that
	// is not compacted or a node from before the fields.
	CleanableBytes   int64
	FirstDirtyOffset int64
}

// DescribeReplicasResponse lists the node's replicas, ordered by topic and
// partition.
type DescribeReplicasResponse struct {
	Replicas []ReplicaInfo
}

// EncodeMsgpack implements Body.
func (r *DescribeReplicasRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(1), e.EncodeString(r.Topic))
}

// DecodeMsgpack implements Body.
func (r *DescribeReplicasRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(1) {
		r.Topic = f.str()
	}
	return f.end("describe replicas request")
}

// EncodeMsgpack implements Body: [[topic, partition, leader, epoch, start,
// end, hw, flushed, size, cleanable, first dirty], ...] in a one-field
// array. Decoders from before the last three fields skip them.
func (r *DescribeReplicasResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := firstErr(e.EncodeArrayLen(1), e.EncodeArrayLen(len(r.Replicas))); err != nil {
		return err
	}
	for _, x := range r.Replicas {
		if err := firstErr(e.EncodeArrayLen(11), e.EncodeString(x.Topic), e.EncodeInt(int64(x.Partition)), e.EncodeBool(x.Leader),
			e.EncodeInt(int64(x.LeaderEpoch)), e.EncodeInt(x.LogStartOffset), e.EncodeInt(x.LogEndOffset),
			e.EncodeInt(x.HighWatermark), e.EncodeInt(x.FlushedOffset), e.EncodeInt(x.SizeBytes),
			e.EncodeInt(x.CleanableBytes), e.EncodeInt(x.FirstDirtyOffset)); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack implements Body.
func (r *DescribeReplicasResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(1) {
		n := f.arrayLen(MaxDescribedReplicas, "replicas")
		r.Replicas = make([]ReplicaInfo, 0, min(n, 1024))
		for i := 0; i < n && f.err == nil; i++ {
			var x ReplicaInfo
			x, f.err = decodeReplicaInfo(d)
			r.Replicas = append(r.Replicas, x)
		}
	}
	return f.end("describe replicas response")
}

// decodeReplicaInfo reads one replica; the size and the cleaner's fields
// are optional (-1 when absent).
func decodeReplicaInfo(d *msgpack.Decoder) (ReplicaInfo, error) {
	x := ReplicaInfo{SizeBytes: -1, CleanableBytes: -1, FirstDirtyOffset: -1}
	f := fields{d: d}
	if f.begin(8) {
		x.Topic = f.str()
		x.Partition = int32(f.int())
		if f.err == nil {
			x.Leader, f.err = d.DecodeBool()
		}
		x.LeaderEpoch = int32(f.int())
		x.LogStartOffset = f.int()
		x.LogEndOffset = f.int()
		x.HighWatermark = f.int()
		x.FlushedOffset = f.int()
		if f.optional() {
			x.SizeBytes = f.int()
		}
		if f.optional() {
			x.CleanableBytes = f.int()
		}
		if f.optional() {
			x.FirstDirtyOffset = f.int()
		}
	}
	return x, f.end("replica")
}
