package protocol

import (
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// MaxTxnMarkers bounds the markers of one WriteTxnMarkers request; a
// decoder refuses more rather than allocate for a hostile length.
const MaxTxnMarkers = 1 << 16

// TxnMarker is one marker of a WriteTxnMarkers request: the end of
// producer ProducerID's transaction on one partition (see
// WriteTxnMarkerRequest for the epoch it carries).
type TxnMarker struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// WriteTxnMarkersRequest has a storage node append the markers of the
// transactions that ended together, on the partitions it leads, for the
// transaction coordinator: Kafka's WriteTxnMarkers, one request per node
// per round. A partition's markers go into its log in one append, in the
// request's order. The node answers once the in-sync replicas hold them.
type WriteTxnMarkersRequest struct {
	Markers   []TxnMarker
	TimeoutMs int32
}

// TxnMarkerResult is one marker's outcome: its offset, or Err (a refusal
// of this marker alone, such as NOT_LEADER_OR_FOLLOWER for a partition the
// node does not lead).
type TxnMarkerResult struct {
	Offset int64
	Err    error
}

// WriteTxnMarkersResponse answers each marker of the request, in order.
type WriteTxnMarkersResponse struct {
	Results []TxnMarkerResult
}

// EncodeMsgpack implements Body: [[[topic, partition, pid, epoch, commit,
// coordinator epoch], ...], timeout].
func (r *WriteTxnMarkersRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := firstErr(e.EncodeArrayLen(2), e.EncodeArrayLen(len(r.Markers))); err != nil {
		return err
	}
	for _, m := range r.Markers {
		if err := firstErr(e.EncodeArrayLen(6), e.EncodeString(m.Topic), e.EncodeInt(int64(m.Partition)), e.EncodeInt(m.ProducerID),
			e.EncodeInt(int64(m.ProducerEpoch)), e.EncodeBool(m.Commit), e.EncodeInt(int64(m.CoordinatorEpoch))); err != nil {
			return err
		}
	}
	return e.EncodeInt(int64(r.TimeoutMs))
}

// DecodeMsgpack implements Body.
func (r *WriteTxnMarkersRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(2) {
		n := f.arrayLen(MaxTxnMarkers, "markers")
		r.Markers = make([]TxnMarker, 0, min(n, 1024))
		for i := 0; i < n && f.err == nil; i++ {
			m := fields{d: d}
			var x TxnMarker
			if m.begin(6) {
				x.Topic = m.str()
				x.Partition = int32(m.int())
				x.ProducerID = m.int()
				x.ProducerEpoch = int16(m.int())
				if m.err == nil {
					x.Commit, m.err = d.DecodeBool()
				}
				x.CoordinatorEpoch = int32(m.int())
			}
			f.err = m.end("marker")
			r.Markers = append(r.Markers, x)
		}
		r.TimeoutMs = int32(f.int())
	}
	return f.end("write txn markers request")
}

// EncodeMsgpack implements Body: [[[offset, code, message], ...]].
func (r *WriteTxnMarkersResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := firstErr(e.EncodeArrayLen(1), e.EncodeArrayLen(len(r.Results))); err != nil {
		return err
	}
	for _, x := range r.Results {
		code, msg := None, ""
		if x.Err != nil {
			code, msg = CodeOf(x.Err), x.Err.Error()
			var pe *Error
			if errors.As(x.Err, &pe) {
				msg = pe.Message
			}
		}
		if err := firstErr(e.EncodeArrayLen(3), e.EncodeInt(x.Offset), e.EncodeInt(int64(code)), e.EncodeString(msg)); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack implements Body.
func (r *WriteTxnMarkersResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(1) {
		n := f.arrayLen(MaxTxnMarkers, "marker results")
		r.Results = make([]TxnMarkerResult, 0, min(n, 1024))
		for i := 0; i < n && f.err == nil; i++ {
			m := fields{d: d}
			var x TxnMarkerResult
			if m.begin(3) {
				x.Offset = m.int()
				code := Code(m.int())
				if msg := m.str(); m.err == nil && code != None {
					x.Err = code.Err("%s", msg)
				}
			}
			f.err = m.end("marker result")
			r.Results = append(r.Results, x)
		}
	}
	return f.end("write txn markers response")
}

// arrayLen reads an array length of at most max elements.
func (f *fields) arrayLen(max int, what string) int {
	if f.err != nil {
		return 0
	}
	var n int
	n, f.err = f.d.DecodeArrayLen()
	if f.err == nil && (n < 0 || n > max) {
		f.err = fmt.Errorf("%d %s, at most %d", n, what, max)
	}
	if f.err != nil {
		return 0
	}
	return n
}
