package record

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// Iterator walks the records of zero or more concatenated batches, as a
// fetch response or a segment file holds them:
//
//	it := record.NewIterator(fetched)
//	it.SetStartOffset(want)
//	for it.Next() {
//		r := it.Record()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//	// it.Consumed() bytes were whole batches; it.NextOffset() is where to
//	// fetch next.
//
// For each batch it checks the length, magic and CRC-32C, decompresses the
// records section (capped at the max decompressed size) and decodes every
// record before yielding the first, so a consumer sees either all of a batch
// or, if it is malformed, none of it and an error.
//
// A trailing batch cut short (a fetch returns whole batches up to a byte
// limit, so the last one is often partial) is not an error: iteration stops
// before it, Partial reports it and Consumed tells where it starts.
//
// Control batches (transaction markers) are checked and skipped, as Kafka's
// consumers skip them. Batches whose last offset is below the start offset
// are skipped without checking their CRC or decompressing them; records below
// the start offset in the first batch that reaches it are dropped.
//
// An Iterator is not safe for concurrent use. The zero value is an Iterator
// over no data; Reset gives it data.
type Iterator struct {
	data            []byte
	pos             int   // start of the next batch to read: bytes consumed
	start           int64 // records below this offset are skipped
	end             int64 // with bounded, records above this offset are not yielded
	bounded         bool
	checked         bool  // the batches' CRCs were checked by the caller
	maxDecompressed int   // 0 means DefaultMaxDecompressedSize
	nextOffset      int64 // one past the last batch consumed
	partial         bool
	err             error

	aborted abortFilter // read_committed: the aborted transactions to drop

	hdr  Header         // the batch of the records in recs
	recs []Record       // decoded records of the current batch
	idx  int            // index of the current record in recs
	hdrs []RecordHeader // backing store for the records' headers
	dbuf []byte         // decompressed records section, reused
}

// NewIterator returns an Iterator over the batches in data. The Iterator
// does not copy data; records of uncompressed batches alias it.
func NewIterator(data []byte) *Iterator {
	it := &Iterator{}
	it.Reset(data)
	return it
}

// Reset restarts the Iterator on new data, keeping its start and end
// offsets, its decompression cap and its buffers. Records yielded before
// must not be used afterwards.
func (it *Iterator) Reset(data []byte) {
	it.data = data
	it.pos = 0
	it.nextOffset = it.start
	it.partial = false
	it.err = nil
	it.aborted = abortFilter{}
	it.hdr = Header{}
	it.recs = it.recs[:0]
	it.idx = 0
	it.hdrs = it.hdrs[:0]
}

// SetStartOffset makes the Iterator skip records below offset (0 by
// default). Call it before the first Next after NewIterator or Reset.
func (it *Iterator) SetStartOffset(offset int64) {
	it.start = offset
	if it.nextOffset < offset {
		it.nextOffset = offset
	}
}

// SetEndOffset makes the Iterator read the range from its start offset to
// offset: it yields only the records in it, and ends before the first batch
// that starts past it (which is not consumed). The batches it reads have
// their CRC checked as always, but of their records outside the range it
// reads only the length and offset delta, and none past the end, so that
// reading a small part of a large batch costs little; a record malformed
// inside the CRC is an error only when it is in the range. An Iterator has
// no end until it is set. Call it before the first Next after NewIterator
// or Reset.
func (it *Iterator) SetEndOffset(offset int64) { it.end, it.bounded = offset, true }

// SetChecked tells the Iterator that the caller checked every batch of its
// data with Validate (PartitionReader.FetchBatches in package client
// does), so that reading the data again, range by range, does not compute
// their CRCs again. Reset keeps it.
func (it *Iterator) SetChecked(checked bool) { it.checked = checked }

