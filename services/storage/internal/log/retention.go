package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// EnforceRetention deletes the oldest non-active segments that retention
// allows: while the oldest one's largest timestamp is more than RetentionMs
// before now, or the log without it would still hold RetentionBytes or more
// (Kafka's rules). The log start offset moves to the first remaining segment;
// the leader-epoch cache drops the entries wholly below it (the last one
// starting at or before it moves up to it, and the checkpoint file is
// rewritten), the high watermark is raised to it if below, and idempotent
// producers whose last batch was deleted are forgotten, with the producer
// snapshots below the new start (producersnap.go). Readers holding
// a Slice of a deleted segment keep reading it until they release it. It
// returns how many segments it deleted.
func (l *Log) EnforceRetention(now time.Time) (deleted int, err error) {
	l.appendMu.Lock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.appendMu.Unlock()
		return 0, ErrClosed
	}
	n, held := retentionVictims(l.segs, l.cfg, now.UnixMilli(), l.hw.Load(), l.start, l.uploaded.Load())
	l.heldBack.Store(int64(held))
	victims := slices.Clone(l.segs[:n])
	epochsChanged := false
	if n > 0 {
		l.segs = slices.Clone(l.segs[n:])
		l.dirDirty = true
		l.start = max(l.start, l.segs[0].base)
		if !l.cfg.Tiered {
			// A tiered log keeps the epochs of its remote part: the
			// partition's log still starts there.
			l.epochs, epochsChanged = truncateEpochsFromStart(l.epochs, l.start)
		}
		if l.hw.Load() < l.start {
			l.hw.Store(l.start)
		}
		l.producers.evictBelow(l.start)
	}
	start := l.start
	l.mu.Unlock()
	l.appendMu.Unlock()

	if held > 0 {
		l.logger.Warn("retention holds back segments not yet in remote storage: the disk keeps them until they are uploaded",
			slog.Int("segments", held), slog.Int64("uploaded_end", l.uploaded.Load()))
	}

	// File removal needs no lock: these names are below the log start offset
	// now and no roll can create them again.
	var errs []error
	for _, s := range victims {
		s.retire()
		if err := s.removeFiles(); err != nil {
			errs = append(errs, fmt.Errorf("log: delete segment %d: %w", s.base, err))
		}
		l.logger.Info("retention deleted segment", slog.Int64("segment", s.base),
			slog.Int64("bytes", s.size), slog.Int64("start_offset", start))
		s.release()
	}
	if n > 0 {
		l.ckptMu.Lock()
		l.dropSnapshotsLocked(start, math.MaxInt64)
		l.ckptMu.Unlock()
	}
	if epochsChanged {
		if err := l.saveEpochs(); err != nil {
			l.mu.Lock()
			errs = append(errs, l.failLocked(err))
			l.mu.Unlock()
		}
	}
	if n > 0 {
		l.requestFlush() // sync the directory
	}
	return n, errors.Join(errs...)
}

// retentionVictims returns how many of the oldest segments retention deletes;
// the last (active) segment always stays, and so does every segment holding
// offsets at or above the high watermark (records not yet replicated to the
// ISR are never deleted, as in Kafka). Segments wholly below the log start
// offset (records deleted by a client) go whatever the retention settings.
// A tiered log (Config.Tiered) deletes only segments wholly below uploaded,
// the end of what the remote log holds; held is how many more retention
// would delete but must keep until they are uploaded.
func retentionVictims(segs []*segment, cfg Config, nowMs, hw, start, uploaded int64) (n, held int) {
	var total int64
	for _, s := range segs {
		total += s.size
	}
	for ; n < len(segs)-1; n++ {
		s := segs[n]
		if s.next > hw {
			break
		}
		deleted := s.next <= start
		if !pastRetention(s, cfg, nowMs, total) && !deleted {
			break
		}
		if cfg.Tiered && !deleted && s.next > uploaded {
			held = countHeld(segs[n:len(segs)-1], cfg, nowMs, hw, total)
			break
		}
		total -= s.size
	}
	return n, held
}

// pastRetention reports whether retention deletes s, the oldest segment
// of a log of total bytes: its largest timestamp is older than
// RetentionMs, or the log without it still holds RetentionBytes.
func pastRetention(s *segment, cfg Config, nowMs, total int64) bool {
	return cfg.RetentionMs >= 0 && nowMs-s.largestTimestamp() > cfg.RetentionMs ||
		cfg.RetentionBytes >= 0 && total-s.size >= cfg.RetentionBytes
}

// countHeld counts the segments from the front of segs that retention
// would delete (below hw, past the time or size bound) were they uploaded.
func countHeld(segs []*segment, cfg Config, nowMs, hw, total int64) int {
	held := 0
	for _, s := range segs {
		if s.next > hw || !pastRetention(s, cfg, nowMs, total) {
			break
		}
		total -= s.size
		held++
	}
	return held
}

