package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// Recovery (Open). Nothing read from disk may panic the process: every
// malformed file ends up repaired, rebuilt or reported and skipped.
//
//   - Leftover temporary files (.tmp, .deleted) and index files without a
//     segment are removed; a .log file whose name is not 20 digits is reported
//     and skipped (left in place for an operator).
//   - The last segment (active) is scanned batch by batch, validating length,
//     magic and CRC-32C through a bounded buffer; a torn, zero-filled or
//     corrupt tail is cut at the last valid batch and its indexes are rebuilt
//     from the scan.
//   - An older segment's index and time index are decoded and checked (whole
//     entries, monotonic, inside the segment, matching the batches near the
//     end); the batches after the last index entry are validated too. A
//     missing or inconsistent index is rebuilt from a full validating scan.
//   - A segment that does not end cleanly, or that overlaps the one before it,
//     cuts the log there: every later segment is removed, because a log is a
//     prefix and nothing written after a torn point was acknowledged as
//     flushed.
//   - Then the leader-epoch cache and the high watermark are loaded from their
//     checkpoint files and fitted to the recovered log (recoverEpochs,
//     recoverHighWatermark); a missing or bad checkpoint is rebuilt or
//     defaulted, never an error.
//   - Last, the producer state is loaded from the newest usable producer
//     snapshot and the batch headers after it (recoverProducers,
//     producersnap.go); only a read error of a segment fails Open there.

// recoveryChunk is the scanner's read size during recovery.
const recoveryChunk = 1 << 20

// recover loads the directory into l.segs. It runs before the Log is shared.
func (l *Log) recover() error {
	if err := l.recoverCleanLeftovers(); err != nil {
		return err
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	sc := newScanner(nil, 0, make([]byte, recoveryChunk))
	for i, base := range bases {
		s, err := openSegment(l.fs, l.dir, base)
		if err != nil {
			return err
		}
		if n := len(l.segs); n > 0 && base != l.segs[n-1].next {
			// Segments follow one another: an overlap is a stray file, a gap
			// an older segment that lost its end on a batch boundary.
			msg := "segment overlaps the previous one; cutting the log there"
			if base > l.segs[n-1].next {
				msg = "segment does not start where the previous one ends (records are missing); cutting the log there"
			}
			l.logger.Warn(msg, slog.Int64("segment", base), slog.Int64("previous_end", l.segs[n-1].next))
			s.release()
			return l.cutAfterLast(bases[i:])
		}
		l.segs = append(l.segs, s)
		if i == len(bases)-1 {
			return l.recoverActive(s, sc)
		}
		intact, err := l.loadSegment(s, sc)
		if err != nil {
			return err
		}
		if !intact {
			return l.cutAfterLast(bases[i+1:])
		}
	}
	s, err := createSegment(l.fs, l.dir, 0)
	if err != nil {
		return err
	}
	l.segs = append(l.segs, s)
	l.dirDirty = true
	return nil
}

// cutAfterLast removes the segments named by bases and makes the last loaded
// segment the active one.
func (l *Log) cutAfterLast(bases []int64) error {
	l.recoveryCut = true
	for _, b := range bases {
		l.logger.Warn("removing segment after the cut", slog.Int64("segment", b))
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := l.fs.Remove(segmentFile(l.dir, b, suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove segment %d: %w", b, err)
			}
		}
		l.dirDirty = true
	}
	if len(l.segs) == 0 {
		s, err := createSegment(l.fs, l.dir, 0)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		return nil
	}
	return l.activate(l.segs[len(l.segs)-1])
}

// listSegments returns the base offsets of the well-named segments, sorted,
// after removing leftovers and reporting files it does not know.
func (l *Log) listSegments() ([]int64, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("read directory: %w", err)
	}
	var bases []int64
	indexed := map[int64][]string{} // index files by base, to drop orphans
	for _, e := range entries {
		name := e.Name()
		ext := name[strings.LastIndexByte(name, '.')+1:]
		switch {
		case name == PartitionMetadataFile:
			// Owned by the replica manager (the topic id); not part of the log.
		case name == EpochCheckpointFile || name == HighWatermarkFile || name == CleanerCheckpointFile:
			// Loaded after the segments (recoverEpochs, recoverHighWatermark).
		case e.IsDir():
			l.logger.Warn("unexpected directory in the log; ignored", slog.String("name", name))
		case ext == "snapshot":
			// Producer snapshots, loaded after the segments (recoverProducers).
			if base, ok := parseBase(name, snapshotSuffix); ok {
				l.snaps = append(l.snaps, base)
			} else {
				l.logger.Warn("producer snapshot with a bad name; ignored", slog.String("name", name))
			}
		case ext == "tmp" || ext == "deleted":
			l.logger.Info("removing leftover file", slog.String("name", name))
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("remove %s: %w", name, err)
			}
			l.dirDirty = true
		case ext == "log" || ext == "index" || ext == "timeindex":
			base, ok := parseBase(name, "."+ext)
			switch {
			case !ok:
				l.logger.Warn("segment file with a bad name; skipped", slog.String("name", name))
			case ext == "log":
				bases = append(bases, base)
			default:
				indexed[base] = append(indexed[base], name)
			}
		default:
			l.logger.Warn("unknown file in the log; ignored", slog.String("name", name))
		}
	}
	slices.Sort(bases)
	for base, names := range indexed {
		if _, found := slices.BinarySearch(bases, base); found {
			continue
		}
		for _, name := range names {
			l.logger.Info("removing index without a segment", slog.String("name", name))
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("remove %s: %w", name, err)
			}
			l.dirDirty = true
		}
	}
	return bases, nil
}

