package log

import (
	"crypto/sha256"
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
	recs       []record.RawRecord // the records of the current batch (Bytes nil for a compressed one)
	idx        indexBuilder       // the new segment's indexes
	out        []byte             // output not yet written
	copyBuf    []byte             // unchanged prefix copy
	hook       func(string) error // CleanOptions.Hook
	interval   int                // Config.IndexIntervalBytes
	fsys       FileSystem         // the log's
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
			return c.records(b, &h, func(r record.RawRecord) {
				if r.Key != nil && r.Offset >= p.firstDirty {
					c.offsets[hashKey(r.Key)] = r.Offset
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
func (c *cleaner) records(b []byte, h *record.Header, fn func(record.RawRecord)) error {
	if h.IsControl() {
		return nil
	}
	if h.Compression() != record.CodecNone {
		c.it.Reset(b)
		for c.it.Next() {
			r := c.it.Record()
			fn(record.RawRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, NullValue: r.Value == nil})
		}
		if err := c.it.Err(); err != nil {
			return err
		}
		if c.it.Consumed() != len(b) {
			return fmt.Errorf("%w: batch not decoded whole", record.ErrCorrupt)
		}
		return nil
	}
	return record.EachRaw(b, h, fn)
}
