package protocol

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/libs/record"
)

// Acks values of a produce request, as in Kafka.
const (
	AcksNone   int8 = 0
	AcksLeader int8 = 1
	AcksAll    int8 = -1
)

// Special timestamps of a ListOffsets request, as in Kafka.
const (
	TimestampLatest   int64 = -1
	TimestampEarliest int64 = -2
	// TimestampMax asks for the record with the largest timestamp (KIP-734).
	TimestampMax int64 = -3
	// TimestampEarliestLocal asks for the local log's start (KIP-1005): with
	// tiered storage, the first offset still on the storage nodes' disks,
	// where a new replica starts copying; without it, as TimestampEarliest.
	TimestampEarliestLocal int64 = -4
)

// ProduceRequest appends the record batches in the frame's payload to one
// partition. The payload holds one or more RecordBatch v2 batches.
type ProduceRequest struct {
	Topic     string
	Partition int32
	Acks      int8
	TimeoutMs int32
}

// ProduceResponse tells where the payload's batches landed.
type ProduceResponse struct {
	BaseOffset     int64
	LastOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
}

// FetchRequest reads whole record batches of one partition from Offset on.
type FetchRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	MaxBytes  int32
	MaxWaitMs int32
	MinBytes  int32
	// ReplicaID is -1 for consumers and the follower's node id for replication.
	ReplicaID int32
	// CurrentLeaderEpoch is the leader epoch the fetcher believes current, or
	// -1 to skip the check. A leader answers FENCED_LEADER_EPOCH to an older
	// one and UNKNOWN_LEADER_EPOCH to a newer one.
	CurrentLeaderEpoch int32
	// FlushedOffset is, for a follower, the offset below which its log is
	// fsynced (-1 for consumers). With the fsync flush policy the leader counts
	// a record toward the high watermark only once every in-sync replica has
	// flushed it.
	FlushedOffset int64
	// Isolation is ReadUncommitted (every record below the high watermark,
	// the default) or ReadCommitted (below the last stable offset, with the
	// aborted transactions of the range in the answer).
	Isolation int8
}

// Fetch isolation levels (Kafka's).
const (
	ReadUncommitted int8 = 0
	ReadCommitted   int8 = 1
)

// MaxAbortedTxns bounds the aborted transactions one fetch answer carries
// (a decoder refuses more).
const MaxAbortedTxns = 1 << 20

// FetchResponse precedes the fetched batches, which form the payload.
type FetchResponse struct {
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// ThrottleMs is how long the client should wait before its next fetch
	// because it is over its fetch quota (Kafka's throttle_time_ms); a
	// throttled fetch carries no records.
	ThrottleMs int32
	// LastStableOffset is the partition's last stable offset: below it
	// every transaction has ended (answers from nodes without
	// transactions: the high watermark).
	LastStableOffset int64
	// Aborted are, for a ReadCommitted fetch, the aborted transactions with
	// records in the answer, in the order their markers were written: a
	// read_committed reader drops each producer's transactional records
	// from FirstOffset until that producer's abort marker.
	Aborted []AbortedTxn
}

// AbortedTxn is an aborted transaction in a fetch answer (Kafka's
// FetchResponse AbortedTransactions entry); record.Iterator.SetAborted
// takes them.
type AbortedTxn = record.AbortedTxn

// OffsetForLeaderEpochRequest asks a leader where the given epoch ends in its
// log (Kafka's KIP-101): a follower that joins a new leader sends its latest
// epoch and truncates its log to the answer.
type OffsetForLeaderEpochRequest struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32 // the epoch of the leader being asked, or -1
	LeaderEpoch        int32 // the epoch whose end is wanted
}

// OffsetForLeaderEpochResponse answers with the largest epoch at or below the
// one asked for and the offset where it ends (the next epoch's start, or the
// log end for the latest); both are -1 when the leader has no such epoch.
type OffsetForLeaderEpochResponse struct {
	LeaderEpoch int32
	EndOffset   int64
}

// EncodeMsgpack implements Body.
func (r *OffsetForLeaderEpochRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(4), e.EncodeString(r.Topic), e.EncodeInt(int64(r.Partition)),
		e.EncodeInt(int64(r.CurrentLeaderEpoch)), e.EncodeInt(int64(r.LeaderEpoch)))
}