// parseBase reads the base offset from a name of 20 digits and suffix.
func parseBase(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil
}

// scanOutcome is where a scan of a segment stopped.
type scanOutcome struct {
	end  int64 // position after the last good batch
	next int64 // offset after the last good batch
	bad  error // why the scan stopped before the segment's end; nil when clean
}

// walk visits the batches of s from position from (whose batch must start at
// or after offset next), validating the CRC of those at or after crcFrom and
// the order of offsets everywhere, and calls fn for each good batch.
func walk(sc *batchScanner, s *segment, from, next, crcFrom int64, fn func(pos int64, h record.Header) error) scanOutcome {
	sc.reset(s.log, s.size)
	pos := from
	for pos < s.size {
		var h record.Header
		var err error
		if pos >= crcFrom {
			h, _, err = sc.batch(pos)
		} else {
			h, err = sc.header(pos)
		}
		if err == nil {
			err = checkBatchPlace(s, h, pos, next)
		}
		if err == nil && fn != nil {
			err = fn(pos, h)
		}
		if err != nil {
			return scanOutcome{end: pos, next: next, bad: fmt.Errorf("position %d: %w", pos, err)}
		}
		pos += int64(h.Size())
		next = h.LastOffset() + 1
	}
	return scanOutcome{end: pos, next: next}
}

// checkBatchPlace checks that a batch's offsets follow the previous batch and
// that the index can address it.
func checkBatchPlace(s *segment, h record.Header, pos, next int64) error {
	switch {
	case h.BaseOffset < next:
		return fmt.Errorf("%w: base offset %d, expected at least %d", record.ErrCorrupt, h.BaseOffset, next)
	case h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1:
		return fmt.Errorf("%w: base offset %d overflows", record.ErrCorrupt, h.BaseOffset)
	case h.LastOffset()-s.base > math.MaxUint32:
		return fmt.Errorf("%w: offset %d too far from segment base %d", record.ErrCorrupt, h.LastOffset(), s.base)
	case pos+int64(h.Size()) > math.MaxUint32:
		return fmt.Errorf("%w: batch ends past 4 GiB", record.ErrCorrupt)
	}
	return nil
}

// rebuild scans all of s validating every batch, cuts a bad tail, and sets the
// in-memory indexes from the scan. It reports whether s was intact.
func (l *Log) rebuild(s *segment, sc *batchScanner) (bool, error) {
	var b indexBuilder
	b.reset(l.cfg.IndexIntervalBytes, nil, nil)
	out := walk(sc, s, 0, s.base, 0, func(pos int64, h record.Header) error {
		b.add(uint32(h.BaseOffset-s.base), pos, h.MaxTimestamp)
		l.scanned = noteEpoch(l.scanned, h) // for recoverEpochs
		return nil
	})
	s.index, s.times, s.next = b.index, b.times, out.next
	s.verified.Store(out.end) // every batch before it passed the scan's checks
	if out.bad == nil {
		return true, nil
	}
	l.logger.Warn("cutting a torn or corrupt segment tail",
		slog.Int64("segment", s.base), slog.Int64("valid_bytes", out.end),
		slog.Int64("removed_bytes", s.size-out.end), slog.Int64("end_offset", out.next),
		slog.Any("reason", out.bad))
	if err := s.fs.Truncate(s.log, out.end); err != nil {
		return false, fmt.Errorf("truncate segment %d: %w", s.base, err)
	}
	s.size = out.end
	return false, nil
}

// recoverActive rebuilds the last segment from a full scan and opens it for
// appends.
func (l *Log) recoverActive(s *segment, sc *batchScanner) error {
	if _, err := l.rebuild(s, sc); err != nil {
		return err
	}
	return l.activate(s)
}

// activate writes s's in-memory indexes to fresh index files, keeps them open
// for appends, and sets the roll clock from the first batch's timestamp.
func (l *Log) activate(s *segment) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	idx, times := s.index, s.times
	// Overwrite in place and then cut to size: usually the files already hold
	// these bytes, and truncating to zero first would free and reallocate
	// their blocks (a synchronous discard on some file systems).
	idxLen, timeLen := int64(len(idx))*indexEntrySize, int64(len(times))*timeEntrySize
	err := s.openIndexFilesLocked(idxLen, timeLen)
	if err == nil {
		_, err = s.fs.WriteAt(s.idxFile, appendIndexBytes(nil, idx), 0)
	}
	if err == nil {
		_, err = s.fs.WriteAt(s.timeFile, appendTimeBytes(nil, times), 0)
	}
	if err != nil {
		return fmt.Errorf("write indexes of segment %d: %w", s.base, err)
	}
	if s.size > 0 {
		s.firstAppend = l.cfg.now()
		if len(times) > 0 && times[0].rel == 0 && times[0].ts >= 0 {
			s.firstAppend = time.UnixMilli(times[0].ts) // as Kafka: the first batch's timestamp
		}
	}
	return nil
}

