package log

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Corruption on disk. Recovery validates the active segment and the tail of
// every older one; the rest of an older segment is validated the first time
// it is read (before anything of it is sent) or scrubbed (Verify), and each
// segment remembers how far it was validated (segment.verified), so a range
// is checked once per process. Batches appended in this process were
// validated on their way in.

// CorruptError says where a log holds bytes that fail a batch's checks.
type CorruptError struct {
	Segment int64 // base offset of the segment
	Pos     int64 // file position of the bad batch
	// ValidEnd is the offset the bad batch should start at: the log is a
	// valid prefix up to it (TruncateCorrupt cuts there).
	ValidEnd int64
	Err      error
	gen      uint64 // the log's truncGen when the damage was seen
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("log: segment %d: corrupt batch at position %d (offset %d): %v", e.Segment, e.Pos, e.ValidEnd, e.Err)
}

// Unwrap lets errors.Is find ErrCorruptData and the batch check's error.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorruptData, e.Err} }

// verifyBufs are the validation scanners: whole batches pass through them.
var verifyBufs = sync.Pool{New: func() any { return newScanner(nil, 0, make([]byte, 1<<20)) }}

func getVerifier() *batchScanner { return verifyBufs.Get().(*batchScanner) }

func putVerifier(sc *batchScanner) {
	if cap(sc.buf) <= 4<<20 { // grown for a huge batch: let it go
		sc.f = nil
		verifyBufs.Put(sc)
	}
}

// verify validates the batches of [from, to) not validated yet and advances
// the segment's watermark when the range extends it. from and to are batch
// boundaries inside the view.
func (v *segView) verify(from, to int64) error {
	done := v.seg.verified.Load()
	if to <= done {
		return nil
	}
	start := max(from, done)
	if from > done {
		start = from // a range past a gap: checked, but the watermark stays
	}
	sc := getVerifier()
	defer putVerifier(sc)
	sc.reset(v.seg.log, v.size)
	for pos := start; pos < to; {
		h, _, err := sc.batch(pos)
		if err != nil {
			return v.corruptAt(pos, err)
		}
		pos += int64(h.Size())
	}
	if start <= done { // contiguous with the watermark: move it
		for cur := v.seg.verified.Load(); cur < to && !v.seg.verified.CompareAndSwap(cur, to); cur = v.seg.verified.Load() {
		}
	}
	return nil
}

// corruptAt builds the CorruptError of a bad batch at pos: the offset it
// should start at comes from the index entry at or before pos and the
// headers of the batches between (which are whole: they were walked to get
// to pos).
func (v *segView) corruptAt(pos int64, cause error) error {
	next, at := v.seg.base, int64(0)
	for _, e := range v.index {
		if int64(e.pos) > pos {
			break
		}
		next, at = v.seg.base+int64(e.rel), int64(e.pos)
	}
	sc := getScanner(v.seg.log, v.size)
	defer putScanner(sc)
	for at < pos {
		h, err := sc.header(at)
		if err != nil {
			break // the index entry itself is off: cut from it
		}
		next, at = h.LastOffset()+1, at+int64(h.Size())
	}
	return &CorruptError{Segment: v.seg.base, Pos: pos, ValidEnd: next, Err: cause, gen: v.gen}
}

// Verify validates every batch of the log not validated yet, oldest first,
// reading at most rate bytes per second (0: unbounded), until ctx ends. It
// returns the first *CorruptError found, ctx's error, or nil when the whole
// log is validated.
func (l *Log) Verify(ctx context.Context, rate int64) error {
	sc := getVerifier()
	defer putVerifier(sc)
	start := time.Now()
	var read int64
	for i := 0; ; i++ {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return ErrClosed
		}
		if i >= len(l.segs) {
			l.mu.RUnlock()
			return nil
		}
		v := l.viewLocked(l.segs[i])
		l.mu.RUnlock()
		err := l.verifySegment(ctx, &v, sc, rate, start, &read)
		v.seg.release()
		if err != nil {
			return err
		}
	}
}

// verifySegment is Verify's work on one segment.
func (l *Log) verifySegment(ctx context.Context, v *segView, sc *batchScanner, rate int64, start time.Time, read *int64) error {
	sc.reset(v.seg.log, v.size)
	for pos := v.seg.verified.Load(); pos < v.size; pos = v.seg.verified.Load() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if rate > 0 {
			if ahead := time.Duration(float64(*read)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
				t := time.NewTimer(ahead)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
		}
		h, _, err := sc.batch(pos)
		if err != nil {
			if l.cutSince(v.gen) {
				// The log was cut under this view (a follower's truncation
				// while the scrubber waited for its rate): what it read past
				// the new end is not damage. The next pass looks again.
				return nil
			}
			return v.corruptAt(pos, err)
		}
		end := pos + int64(h.Size())
		*read += int64(h.Size())
		v.seg.verified.CompareAndSwap(pos, end)
	}
	return nil
}

// cutSince reports whether the log was truncated or reset after a view with
// truncation generation gen was taken.
func (l *Log) cutSince(gen uint64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.truncGen != gen
}

// TruncateCorrupt cuts the log where e says it stops being valid: the bad
// batch and everything after it go (a replica fetches them again from its
// leader). e must come from this log. A report from before the log was last
// cut is refused with ErrStaleDamageReport: its position and offset describe
// a file that has changed since, and cutting there could leave the log
// claiming records it does not hold.
func (l *Log) TruncateCorrupt(e *CorruptError) error {
	l.logger.Error("cutting the log at corrupt data", slog.Int64("segment", e.Segment), slog.Int64("position", e.Pos),
		slog.Int64("end_offset", e.ValidEnd), slog.Any("reason", e.Err))
	// The staleness check comes before the range check: a report from
	// before a cut below its offset is stale, not out of range.
	stale := func() error {
		if l.cutSince(e.gen) { // appendMu is held: no cut can happen meanwhile
			return fmt.Errorf("%w: segment %d position %d", ErrStaleDamageReport, e.Segment, e.Pos)
		}
		return nil
	}
	return l.truncate(e.ValidEnd, stale, func() (int, int64, error) {
		for i, s := range l.segs {
			if s.base == e.Segment {
				if e.Pos == 0 && i > 0 {
					return i - 1, l.segs[i-1].size, nil
				}
				return i, e.Pos, nil
			}
		}
		return 0, 0, fmt.Errorf("%w: segment %d is gone", ErrOffsetOutOfRange, e.Segment)
	})
}