// DecodeMsgpack implements Body.
func (r *OffsetForLeaderEpochRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(4) {
		r.Topic = f.str()
		r.Partition = int32(f.int())
		r.CurrentLeaderEpoch = int32(f.int())
		r.LeaderEpoch = int32(f.int())
	}
	return f.end("offset for leader epoch request")
}

// EncodeMsgpack implements Body.
func (r *OffsetForLeaderEpochResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(2), e.EncodeInt(int64(r.LeaderEpoch)), e.EncodeInt(r.EndOffset))
}

// DecodeMsgpack implements Body.
func (r *OffsetForLeaderEpochResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(2) {
		r.LeaderEpoch = int32(f.int())
		r.EndOffset = f.int()
	}
	return f.end("offset for leader epoch response")
}

// ListOffsetsRequest asks for the earliest or latest offset of a partition, or the
// first offset whose timestamp is at least Timestamp.
type ListOffsetsRequest struct {
	Topic     string
	Partition int32
	Timestamp int64
	// CurrentLeaderEpoch is the leader epoch the client believes current,
	// or -1 to skip the check (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
	CurrentLeaderEpoch int32
	// Isolation: at ReadCommitted the latest offset is the last stable
	// offset, and look-ups see nothing above it.
	Isolation int8
}

// ListOffsetsResponse answers a ListOffsetsRequest; Offset is -1 when no record
// has a timestamp at or after the one asked for.
type ListOffsetsResponse struct {
	Offset    int64
	Timestamp int64
	// LeaderEpoch is the leader epoch of the record at Offset (the latest
	// epoch for the log end), -1 when unknown.
	LeaderEpoch int32
}

// EncodeMsgpack implements Body.
func (r *ProduceRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(4), e.EncodeString(r.Topic), e.EncodeInt(int64(r.Partition)),
		e.EncodeInt(int64(r.Acks)), e.EncodeInt(int64(r.TimeoutMs)))
}

// DecodeMsgpack implements Body.
func (r *ProduceRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(4) {
		r.Topic = f.str()
		r.Partition = int32(f.int())
		r.Acks = int8(f.int())
		r.TimeoutMs = int32(f.int())
	}
	return f.end("produce request")
}

// EncodeMsgpack implements Body.
func (r *ProduceResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(4), e.EncodeInt(r.BaseOffset), e.EncodeInt(r.LastOffset),
		e.EncodeInt(r.LogAppendTime), e.EncodeInt(r.LogStartOffset))
}

// DecodeMsgpack implements Body.
func (r *ProduceResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(4) {
		r.BaseOffset = f.int()
		r.LastOffset = f.int()
		r.LogAppendTime = f.int()
		r.LogStartOffset = f.int()
	}
	return f.end("produce response")
}

// EncodeMsgpack implements Body.
func (r *FetchRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(10), e.EncodeString(r.Topic), e.EncodeInt(int64(r.Partition)),
		e.EncodeInt(r.Offset), e.EncodeInt(int64(r.MaxBytes)), e.EncodeInt(int64(r.MaxWaitMs)),
		e.EncodeInt(int64(r.MinBytes)), e.EncodeInt(int64(r.ReplicaID)), e.EncodeInt(int64(r.CurrentLeaderEpoch)),
		e.EncodeInt(r.FlushedOffset), e.EncodeInt(int64(r.Isolation)))
}

// DecodeMsgpack implements Body. The last three fields are optional (older
// fetchers send seven or nine): epoch and flushed offset then default to
// -1, the isolation to ReadUncommitted.
func (r *FetchRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	r.CurrentLeaderEpoch, r.FlushedOffset = -1, -1
	if f.begin(7) {
		r.Topic = f.str()
		r.Partition = int32(f.int())
		r.Offset = f.int()
		r.MaxBytes = int32(f.int())
		r.MaxWaitMs = int32(f.int())
		r.MinBytes = int32(f.int())
		r.ReplicaID = int32(f.int())
		if f.optional() {
			r.CurrentLeaderEpoch = int32(f.int())
		}
		if f.optional() {
			r.FlushedOffset = f.int()
		}
		if f.optional() {
			r.Isolation = decodeIsolation(&f)
		}
	}
	return f.end("fetch request")
}