// loadSegment reads and checks an older segment's indexes, rebuilding them
// when missing or inconsistent. It reports whether the segment ended cleanly.
func (l *Log) loadSegment(s *segment, sc *batchScanner) (bool, error) {
	reason := l.readIndexes(s)
	if reason == nil {
		next, err := l.checkTail(s, sc)
		if err == nil {
			s.next = next
			return true, nil
		}
		reason = err
	}
	l.logger.Warn("rebuilding segment indexes", slog.Int64("segment", s.base), slog.Any("reason", reason))
	intact, err := l.rebuild(s, sc)
	if err != nil {
		return false, err
	}
	if err := writeFileAtomic(l.fs, s.path(indexSuffix), appendIndexBytes(nil, s.index)); err != nil {
		return false, err
	}
	if err := writeFileAtomic(l.fs, s.path(timeIndexSuffix), appendTimeBytes(nil, s.times)); err != nil {
		return false, err
	}
	l.dirDirty = true
	return intact, nil
}

// readIndexes loads both index files of s, returning why they are unusable.
func (l *Log) readIndexes(s *segment) error {
	b, err := os.ReadFile(s.path(indexSuffix))
	if err != nil {
		return fmt.Errorf("offset index: %w", err)
	}
	if s.index, err = decodeIndex(b, s.size); err != nil {
		return fmt.Errorf("offset index: %w", err)
	}
	if b, err = os.ReadFile(s.path(timeIndexSuffix)); err != nil {
		return fmt.Errorf("time index: %w", err)
	}
	if s.times, err = decodeTimeIndex(b); err != nil {
		return fmt.Errorf("time index: %w", err)
	}
	return nil
}

// checkTail checks an older segment's decoded indexes against its last
// batches and that the segment ends on a batch boundary. It reads headers from
// the batch of the last time-index entry (or of the last offset-index entry, if
// later) to the end, validating the CRC of the batches after the last
// offset-index entry. An index that lost its last entries shows up as a batch
// that should have had one. It returns the offset after the last batch.
func (l *Log) checkTail(s *segment, sc *batchScanner) (int64, error) {
	if s.size == 0 {
		if len(s.times) > 0 {
			return 0, errors.New("time index entries for an empty segment")
		}
		return s.base, nil
	}
	lastIdx := s.index[len(s.index)-1] // decodeIndex: non-empty for a non-empty segment
	from, fromRel := int64(lastIdx.pos), lastIdx.rel
	limitTs, sawTime := int64(math.MinInt64), true
	if n := len(s.times); n > 0 {
		last := s.times[n-1]
		limitTs, sawTime = last.ts, false
		if last.rel < fromRel {
			i := floorEntry(s.index, last.rel)
			from, fromRel = int64(s.index[i].pos), s.index[i].rel
		}
	} else {
		from, fromRel = 0, 0 // no time entry at all: no batch may carry a timestamp
	}
	j := floorEntry(s.index, fromRel) // the entry at from
	entryPos, interval := from, int64(l.cfg.IndexIntervalBytes)
	out := walk(sc, s, from, s.base+int64(fromRel), int64(lastIdx.pos), func(pos int64, h record.Header) error {
		rel := uint32(h.BaseOffset - s.base)
		if j < len(s.index) && int64(s.index[j].pos) < pos+int64(h.Size()) {
			if e := s.index[j]; int64(e.pos) != pos || e.rel != rel {
				return fmt.Errorf("offset index entry (%d, %d) does not match the batch (%d, %d)", e.rel, e.pos, rel, pos)
			}
			j++
			entryPos = pos
		} else if pos-entryPos >= interval {
			// Appends with this interval would have indexed this batch: the
			// index lost its last entries (or the interval shrank; rebuilding
			// is right then too).
			return fmt.Errorf("batch at %d has no offset index entry", pos)
		}
		switch {
		case !sawTime && rel == s.times[len(s.times)-1].rel:
			if h.MaxTimestamp != limitTs {
				return fmt.Errorf("time index says %d for the batch at %d, batch says %d", limitTs, pos, h.MaxTimestamp)
			}
			sawTime = true
		case h.MaxTimestamp > limitTs:
			return fmt.Errorf("batch at %d has timestamp %d but no time index entry", pos, h.MaxTimestamp)
		}
		return nil
	})
	switch {
	case out.bad != nil:
		return 0, out.bad
	case j != len(s.index):
		return 0, fmt.Errorf("offset index entry %d points past the last batch", j)
	case !sawTime:
		return 0, errors.New("the last time index entry names no batch")
	}
	return out.next, nil
}
