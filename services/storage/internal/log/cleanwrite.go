package log

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluicemq/sluice/libs/record"
)

// Byte positions of the RecordBatch v2 header fields a rewrite changes
// (libs/record keeps its layout private; these are Kafka's format).
const (
	batchLengthAt = 8
	crcAt         = 17
	crcFrom       = 21 // the CRC covers the attributes onwards
	recordCountAt = 57
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// cleanChunk is the read and write buffer size of a pass.
const cleanChunk = 1 << 20

// cleaner is one pass's working state. It is used by one goroutine.
type cleaner struct {
	l          *Log
	plan       *cleanPlan
	maxEntries int
	tombBefore int64              // ms: a latest tombstone at or before this goes
	offsets    map[[16]byte]int64 // key hash -> latest offset in the mapped range
	sc         *batchScanner      // reads the old segments
	it         *record.Iterator   // decodes compressed batches
	recs       []recView          // the records of the current batch
	idx        indexBuilder       // the new segment's indexes
	out        []byte             // output not yet written
	copyBuf    []byte             // unchanged prefix copy
	hook       func(string) error // CleanOptions.Hook
	interval   int                // Config.IndexIntervalBytes
	fsys       FileSystem         // the log's
}

// recView is one record of a batch as the cleaner sees it. raw is its whole
// encoding (length prefix included) for an uncompressed batch, nil otherwise.
type recView struct {
	off  int64
	ts   int64
	key  []byte
	tomb bool
	raw  []byte
}

func newCleaner(l *Log, opts CleanOptions, plan *cleanPlan) *cleaner {
	l.mu.RLock()
	interval := l.cfg.IndexIntervalBytes
	l.mu.RUnlock()
	return &cleaner{
		l: l, plan: plan, maxEntries: opts.MaxMapEntries,
		tombBefore: opts.Now.Add(-opts.DeleteRetention).UnixMilli(),
		offsets:    map[[16]byte]int64{},
		sc:         newScanner(nil, 0, make([]byte, cleanChunk)),
		it:         record.NewIterator(nil),
		hook:       opts.Hook,
		interval:   interval,
		fsys:       l.fs,
	}
}

func hashKey(k []byte) [16]byte {
	sum := sha256.Sum256(k)
	return [16]byte(sum[:16])
}

// buildMap maps the keys of the dirty segments, whole segments from the one
// holding the first dirty offset while their offsets fit in the budget. It
// returns how many of the plan's segments the pass covers: the clean ones
// and the mapped ones (a pass with nothing dirty still rewrites the clean
// ones, where tombstones may have expired).
func (c *cleaner) buildMap(st *CleanStats) (int, error) {
	p := c.plan
	n, mapped := 0, false
	for i := range p.segs {
		if p.nexts[i] <= p.firstDirty {
			n = i + 1 // clean already: rewritten too (older values, expired tombstones)
			continue
		}
		span := p.nexts[i] - max(p.segs[i].base, p.firstDirty)
		if int64(len(c.offsets))+span > int64(c.maxEntries) {
			if !mapped {
				return 0, fmt.Errorf("%w: segment %d spans %d offsets, the map holds %d", ErrCleanBudget, p.segs[i].base, span, c.maxEntries)
			}
			break
		}
		err := c.scan(i, st, func(_ int64, h record.Header, b []byte) error {
			return c.records(b, &h, func(r recView) {
				if r.key != nil && r.off >= p.firstDirty {
					c.offsets[hashKey(r.key)] = r.off
				}
			})
		})
		if err != nil {
			return 0, err
		}
		n, mapped = i+1, true
	}
	return n, nil
}

// scan validates and visits every batch of the plan's segment i.
func (c *cleaner) scan(i int, st *CleanStats, fn func(pos int64, h record.Header, b []byte) error) error {
	s, size := c.plan.segs[i], c.plan.sizes[i]
	c.sc.reset(s.log, size)
	next := s.base
	for pos := int64(0); pos < size; {
		h, b, err := c.sc.batch(pos)
		if err == nil && h.BaseOffset < next {
			err = fmt.Errorf("%w: base offset %d, expected at least %d", record.ErrCorrupt, h.BaseOffset, next)
		}
		if err == nil {
			err = fn(pos, h, b)
		}
		if err != nil {
			if errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrShortBatch) {
				return &CorruptError{Segment: s.base, Pos: pos, ValidEnd: next, Err: err, gen: c.plan.gen}
			}
			return fmt.Errorf("clean: segment %d at position %d: %w", s.base, pos, err)
		}
		st.BytesRead += int64(h.Size())
		pos += int64(h.Size())
		next = h.LastOffset() + 1
	}
	return nil
}