// SetAborted makes the Iterator a read_committed reader's: it drops the
// records of the aborted transactions a fetch answer listed with the
// batches (each producer's transactional batches from its FirstOffset until
// that producer's abort marker), as Kafka's consumers do. Call it after
// NewIterator or Reset (which forgets the list), before the first Next.
func (it *Iterator) SetAborted(aborted []AbortedTxn) {
	it.aborted = abortFilter{pending: slices.Clone(aborted)}
	slices.SortStableFunc(it.aborted.pending, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
}

// SetMaxDecompressedSize caps the decompressed size of one batch's records
// section; a batch that decompresses to more is an error wrapping ErrCorrupt
// and ErrTooLarge. n <= 0 restores DefaultMaxDecompressedSize. A zstd frame
// declaring a window larger than n is refused too, so n should stay above a
// few MiB (Kafka's Java client writes 2 MiB windows at its default level).
func (it *Iterator) SetMaxDecompressedSize(n int) { it.maxDecompressed = n }

// Next advances to the next record and reports whether there is one. It
// returns false at the end of the data, before a partial trailing batch, or on
// an error (see Err).
func (it *Iterator) Next() bool {
	for {
		if it.idx+1 < len(it.recs) {
			it.idx++
			return true
		}
		if !it.readBatch() {
			return false
		}
	}
}

// Record returns the current record. It and its Headers are valid until the
// next call to Next or Reset. Key, Value and header values alias the input
// (uncompressed batches) or a buffer reused for the next compressed batch:
// copy them to keep them. Record must only be called after Next returned
// true.
func (it *Iterator) Record() *Record { return &it.recs[it.idx] }

// Batch returns the header of the current record's batch.
func (it *Iterator) Batch() Header { return it.hdr }

// Err returns the error that stopped the iteration, nil at a clean end or a
// partial trailing batch. It wraps ErrCorrupt (or ErrShortBatch) and names
// the byte position of the bad batch.
func (it *Iterator) Err() error { return it.err }

// Consumed returns how many bytes of data the batches read so far take:
// after a clean end, all of data but a partial trailing batch; after an error,
// the bytes before the bad batch.
func (it *Iterator) Consumed() int { return it.pos }

// Partial reports whether iteration stopped at a trailing batch that data
// holds only part of (data[Consumed():]).
func (it *Iterator) Partial() bool { return it.partial }

// NextOffset returns the offset to fetch from after the batches consumed so
// far: one past the last consumed batch's last offset (skipped control and
// compacted-away offsets included), or the start offset if none was consumed.
func (it *Iterator) NextOffset() int64 { return it.nextOffset }

// readBatch decodes the batch at it.pos into it.recs. It returns false when
// there is no further whole batch or on an error, which it records.
func (it *Iterator) readBatch() bool {
	it.recs = it.recs[:0]
	it.hdrs = it.hdrs[:0]
	it.idx = -1
	if it.err != nil || it.partial {
		return false
	}
	rest := it.data[it.pos:]
	if len(rest) == 0 {
		return false
	}
	size, err := PeekSize(rest)
	if errors.Is(err, ErrShortBatch) {
		it.partial = true
		return false
	}
	if err != nil {
		return it.fail(err)
	}
	if len(rest) < size {
		// A torn tail, unless the bytes we have already show it is no batch.
		if len(rest) > offMagic && int8(rest[offMagic]) != Magic {
			return it.fail(fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, int8(rest[offMagic]), Magic))
		}
		it.partial = true
		return false
	}
	batch := rest[:size]
	it.hdr, err = ParseHeader(batch)
	if err != nil {
		return it.fail(err)
	}
	h := &it.hdr
	if it.bounded && h.BaseOffset > it.end {
		return false // past the end: left for a later read
	}
	drop := it.aborted.drop(batch, h)
	if h.LastOffset() >= it.start {
		if !it.checked {
			if got := crc32.Checksum(batch[offAttributes:], castagnoli); got != h.CRC {
				return it.fail(fmt.Errorf("%w: CRC-32C %08x, header says %08x", ErrCorrupt, got, h.CRC))
			}
		}
		if !h.IsControl() && !drop {
			if err := it.decodeRecords(h, batch[HeaderSize:]); err != nil {
				it.recs = it.recs[:0]
				return it.fail(err)
			}
		}
	}
	it.pos += size
	if next := h.LastOffset() + 1; next > it.nextOffset {
		it.nextOffset = next
	}
	return true
}

// fail records err, with the bad batch's position, and returns false.
func (it *Iterator) fail(err error) bool {
	it.err = fmt.Errorf("batch at byte %d: %w", it.pos, err)
	return false
}

// decodeRecords decompresses raw, the records section of the batch h, and
// decodes its records into it.recs, dropping those below the start offset.
func (it *Iterator) decodeRecords(h *Header, raw []byte) error {
	if h.RecordCount == 0 && len(raw) == 0 {
		// An empty batch, as Kafka's compaction leaves to keep a producer's
		// state: a header alone, whatever its codec bits say.
		return nil
	}
	if c := h.Compression(); c != CodecNone {
		limit := it.maxDecompressed
		if limit <= 0 {
			limit = DefaultMaxDecompressedSize
		}
		var err error
		it.dbuf, err = decompress(c, it.dbuf[:0], raw, limit)
		if err != nil {
			return err
		}
		raw = it.dbuf
	}
	count := int(h.RecordCount)
	if count > len(raw)/minRecordSize {
		return corruptf("%d records cannot fit in %d bytes", count, len(raw))
	}
	end := int64(math.MaxInt64)
	if it.bounded {
		end = it.end
	}
	d := recordDecoder{h: h, prevDelta: -1, start: it.start, end: end, ranged: it.bounded, recs: it.recs, hdrs: it.hdrs}
	defer func() { it.recs, it.hdrs = d.recs, d.hdrs }() // keep grown buffers
	off := 0
	for i := range count {
		n, err := d.decode(raw[off:])
		if err != nil {
			return fmt.Errorf("record %d of %d (byte %d of the records): %w", i, count, off, err)
		}
		off += n
		if d.ranged && h.BaseOffset+int64(d.prevDelta) >= end {
			return nil // the rest is past the end: not read
		}
	}
	if off != len(raw) {
		return corruptf("%d bytes left after the last of %d records", len(raw)-off, count)
	}
	return nil
}

// corruptf returns an error wrapping ErrCorrupt with a formatted reason.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// AbortedTxn is an aborted transaction as a fetch answer lists it: its
// producer and the offset of its first record.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// abortFilter is a read_committed reader's view of the aborted
// transactions of a fetch: pending are those whose first batch is not
// reached yet (by first offset), active the producers inside one.
type abortFilter struct {
	pending []AbortedTxn
	active  map[int64]struct{}
}

// drop reports whether the batch b (header h) belongs to an aborted
// transaction. An abort marker of an active producer ends its aborted
// transaction.
func (f *abortFilter) drop(b []byte, h *Header) bool {
	for len(f.pending) > 0 && f.pending[0].FirstOffset <= h.LastOffset() {
		if f.active == nil {
			f.active = map[int64]struct{}{}
		}
		f.active[f.pending[0].ProducerID] = struct{}{}
		f.pending = f.pending[1:]
	}
	if _, ok := f.active[h.ProducerID]; !ok || !h.IsTransactional() {
		return false
	}
	if h.IsControl() {
		if m, err := ParseMarker(b, h); err == nil && m.Type == ControlAbort {
			delete(f.active, h.ProducerID)
		}
		return false
	}
	return true
}
