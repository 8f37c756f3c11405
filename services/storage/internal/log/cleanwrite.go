package log

import (
	"errors"
	"fmt"
	"sync"
	"weak"

	"github.com/sluicemq/sluice/libs/record"
)

// cleanChunk is the read and write buffer size of a pass.
const cleanChunk = 1 << 20

// cleaner is one pass's working state. It is used by one goroutine.
type cleaner struct {
	l          *Log
	plan       *cleanPlan
	st         *CleanStats
	mapBytes   int64                  // CleanOptions.MapBytes
	tombBefore int64                  // ms: a latest tombstone at or before this goes
	offsets    *offsetMap             // key hash -> latest offset in the mapped range
	sc         *batchScanner          // reads the old segments
	section    []byte                 // a compressed batch's records, decompressed
	joined     []byte                 // the kept records of a compressed batch, to compress again
	indexBytes []byte                 // a cleaned segment's index file, encoded
	bufs       *cleanBufs             // where the buffers go back to (release)
	mapFn      func(record.RawRecord) // c.mapRecord, bound once
	mapErr     error                  // the first failed insert of mapRecord
	keepFn     func(record.RawRecord) // c.keepRecord, bound once
	recs       int                    // records of the current batch
	kept       [][]byte               // the kept records of the current batch (aliasing it, or section)
	rewrote    bool                   // filterBatch changed the current batch
	idx        indexBuilder           // the new segment's indexes
	out        []byte                 // output not yet written
	copyBuf    []byte                 // unchanged prefix copy
	hook       func(string) error     // CleanOptions.Hook
	throttle   func(int) error        // CleanOptions.Throttle
	interval   int                    // Config.IndexIntervalBytes
	fsys       FileSystem             // the log's
}

// cleanReserve is the part of CleanOptions.MapBytes a pass keeps for its
// other memory: the read chunk, the copy buffer, the output of a segment
// and the new segment's index entries (a few MiB), so that the whole pass,
// not only its key map, stays within MapBytes.
const cleanReserve = 8 << 20

// mapBudget is the key map's share of a pass's memory budget: all but
// cleanReserve, or three quarters of a budget under four reserves.
func mapBudget(budget int64) int64 {
	if budget < 4*cleanReserve {
		return budget * 3 / 4
	}
	return budget - cleanReserve
}

// cleanBufs are a pass's buffers. Like the key map they are kept for the
// next pass (spareBufs), so that back-to-back passes make no garbage of
// them: with a large live heap (the map) the collector runs rarely, and
// that garbage would sit on top of the budget.
type cleanBufs struct {
	scan, copy, out, section, joined, indexBytes []byte
	index                                        []indexEntry
	times                                        []timeEntry
}

var spareBufs struct {
	sync.Mutex
	p weak.Pointer[cleanBufs]
}

// takeBufs returns the spare buffers, or new ones.
func takeBufs() *cleanBufs {
	spareBufs.Lock()
	b := spareBufs.p.Value()
	spareBufs.p = weak.Pointer[cleanBufs]{}
	spareBufs.Unlock()
	if b == nil {
		b = &cleanBufs{scan: make([]byte, cleanChunk), copy: make([]byte, cleanChunk)}
	}
	return b
}

func newCleaner(l *Log, opts CleanOptions, plan *cleanPlan, st *CleanStats) *cleaner {
	l.mu.RLock()
	interval := l.cfg.IndexIntervalBytes
	l.mu.RUnlock()
	b := takeBufs()
	c := &cleaner{
		l: l, plan: plan, st: st, mapBytes: mapBudget(opts.MapBytes),
		tombBefore: opts.Now.Add(-opts.DeleteRetention).UnixMilli(),
		offsets:    &offsetMap{},
		sc:         newScanner(nil, 0, b.scan),
		copyBuf:    b.copy, out: b.out[:0], section: b.section, joined: b.joined, indexBytes: b.indexBytes,
		hook:     opts.Hook,
		throttle: opts.Throttle,
		interval: interval,
		fsys:     l.fs,
		bufs:     b,
	}
	c.idx.index, c.idx.times = b.index[:0], b.times[:0]
	c.sc.onRead = c.didRead
	c.mapFn, c.keepFn = c.mapRecord, c.keepRecord
	return c
}

