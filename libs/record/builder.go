package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Errors of the producer side.
var (
	// ErrEmptyBatch: Build was called on a Builder holding no records; a
	// RecordBatch v2 cannot express zero records from a producer.
	ErrEmptyBatch = errors.New("record: no records to build")
	// ErrTooLarge: a batch would exceed MaxBatchSize, or a batch's records
	// decompress to more than the reader's cap. The Iterator wraps it together
	// with ErrCorrupt.
	ErrTooLarge = errors.New("record: batch too large")
)

// NoProducerID, NoProducerEpoch and NoSequence are the header values of a
// batch from a producer that is not idempotent.
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
	// NoLeaderEpoch is the partition leader epoch a producer writes; the leader
	// stamps the real one.
	NoLeaderEpoch int32 = -1
)

// Builder encodes records into one RecordBatch v2, the way Kafka's producer
// does: base offset 0 (the leader stamps the real one), offset deltas 0, 1,
// 2 ..., base timestamp from the first record, create-time timestamps, and the
// records section compressed with the chosen codec.
//
// A Builder is reused batch after batch: Reset keeps its buffers and
// settings, so the uncompressed path allocates nothing per record once the
// buffers have grown to a typical batch. A Builder is not safe for concurrent
// use.
type Builder struct {
	codec         Codec
	leaderEpoch   int32
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	transactional bool

	// buf holds HeaderSize reserved bytes followed by the uncompressed records.
	buf []byte
	// out holds the last compressed batch; reused across Build calls.
	out   []byte
	count int32
	// baseTimestamp is the first record's timestamp; maxTimestamp the largest.
	baseTimestamp int64
	maxTimestamp  int64
}

// NewBuilder returns an empty Builder that compresses with codec. Leader epoch
// and producer fields start as NoLeaderEpoch, NoProducerID, NoProducerEpoch
// and NoSequence.
func NewBuilder(codec Codec) *Builder {
	b := &Builder{
		codec:         codec,
		leaderEpoch:   NoLeaderEpoch,
		producerID:    NoProducerID,
		producerEpoch: NoProducerEpoch,
		baseSequence:  NoSequence,
	}
	b.Reset()
	return b
}

// Reset drops the records appended so far, keeping the codec, producer
// fields, transactional flag, leader epoch and the buffers. Bytes returned by an earlier Build
// must not be used after Reset.
func (b *Builder) Reset() {
	if cap(b.buf) < HeaderSize {
		b.buf = make([]byte, HeaderSize, 16<<10)
	}
	b.buf = b.buf[:HeaderSize]
	b.out = b.out[:0]
	b.count = 0
	b.baseTimestamp = 0
	b.maxTimestamp = 0
}

// SetCodec sets the codec for the next Build. An unknown codec makes Build
// fail.
func (b *Builder) SetCodec(c Codec) { b.codec = c }

// Codec returns the codec Build will use.
func (b *Builder) Codec() Codec { return b.codec }

// SetLeaderEpoch sets the partition leader epoch written in the header
// (NoLeaderEpoch by default; a leader stamps it anyway).
func (b *Builder) SetLeaderEpoch(epoch int32) { b.leaderEpoch = epoch }

// SetProducer sets the idempotent producer's id, epoch and the sequence
// number of the batch's first record.
func (b *Builder) SetProducer(id int64, epoch int16, baseSequence int32) {
	b.producerID, b.producerEpoch, b.baseSequence = id, epoch, baseSequence
}

// SetTransactional marks the next batches as written inside a transaction
// (the transactional attribute); a transactional producer sets it with its
// producer fields.
func (b *Builder) SetTransactional(on bool) { b.transactional = on }

// Count returns the number of records appended since the last Reset.
func (b *Builder) Count() int { return int(b.count) }

// Size returns the size of the batch Build would produce without
// compression: exact for CodecNone, and for the other codecs the size before
// compression, an estimate that is usually above the compressed size
// (incompressible data can exceed it by a few bytes of framing per block).
func (b *Builder) Size() int { return len(b.buf) }

// SizeWith returns what Size would return after Append(rec), letting a
// producer decide whether rec still fits in its size cap.
func (b *Builder) SizeWith(rec Record) int {
	tsDelta := int64(0)
	if b.count > 0 {
		tsDelta = rec.Timestamp - b.baseTimestamp
	}
	body := bodySize(&rec, b.count, tsDelta)
	return len(b.buf) + varintSize(int32(body)) + body
}

// Append adds rec as the next record; its offset delta is the number of
// records already appended, and rec.Offset is ignored. The Builder copies
// rec's key, value and headers, so the caller may reuse them on return.
func (b *Builder) Append(rec Record) {
	if b.count == 0 {
		b.baseTimestamp = rec.Timestamp
		b.maxTimestamp = rec.Timestamp
	} else if rec.Timestamp > b.maxTimestamp {
		b.maxTimestamp = rec.Timestamp
	}
	tsDelta := rec.Timestamp - b.baseTimestamp
	body := bodySize(&rec, b.count, tsDelta)
	b.buf = appendRecord(b.buf, &rec, body, b.count, tsDelta)
	b.count++
}

// Build returns the finished batch. The bytes belong to the Builder: they
// stay valid until the next Reset or Build, and a caller that keeps them
// longer must copy them. Append may continue after Build; a later Build
// covers every record appended since Reset.
func (b *Builder) Build() ([]byte, error) {
	if b.count == 0 {
		return nil, ErrEmptyBatch
	}
	var batch []byte
	switch b.codec {
	case CodecNone:
		batch = b.buf
	case CodecGzip, CodecSnappy, CodecLZ4, CodecZstd:
		out := append(b.out[:0], make([]byte, HeaderSize)...)
		out, err := compress(b.codec, out, b.buf[HeaderSize:])
		if err != nil {
			return nil, fmt.Errorf("record: compressing %d bytes with %v: %w", len(b.buf)-HeaderSize, b.codec, err)
		}
		b.out = out
		batch = out
	default:
		return nil, fmt.Errorf("record: cannot build with unknown %v", b.codec)
	}
	if len(batch)-LogOverhead > MaxBatchSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(batch), MaxBatchSize+LogOverhead)
	}
	attrs := int16(b.codec)
	if b.transactional {
		attrs |= attrTransactional
	}
	putHeader(batch, &Header{
		BaseOffset:      0,
		BatchLength:     int32(len(batch) - LogOverhead),
		LeaderEpoch:     b.leaderEpoch,
		Magic:           Magic,
		Attributes:      attrs,
		LastOffsetDelta: b.count - 1,
		BaseTimestamp:   b.baseTimestamp,
		MaxTimestamp:    b.maxTimestamp,
		ProducerID:      b.producerID,
		ProducerEpoch:   b.producerEpoch,
		BaseSequence:    b.baseSequence,
		RecordCount:     b.count,
	})
	return batch, nil
}

// putHeader writes h into the first HeaderSize bytes of batch, ignoring
// h.CRC, and then computes and writes the CRC-32C of batch[offAttributes:].
// The records must already be in place.
func putHeader(batch []byte, h *Header) {
	be := binary.BigEndian
	be.PutUint64(batch[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(batch[offBatchLength:], uint32(h.BatchLength))
	be.PutUint32(batch[offLeaderEpoch:], uint32(h.LeaderEpoch))
	batch[offMagic] = byte(h.Magic)
	be.PutUint16(batch[offAttributes:], uint16(h.Attributes))
	be.PutUint32(batch[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(batch[offBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(batch[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(batch[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(batch[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(batch[offRecordCount:], uint32(h.RecordCount))
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
}
