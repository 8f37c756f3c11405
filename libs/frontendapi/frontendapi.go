// Package frontendapi is the frontend's HTTP contract for producers that
// build record batches themselves (the Go SDK): the batches body of
// POST /v1/topics/{topic}/records and its answer.
//
// The body (Content-Type ContentTypeBatches) is msgpack: an array with one
// element per batch, each a 2-array [partition (int), batch (bin)], the batch
// being a RecordBatch v2 exactly as it will be stored (producer id, epoch and
// sequence included). The frontend routes each batch's bytes to its
// partition's leader without decoding the records; batches of one partition
// are sent in body order, one after another. The answer is JSON
// BatchesResponse, one result per batch in body order.
//
// A transactional producer's body names its transactional id
// (?transactional_id=ID, with acks=all): every batch must then be
// transactional and of one producer id and epoch, and the frontend adds the
// body's partitions to the producer's transaction at the coordinator before
// sending anything (INVALID_PRODUCER_EPOCH when the producer was fenced or
// its transaction ended). A transactional batch in a body without the
// parameter is refused (INVALID_RECORD), as is the parameter on a records
// body.
//
// Decode returns sub-slices of the body (no copy): the body must stay
// untouched while the batches are in use.
package frontendapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ContentTypeBatches is the Content-Type of a batches body.
const ContentTypeBatches = "application/vnd.sluice.batches+msgpack"

// MaxBatches bounds the batches of one body.
const MaxBatches = 65536

// PartitionBatch is one record batch for one partition.
type PartitionBatch struct {
	Partition int32
	Batch     []byte
}

// BatchResult is the outcome of one batch.
type BatchResult struct {
	Partition  int32  `json:"partition"`
	BaseOffset int64  `json:"base_offset"`
	ErrorCode  int16  `json:"error_code,omitempty"`
	Error      string `json:"error,omitempty"`
}

// BatchesResponse answers a batches body.
type BatchesResponse struct {
	Results []BatchResult `json:"results"`
}

// ErrMalformed is wrapped by every Decode error.
var ErrMalformed = errors.New("malformed batches body")

// AppendBatches appends the msgpack body of batches to b.
func AppendBatches(b []byte, batches []PartitionBatch) []byte {
	b = appendArrayLen(b, len(batches))
	for _, pb := range batches {
		b = appendArrayLen(b, 2)
		b = appendInt(b, int64(pb.Partition))
		b = appendBin(b, pb.Batch)
	}
	return b
}

// BatchesSegments returns the same body as AppendBatches in pieces, to be
// written in order: the msgpack framing, in one small allocation, and the
// batches themselves, not copied. Size is the body's length.
func BatchesSegments(batches []PartitionBatch) (segs [][]byte, size int) {
	// Each batch's framing is at most 15 bytes (array header, int, bin
	// header): the capacity is enough, so appends never move earlier pieces.
	framing := make([]byte, 0, 5+15*len(batches))
	framing = appendArrayLen(framing, len(batches))
	start := 0
	segs = make([][]byte, 0, 2*len(batches)+1)
	for _, pb := range batches {
		framing = appendArrayLen(framing, 2)
		framing = appendInt(framing, int64(pb.Partition))
		framing = appendBinHeader(framing, len(pb.Batch))
		segs = append(segs, framing[start:len(framing):len(framing)], pb.Batch)
		size += len(framing) - start + len(pb.Batch)
		start = len(framing)
	}
	if len(batches) == 0 {
		segs, size = append(segs, framing), len(framing)
	}
	return segs, size
}

// DecodeBatches parses a batches body; the batches alias body.
func DecodeBatches(body []byte) ([]PartitionBatch, error) {
	r := reader{b: body}
	n, err := r.arrayLen()
	if err != nil {
		return nil, err
	}
	if n > MaxBatches {
		return nil, fmt.Errorf("%w: %d batches, at most %d", ErrMalformed, n, MaxBatches)
	}
	out := make([]PartitionBatch, 0, n)
	for i := 0; i < n; i++ {
		m, err := r.arrayLen()
		if err != nil {
			return nil, err
		}
		if m != 2 {
			return nil, fmt.Errorf("%w: batch %d has %d fields, want [partition, batch]", ErrMalformed, i, m)
		}
		p, err := r.int()
		if err != nil {
			return nil, err
		}
		if p < 0 || p > math.MaxInt32 {
			return nil, fmt.Errorf("%w: batch %d: partition %d out of range", ErrMalformed, i, p)
		}
		batch, err := r.bin()
		if err != nil {
			return nil, err
		}
		out = append(out, PartitionBatch{Partition: int32(p), Batch: batch})
	}
	if r.off != len(body) {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(body)-r.off)
	}
	return out, nil
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0 && v < 128:
		return append(b, byte(v))
	case v >= 0 && v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendBin(b []byte, v []byte) []byte {
	return append(appendBinHeader(b, len(v)), v...)
}

func appendBinHeader(b []byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
}

// reader reads the few msgpack types of a batches body.
type reader struct {
	b   []byte
	off int
}

func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || len(r.b)-r.off < n {
		return nil, fmt.Errorf("%w: truncated at byte %d", ErrMalformed, r.off)
	}
	s := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return s, nil
}

func (r *reader) byte() (byte, error) {
	s, err := r.take(1)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

func (r *reader) uint(size int) (uint64, error) {
	s, err := r.take(size)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range s {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

func (r *reader) arrayLen() (int, error) {
	t, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case t&0xf0 == 0x90:
		return int(t & 0x0f), nil
	case t == 0xdc:
		v, err := r.uint(2)
		return int(v), err
	case t == 0xdd:
		v, err := r.uint(4)
		return int(v), err
	}
	return 0, fmt.Errorf("%w: expected an array at byte %d, found type 0x%02x", ErrMalformed, r.off-1, t)
}

func (r *reader) int() (int64, error) {
	t, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case t < 0x80:
		return int64(t), nil
	case t >= 0xe0:
		return int64(int8(t)), nil
	case t >= 0xcc && t <= 0xcf: // uint 8..64
		v, err := r.uint(1 << (t - 0xcc))
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%w: integer out of range", ErrMalformed)
		}
		return int64(v), err
	case t >= 0xd0 && t <= 0xd3: // int 8..64
		size := 1 << (t - 0xd0)
		v, err := r.uint(size)
		shift := 64 - 8*size
		return int64(v<<shift) >> shift, err
	}
	return 0, fmt.Errorf("%w: expected an integer at byte %d, found type 0x%02x", ErrMalformed, r.off-1, t)
}

func (r *reader) bin() ([]byte, error) {
	t, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch t {
	case 0xc4:
		n, err = r.uint(1)
	case 0xc5:
		n, err = r.uint(2)
	case 0xc6:
		n, err = r.uint(4)
	default:
		return nil, fmt.Errorf("%w: expected bin (a record batch) at byte %d, found type 0x%02x", ErrMalformed, r.off-1, t)
	}
	if err != nil {
		return nil, err
	}
	return r.take(int(n))
}