// release gives the pass's key map and buffers back for the next pass.
func (c *cleaner) release() {
	c.offsets.release()
	c.offsets = nil
	b := c.bufs
	b.scan, b.copy, b.out, b.section, b.joined, b.indexBytes = c.sc.buf, c.copyBuf, c.out[:0], c.section, c.joined, c.indexBytes
	b.index, b.times = c.idx.index[:0], c.idx.times[:0]
	c.bufs = nil
	spareBufs.Lock()
	spareBufs.p = weak.Make(b)
	spareBufs.Unlock()
}

// didRead accounts for n bytes read from an old segment, and throttles.
func (c *cleaner) didRead(n int) error {
	c.st.BytesRead += int64(n)
	return c.throttled(n)
}

// didWrite accounts for n bytes written to a cleaned file, and throttles.
func (c *cleaner) didWrite(n int) error {
	c.st.BytesWritten += int64(n)
	return c.throttled(n)
}

// throttled paces the pass, and stops it once the log is closed (its
// topic deleted, say): the rest of the pass would be wasted I/O.
func (c *cleaner) throttled(n int) error {
	c.l.mu.RLock()
	closed := c.l.closed
	c.l.mu.RUnlock()
	if closed {
		return fmt.Errorf("%w: %w", ErrCleanAborted, ErrClosed)
	}
	if c.throttle == nil {
		return nil
	}
	if err := c.throttle(n); err != nil {
		return fmt.Errorf("%w: throttle: %w", ErrCleanAborted, err)
	}
	return nil
}

// buildMap maps the keys of the dirty segments, whole segments from the one
// holding the first dirty offset while the offsets they span fit in the
// map's capacity (a key takes at least one offset, so the map cannot fill).
// It returns how many of the plan's segments the pass covers: the clean
// ones and the mapped ones (a pass with nothing dirty still rewrites the
// clean ones, where tombstones may have expired). The map gets about the
// slots the mapped span needs (mapTableSlots), not the whole budget.
func (c *cleaner) buildMap() (int, error) {
	p := c.plan
	capacity := mapCapacity(c.mapBytes)
	n, from, span := 0, -1, int64(0)
	for i := range p.segs {
		if p.nexts[i] <= p.firstDirty {
			n = i + 1 // clean already: rewritten too (older values, expired tombstones)
			continue
		}
		s := p.nexts[i] - max(p.segs[i].base, p.firstDirty)
		if span+s > capacity {
			if from < 0 {
				return 0, fmt.Errorf("%w: segment %d spans %d offsets, %d bytes of map hold %d", ErrCleanBudget, p.segs[i].base, s, c.mapBytes, capacity)
			}
			break
		}
		if from < 0 {
			from = i
		}
		span += s
		n = i + 1
	}
	if from < 0 {
		return n, nil
	}
	c.offsets = newOffsetMap(int(mapTableSlots(c.mapBytes, span)))
	for i := from; i < n; i++ {
		err := c.scan(i, func(_ int64, h record.Header, b []byte) error {
			return c.records(b, &h, c.mapFn)
		})
		if err == nil {
			err = c.mapErr
		}
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// mapRecord puts a keyed record of the dirty range in the map.
func (c *cleaner) mapRecord(r record.RawRecord) {
	if r.Key != nil && r.Offset >= c.plan.firstDirty && c.mapErr == nil {
		c.mapErr = c.offsets.put(hashKey(r.Key), r.Offset)
	}
}

// scan validates and visits every batch of the plan's segment i.
func (c *cleaner) scan(i int, fn func(pos int64, h record.Header, b []byte) error) error {
	s, size := c.plan.segs[i], c.plan.sizes[i]
	c.sc.reset(s.log, size)
	verified := s.verified.Load()
	c.sc.trusted = verified // validated already: mapping checked them, or a read
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
		pos += int64(h.Size())
		next = h.LastOffset() + 1
	}
	// Every batch passed its checks: a later scan (the rewrite after the
	// mapping) and reads need not check them again. The swap only moves
	// the watermark if nothing (a truncation) moved it meanwhile.
	if verified < size {
		s.verified.CompareAndSwap(verified, size)
	}
	return nil
}

// records calls fn for each record of the batch b (none for a control
// batch or one of an aborted transaction), decompressing a compressed one into c.section, checking the
// encoding as the reader would.
func (c *cleaner) records(b []byte, h *record.Header, fn func(record.RawRecord)) error {
	if h.IsControl() || c.plan.abortedBatch(h) {
		return nil
	}
	section, err := record.Section(c.section, b, h, record.DefaultMaxDecompressedSize)
	if err != nil {
		return err
	}
	if h.Compression() != record.CodecNone {
		c.section = section
	}
	return record.EachRawSection(section, h, fn)
}