// records calls fn for each record of the batch b (none for a control
// batch), checking the encoding as the reader would.
func (c *cleaner) records(b []byte, h *record.Header, fn func(recView)) error {
	if h.IsControl() {
		return nil
	}
	if h.Compression() != record.CodecNone {
		c.it.Reset(b)
		for c.it.Next() {
			r := c.it.Record()
			fn(recView{off: r.Offset, ts: r.Timestamp, key: r.Key, tomb: r.Value == nil})
		}
		if err := c.it.Err(); err != nil {
			return err
		}
		if c.it.Consumed() != len(b) {
			return fmt.Errorf("%w: batch not decoded whole", record.ErrCorrupt)
		}
		return nil
	}
	return rawRecords(b, h, fn)
}

// rawRecords walks the records section of an uncompressed batch (the layout
// is in libs/record/record.go) up to each value, keeping each record's bytes.
func rawRecords(b []byte, h *record.Header, fn func(recView)) error {
	p, prev := record.HeaderSize, int64(-1)
	for i := int32(0); i < h.RecordCount; i++ {
		length, n := binary.Varint(b[p:])
		if n <= 0 || length < 1 || length > int64(len(b)-p-n) {
			return fmt.Errorf("%w: record %d: bad length", record.ErrCorrupt, i)
		}
		r := fieldReader{b: b[p+n : p+n+int(length)], q: 1} // after the attributes
		tsDelta, offDelta := r.varint(), r.varint()
		key, null := r.bytes()
		_, tomb := r.bytes()
		if r.bad {
			return fmt.Errorf("%w: record %d: bad field", record.ErrCorrupt, i)
		}
		if offDelta <= prev || offDelta > int64(h.LastOffsetDelta) {
			return fmt.Errorf("%w: record %d: offset delta %d after %d", record.ErrCorrupt, i, offDelta, prev)
		}
		prev = offDelta
		if null {
			key = nil
		}
		ts := h.BaseTimestamp + tsDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		fn(recView{off: h.BaseOffset + offDelta, ts: ts, key: key, tomb: tomb, raw: b[p : p+n+int(length)]})
		p += n + int(length)
	}
	if p != len(b) {
		return fmt.Errorf("%w: %d bytes after the last record", record.ErrCorrupt, len(b)-p)
	}
	return nil
}

// fieldReader reads a record body's varints and byte fields; bad is set by
// the first malformed one, after which every read returns zero values.
type fieldReader struct {
	b   []byte
	q   int
	bad bool
}

func (r *fieldReader) varint() int64 {
	if r.bad {
		return 0
	}
	v, m := binary.Varint(r.b[r.q:])
	if m <= 0 {
		r.bad = true
		return 0
	}
	r.q += m
	return v
}

// bytes reads a nullable byte field: its bytes, and whether it is null.
func (r *fieldReader) bytes() ([]byte, bool) {
	n := r.varint()
	switch {
	case r.bad:
		return nil, false
	case n == -1:
		return nil, true
	case n < -1 || n > int64(len(r.b)-r.q):
		r.bad = true
		return nil, false
	}
	v := r.b[r.q : r.q+int(n)]
	r.q += int(n)
	return v, false
}