// EncodeMsgpack implements Body.
func (r *FetchResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	err := firstErr(e.EncodeArrayLen(6), e.EncodeInt(r.HighWatermark), e.EncodeInt(r.LogStartOffset),
		e.EncodeInt(r.LogEndOffset), e.EncodeInt(int64(r.ThrottleMs)), e.EncodeInt(r.LastStableOffset),
		e.EncodeArrayLen(2*len(r.Aborted)))
	for _, a := range r.Aborted {
		if err == nil {
			err = firstErr(e.EncodeInt(a.ProducerID), e.EncodeInt(a.FirstOffset))
		}
	}
	return err
}

// DecodeMsgpack implements Body.
func (r *FetchResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(3) {
		r.HighWatermark = f.int()
		r.LogStartOffset = f.int()
		r.LogEndOffset = f.int()
		if f.optional() { // absent in answers of nodes from before quotas
			r.ThrottleMs = int32(f.int())
		}
		r.LastStableOffset = r.HighWatermark // and before transactions
		if f.optional() {
			r.LastStableOffset = f.int()
		}
		if f.optional() {
			r.Aborted, f.err = decodeAborted(d)
		}
	}
	return f.end("fetch response")
}

// decodeIsolation reads an isolation level field, refusing unknown levels.
func decodeIsolation(f *fields) int8 {
	v := f.int()
	if f.err == nil && v != int64(ReadUncommitted) && v != int64(ReadCommitted) {
		f.err = fmt.Errorf("isolation level %d", v)
	}
	return int8(v)
}

// decodeAborted reads a fetch answer's aborted transactions: a flat array
// of producer id, first offset pairs.
func decodeAborted(d *msgpack.Decoder) ([]AbortedTxn, error) {
	n, err := d.DecodeArrayLen()
	switch {
	case err != nil:
		return nil, err
	case n <= 0:
		return nil, nil
	case n%2 != 0 || n/2 > MaxAbortedTxns:
		return nil, fmt.Errorf("aborted transactions: %d fields", n)
	}
	out := make([]AbortedTxn, 0, min(n/2, 1024))
	for range n / 2 {
		pid, err := d.DecodeInt64()
		if err != nil {
			return nil, err
		}
		first, err := d.DecodeInt64()
		if err != nil {
			return nil, err
		}
		out = append(out, AbortedTxn{ProducerID: pid, FirstOffset: first})
	}
	return out, nil
}

// EncodeMsgpack implements Body.
func (r *ListOffsetsRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(5), e.EncodeString(r.Topic), e.EncodeInt(int64(r.Partition)),
		e.EncodeInt(r.Timestamp), e.EncodeInt(int64(r.CurrentLeaderEpoch)), e.EncodeInt(int64(r.Isolation)))
}

// DecodeMsgpack implements Body. The epoch and isolation are optional
// (older clients send three or four fields): they then default to -1 and
// ReadUncommitted.
func (r *ListOffsetsRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	r.CurrentLeaderEpoch = -1
	if f.begin(3) {
		r.Topic = f.str()
		r.Partition = int32(f.int())
		r.Timestamp = f.int()
		if f.optional() {
			r.CurrentLeaderEpoch = int32(f.int())
		}
		if f.optional() {
			r.Isolation = decodeIsolation(&f)
		}
	}
	return f.end("list offsets request")
}

// EncodeMsgpack implements Body.
func (r *ListOffsetsResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(3), e.EncodeInt(r.Offset), e.EncodeInt(r.Timestamp), e.EncodeInt(int64(r.LeaderEpoch)))
}

// DecodeMsgpack implements Body. The epoch is optional (older nodes answer
// two fields): it then defaults to -1.
func (r *ListOffsetsResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	r.LeaderEpoch = -1
	if f.begin(2) {
		r.Offset = f.int()
		r.Timestamp = f.int()
		if f.optional() {
			r.LeaderEpoch = int32(f.int())
		}
	}
	return f.end("list offsets response")
}

// fields decodes a body array field by field, remembering the first error, so
// that body decoders read as a list of assignments.
type fields struct {
	d   *msgpack.Decoder
	n   int
	err error
}