// TruncateTo removes every record at and after offset, which must be a batch
// boundary (ErrNotBatchBoundary otherwise) between the log start and end
// offsets (ErrOffsetOutOfRange otherwise): later segments are deleted and the
// segment holding offset is cut, with its indexes, and becomes active again.
// The log end offset becomes offset and the flushed offset is lowered to it.
// A follower calls this to drop a suffix the leader does not have.
//
// Leader-epoch cache entries starting at or after offset are dropped and the
// checkpoint file rewritten durably before it returns; the high watermark
// becomes min(high watermark, offset). Producer snapshots above offset are
// deleted durably and the producer state is rebuilt from the newest one left
// and the batch headers after it (producersnap.go).
//
// It holds the append lock throughout, file truncation and the checkpoint's
// fsyncs included, so no append lands in a file being cut. A reader holding a
// Slice of a cut segment may then read fewer bytes than the Slice's Size (an
// unexpected EOF); one holding a deleted segment reads it until released.
func (l *Log) TruncateTo(offset int64) error {
	return l.truncate(offset, nil, func() (int, int64, error) { return l.findCut(offset) })
}

// truncate is TruncateTo with the cut (segment index and position) given by
// find. check, when not nil, runs first and refuses the cut with its error;
// both run with appendMu held.
func (l *Log) truncate(offset int64, check func() error, find func() (int, int64, error)) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	l.mu.RLock()
	err, start, end := l.checkLocked(), l.segs[0].base, l.end
	l.mu.RUnlock()
	switch {
	case err != nil:
		return err
	case offset < start || offset > end:
		return fmt.Errorf("%w: truncate to %d, the log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, end)
	case offset == end:
		return nil
	}
	// With appendMu held the segment list and the active segment's fields are
	// stable (retention also takes appendMu).
	k, cut, err := find()
	if err != nil {
		return err
	}
	s := l.segs[k]
	idx := cutIndex(s.index, cut)
	times := cutTimes(s.times, offset-s.base)

	l.mu.Lock()
	victims := slices.Clone(l.segs[k+1:])
	l.segs = slices.Clone(l.segs[:k+1])
	s.index, s.times, s.size, s.next = idx, times, cut, offset
	if s.verified.Load() > cut {
		s.verified.Store(cut)
	}
	l.end = offset
	if l.flushed.Load() > offset {
		l.flushed.Store(offset)
	}
	if l.hw.Load() > offset {
		l.hw.Store(offset)
	}
	l.start = min(l.start, offset)
	var epochsChanged bool
	l.epochs, epochsChanged = truncateEpochsFromEnd(l.epochs, offset)
	if l.snapPending != nil && l.snapPending.offset > offset {
		l.snapPending = nil // it describes records that are gone
	}
	l.truncGen++
	l.cleanCut = min(l.cleanCut, offset) // the cleaner's range must not keep a cut-off clean part
	l.dirDirty = l.dirDirty || len(victims) > 0
	l.notifyLocked()
	l.mu.Unlock()

	errs := l.cutFiles(s, cut, len(idx), len(times), victims)
	if epochsChanged {
		errs = errors.Join(errs, l.saveEpochs())
	}
	if errs == nil {
		errs = l.truncateProducers(offset)
	}
	l.logger.Info("truncated log", slog.Int64("end_offset", offset),
		slog.Int64("segment", s.base), slog.Int("segments_deleted", len(victims)))
	if errs != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failLocked(errs)
	}
	return nil
}

// findCut locates offset: the segment to keep as active and the position to
// cut it at. appendMu must be held.
func (l *Log) findCut(offset int64) (int, int64, error) {
	i := 0
	for i+1 < len(l.segs) && l.segs[i+1].base <= offset {
		i++
	}
	s := l.segs[i]
	if offset == s.base && i > 0 {
		return i - 1, l.segs[i-1].size, nil // drop segment i whole
	}
	v := segView{seg: s, size: s.size, next: s.next, index: s.index}
	sc := getScanner(s.log, s.size)
	defer putScanner(sc)
	pos, h, err := v.find(sc, offset, func(h record.Header) bool {
		return h.LastOffset() >= offset
	})
	switch {
	case errors.Is(err, errNotFound):
		return i, s.size, nil // offset is past the segment's last batch
	case err != nil:
		return 0, 0, err
	case h.BaseOffset < offset:
		return 0, 0, fmt.Errorf("%w: offset %d is inside the batch %d-%d", ErrNotBatchBoundary, offset, h.BaseOffset, h.LastOffset())
	}
	return i, pos, nil
}

// cutIndex returns a copy of the entries of batches before position cut.
func cutIndex(idx []indexEntry, cut int64) []indexEntry {
	n := 0
	for n < len(idx) && int64(idx[n].pos) < cut {
		n++
	}
	return slices.Clone(idx[:n])
}

// cutTimes returns a copy of the entries of batches before relative offset rel.
func cutTimes(times []timeEntry, rel int64) []timeEntry {
	n := 0
	for n < len(times) && int64(times[n].rel) < rel {
		n++
	}
	return slices.Clone(times[:n])
}

// cutFiles does TruncateTo's file work: cut s and its indexes, reopen them for
// appends, delete the later segments. appendMu must be held.
func (l *Log) cutFiles(s *segment, cut int64, nIdx, nTimes int, victims []*segment) error {
	var errs []error
	if err := s.fs.Truncate(s.log, cut); err != nil {
		errs = append(errs, fmt.Errorf("truncate segment %d: %w", s.base, err))
	}
	if err := s.reopenForAppend(nIdx, nTimes); err != nil {
		errs = append(errs, fmt.Errorf("segment %d: %w", s.base, err))
	}
	if cut == 0 {
		s.firstAppend = time.Time{}
	}
	for _, v := range victims {
		v.retire()
		if err := v.removeFiles(); err != nil {
			errs = append(errs, fmt.Errorf("delete segment %d: %w", v.base, err))
		}
		v.release()
	}
	return errors.Join(errs...)
}
