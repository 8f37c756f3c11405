package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Layout of a RecordBatch v2 header (Kafka's format; all integers big endian).
const (
	offBaseOffset      = 0  // int64, outside the CRC
	offBatchLength     = 8  // int32: bytes after this field
	offLeaderEpoch     = 12 // int32, outside the CRC
	offMagic           = 16 // int8
	offCRC             = 17 // uint32, CRC-32C of bytes [21, end)
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offBaseTimestamp   = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offProducerEpoch   = 51 // int16
	offBaseSequence    = 53 // int32
	offRecordCount     = 57 // int32

	// HeaderSize is the size of a batch header; records follow it.
	HeaderSize = 61
	// LogOverhead is the part of the header before batchLength's count starts.
	LogOverhead = 12
	// Magic is the only supported format version.
	Magic = 2
	// MaxBatchSize bounds a single batch; larger lengths are treated as corrupt.
	MaxBatchSize = 1 << 30
)

// Attribute bits.
const (
	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// Sentinel errors for malformed batches; every error returned by this package
// wraps one of them and says what was wrong.
var (
	// ErrShortBatch: fewer bytes than the batch states (a torn write on disk).
	ErrShortBatch = errors.New("record: batch truncated")
	// ErrCorrupt: the bytes are not a valid batch (bad length, magic or CRC).
	ErrCorrupt = errors.New("record: corrupt batch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a batch.
type Header struct {
	BaseOffset      int64
	BatchLength     int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the whole batch's size in bytes.
func (h *Header) Size() int { return LogOverhead + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// LastSequence returns the producer sequence number of the batch's last
// record: BaseSequence advanced by LastOffsetDelta, wrapping from
// math.MaxInt32 to 0 (Kafka's DefaultRecordBatch.lastSequence). For a batch a
// producer built, LastOffsetDelta is RecordCount-1. A batch without a
// sequence (BaseSequence NoSequence) gives NoSequence.
func (h *Header) LastSequence() int32 {
	if h.BaseSequence == NoSequence {
		return NoSequence
	}
	return IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// IncrementSequence returns seq advanced by inc (0 <= inc) in the producer
// sequence space [0, math.MaxInt32], which wraps from math.MaxInt32 to 0, as
// Kafka's DefaultRecordBatch.incrementSequence. seq must not be negative.
func IncrementSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// Compression returns the batch's codec.
func (h *Header) Compression() Codec { return Codec(h.Attributes & attrCompressionMask) }

// IsControl reports whether the batch is a control batch.
func (h *Header) IsControl() bool { return h.Attributes&attrControl != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (h *Header) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// LogAppendTime reports whether the batch carries log-append time: the broker
// set MaxTimestamp and it is every record's timestamp.
func (h *Header) LogAppendTime() bool { return h.Attributes&attrTimestampType != 0 }

// PeekSize reads the size of the batch starting at b[0] from its first 12 bytes.
// It needs at least LogOverhead bytes.
func PeekSize(b []byte) (int, error) {
	if len(b) < LogOverhead {
		return 0, fmt.Errorf("%w: %d bytes, need %d for the length", ErrShortBatch, len(b), LogOverhead)
	}
	n := int64(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
	if n < HeaderSize-LogOverhead || n > MaxBatchSize {
		return 0, fmt.Errorf("%w: batch length %d", ErrCorrupt, n)
	}
	return LogOverhead + int(n), nil
}

// Count adds up the records of the concatenated batches at the start of b
// and the offsets they take (a batch takes its last offset delta plus one),
// from their headers alone; it stops at the first batch whose header does
// not parse or that b does not hold whole.
func Count(b []byte) (records int, offsets int64) {
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			break
		}
		records += int(h.RecordCount)
		offsets += int64(h.LastOffsetDelta) + 1
		b = b[h.Size():]
	}
	return records, offsets
}

// ParseHeader decodes the header at the start of b without checking the CRC. b
// must hold at least HeaderSize bytes; the batch may continue beyond b.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes, need %d for the header", ErrShortBatch, len(b), HeaderSize)
	}
	if _, err := PeekSize(b); err != nil {
		return h, err
	}
	h = Header{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:     int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:      int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:   int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:     int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, h.Magic, Magic)
	}
	if c := h.Compression(); c > CodecZstd {
		return h, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, int8(c))
	}
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 {
		return h, fmt.Errorf("%w: last offset delta %d, record count %d", ErrCorrupt, h.LastOffsetDelta, h.RecordCount)
	}
	if h.RecordCount > 0 && h.LastOffsetDelta != h.RecordCount-1 && !h.IsControl() {
		// Compacted batches may have gaps, but then count <= delta+1.
		if int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
			return h, fmt.Errorf("%w: %d records but last offset delta %d", ErrCorrupt, h.RecordCount, h.LastOffsetDelta)
		}
	}
	return h, nil
}

// Validate checks one whole batch at the start of b: length, magic, header fields
// and CRC-32C. It returns the header and the batch's size.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	size := h.Size()
	if len(b) < size {
		return h, fmt.Errorf("%w: batch of %d bytes, %d present", ErrShortBatch, size, len(b))
	}
	if got := crc32.Checksum(b[offAttributes:size], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: CRC-32C %08x, header says %08x", ErrCorrupt, got, h.CRC)
	}
	return h, nil
}

// SetBaseOffset stamps a batch's base offset in place; the CRC does not cover it.
// b must hold at least a header (a batch that passed Validate).
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetLeaderEpoch stamps a batch's partition leader epoch in place; the CRC does
// not cover it. b must hold at least a header (a batch that passed Validate).
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// SealBatch finishes a batch rewritten with fewer records (a header copied
// from the original, then the records section): it sets the batch length to
// len(b), the record count to count and the CRC-32C. The last offset delta
// and the timestamps are the original's, so the offsets the batch spans do
// not change. An empty batch (count 0, no records section) gets no
// compression codec, as Kafka writes the empty batches its cleaner keeps:
// clients would otherwise try to decompress nothing.
func SealBatch(b []byte, count int) {
	if count == 0 {
		attrs := binary.BigEndian.Uint16(b[offAttributes:])
		binary.BigEndian.PutUint16(b[offAttributes:], attrs&^uint16(attrCompressionMask))
	}
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// Codec is a compression codec.
type Codec int8

// The codecs of RecordBatch v2.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// String returns the codec's name as ParseCodec accepts it.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// ParseCodec maps a codec name to a Codec.
func ParseCodec(s string) (Codec, error) {
	for c := CodecNone; c <= CodecZstd; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown compression codec %q (none, gzip, snappy, lz4, zstd)", s)
}