// begin reads the array length and reports whether at least min fields follow.
func (f *fields) begin(min int) bool {
	f.n, f.err = f.d.DecodeArrayLen()
	if f.err == nil && f.n < min {
		f.err = fmt.Errorf("%d fields, want at least %d", f.n, min)
	}
	if f.err == nil {
		f.n -= min
	}
	return f.err == nil
}

// optional reports whether one more (optional) field follows, and counts it.
func (f *fields) optional() bool {
	if f.err != nil || f.n == 0 {
		return false
	}
	f.n--
	return true
}

func (f *fields) int() int64 {
	if f.err != nil {
		return 0
	}
	var v int64
	v, f.err = f.d.DecodeInt64()
	return v
}

func (f *fields) str() string {
	if f.err != nil {
		return ""
	}
	var s string
	s, f.err = f.d.DecodeString()
	return s
}

// end skips fields a newer peer appended and wraps the first error.
func (f *fields) end(what string) error {
	if f.err == nil {
		f.err = skipN(f.d, f.n)
	}
	if f.err != nil {
		return fmt.Errorf("%s: %w", what, f.err)
	}
	return nil
}

// DeleteRecordsRequest asks a partition's leader to delete the records
// below Offset (-1: the high watermark) by moving its log start offset.
type DeleteRecordsRequest struct {
	Topic     string
	Partition int32
	Offset    int64
}

// DeleteRecordsResponse is the leader's log start offset after the
// deletion (Kafka's low watermark).
type DeleteRecordsResponse struct {
	LowWatermark int64
}

// EncodeMsgpack implements Body.
func (r *DeleteRecordsRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(3), e.EncodeString(r.Topic), e.EncodeInt(int64(r.Partition)), e.EncodeInt(r.Offset))
}

// DecodeMsgpack implements Body.
func (r *DeleteRecordsRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(3) {
		r.Topic = f.str()
		r.Partition = int32(f.int())
		r.Offset = f.int()
	}
	return f.end("delete records request")
}

// EncodeMsgpack implements Body.
func (r *DeleteRecordsResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(1), e.EncodeInt(r.LowWatermark))
}

// DecodeMsgpack implements Body.
func (r *DeleteRecordsResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(1) {
		r.LowWatermark = f.int()
	}
	return f.end("delete records response")
}

// WriteTxnMarkerRequest asks a partition's leader to append the marker
// ending producer ProducerID's transaction, as its transaction coordinator
// decided (Commit or abort), and to answer once the marker is below the high
// watermark. ProducerEpoch is the marker's epoch: the transaction's, or
// (transaction version 2) the producer's next one, which fences the ended
// transaction's epoch on the partition.
type WriteTxnMarkerRequest struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	TimeoutMs        int32
}

// WriteTxnMarkerResponse is the marker's offset.
type WriteTxnMarkerResponse struct {
	Offset int64
}

// EncodeMsgpack implements Body.
func (r *WriteTxnMarkerRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(7), e.EncodeString(r.Topic), e.EncodeInt(int64(r.Partition)), e.EncodeInt(r.ProducerID),
		e.EncodeInt(int64(r.ProducerEpoch)), e.EncodeBool(r.Commit), e.EncodeInt(int64(r.CoordinatorEpoch)), e.EncodeInt(int64(r.TimeoutMs)))
}

// DecodeMsgpack implements Body.
func (r *WriteTxnMarkerRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(7) {
		r.Topic = f.str()
		r.Partition = int32(f.int())
		r.ProducerID = f.int()
		r.ProducerEpoch = int16(f.int())
		if f.err == nil {
			r.Commit, f.err = d.DecodeBool()
		}
		r.CoordinatorEpoch = int32(f.int())
		r.TimeoutMs = int32(f.int())
	}
	return f.end("write txn marker request")
}

// EncodeMsgpack implements Body.
func (r *WriteTxnMarkerResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(1), e.EncodeInt(r.Offset))
}

// DecodeMsgpack implements Body.
func (r *WriteTxnMarkerResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(1) {
		r.Offset = f.int()
	}
	return f.end("write txn marker response")
}
