package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"

	"github.com/sluicemq/sluice/libs/record"
)

// Producer snapshots: the producer state (producers.go) saved so that Open
// and TruncateTo rebuild it by reading one file and scanning the batch
// headers after it, instead of every header of the log. A snapshot file is
//
//	%020d.snapshot   the state after every batch below that offset, as Kafka
//	                 names its producer snapshots
//
// written (temporary file, fsync, rename) by the flusher after a segment roll
// (the offset is the new segment's base; the file is written after the rolled
// segment's fsync) and by Close (the log end offset). Only the newest
// producerSnapshotsKept files stay. They are derived data:
//
//   - Open deletes those above the recovered log end offset (the log they
//     describe was cut) or below the log start offset, loads the newest
//     readable one (an unreadable one is reported and deleted, and the next
//     older one tried), scans the headers from its offset to the log end, and
//     drops producers whose last batch is below the log start offset. Without
//     a snapshot it scans every segment's headers (once, after an unclean
//     shutdown of a log that never rolled, or after an upgrade).
//   - TruncateTo deletes the snapshots above the new end, with a directory
//     fsync before it returns so none can come back after a crash to describe
//     records appended later at the same offsets, then rebuilds the state the
//     same way up to the new end. ResetTo deletes them all.
//   - EnforceRetention deletes those below the new log start offset.
//
// No scan reads records, only the 61-byte headers (walk with no CRC check).
//
// File format, big endian:
//
//	version   uint16  2
//	crc       uint32  CRC-32C (Castagnoli) of every byte after this field
//	offset    int64   the state covers the batches below it (= the file name)
//	count     uint32  producers, in increasing producer id order
//	count times:
//	  producer id  int64
//	  epoch        int16
//	  batches      uint8   0..ProducerWindow, oldest first
//	  batches times: first sequence int32, last sequence int32,
//	                 first offset int64, last offset int64
//	  if batches is 0: the offset of the marker that bumped the epoch int64
//	open      uint32  open transactions, in increasing producer id order
//	open times: producer id int64, first offset int64
//	aborted   uint32  aborted transactions, in marker order
//	aborted times: producer id int64, first offset int64, marker offset int64
//
// Version 2 added the transaction lists (txn.go) and producers whose epoch
// a marker bumped (no batches); a version 1 file, written before the log
// knew transactions, is read as having none.

// snapshotSuffix names producer snapshot files.
const snapshotSuffix = ".snapshot"

// producerSnapshotsKept is how many snapshot files stay: the newest covers an
// unclean restart with a scan of the active segment, the older ones a
// follower's truncation into the previous segment.
const producerSnapshotsKept = 3

// maxSnapshotBytes bounds what is read of a snapshot file (about two million
// producers of five batches); a larger one is treated as unusable.
const maxSnapshotBytes = 256 << 20

const (
	snapshotVersion    = 2
	snapshotVersionV1  = 1
	snapshotHeaderSize = 2 + 4 + 8 + 4
	snapshotEntryFixed = 8 + 2 + 1
	snapshotBatchSize  = 4 + 4 + 8 + 8
	snapshotOpenSize   = 8 + 8
	snapshotAbortSize  = 8 + 8 + 8
)

var snapshotCRC = crc32.MakeTable(crc32.Castagnoli)

// producerSnapshot is an encoded snapshot waiting for the flusher.
type producerSnapshot struct {
	offset int64
	data   []byte
}

// errStopScan ends a header walk early; it never leaves the package.
var errStopScan = errors.New("scan reached its end offset")

// encodeProducers renders the state as covering the batches below offset.
func encodeProducers(s *producerState, offset int64) []byte {
	pids := make([]int64, 0, len(s.m))
	size := snapshotHeaderSize
	for pid, e := range s.m {
		pids = append(pids, pid)
		size += snapshotEntryFixed + int(e.n)*snapshotBatchSize + 8
	}
	size += 8 + len(s.txns.open)*snapshotOpenSize + len(s.txns.aborted)*snapshotAbortSize
	slices.Sort(pids)
	be := binary.BigEndian
	b := make([]byte, 6, size)
	be.PutUint16(b, snapshotVersion)
	b = be.AppendUint64(b, uint64(offset))
	b = be.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := s.m[pid]
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = append(b, e.n)
		if e.n == 0 {
			b = be.AppendUint64(b, uint64(e.bumpedAt))
		}
		for i := range int(e.n) {
			pb := e.at(i)
			b = be.AppendUint32(b, uint32(pb.FirstSeq))
			b = be.AppendUint32(b, uint32(pb.LastSeq))
			b = be.AppendUint64(b, uint64(pb.FirstOffset))
			b = be.AppendUint64(b, uint64(pb.LastOffset))
		}
	}
	open := make([]int64, 0, len(s.txns.open))
	for pid := range s.txns.open {
		open = append(open, pid)
	}
	slices.Sort(open)
	b = be.AppendUint32(b, uint32(len(open)))
	for _, pid := range open {
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint64(b, uint64(s.txns.open[pid]))
	}
	b = be.AppendUint32(b, uint32(len(s.txns.aborted)))
	for _, a := range s.txns.aborted {
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
	}
	be.PutUint32(b[2:], crc32.Checksum(b[6:], snapshotCRC))
	return b
}

// decodeProducers parses a snapshot file that should cover the batches below
// offset. Every field is checked (version, CRC, offset, counts against the
// bytes present, producer ids increasing, epochs and sequences non-negative,
// batch offsets increasing and below offset, no trailing bytes), so a bad
// file is an error wrapping errBadCheckpoint, never a panic or a large
// allocation.
func decodeProducers(b []byte, offset int64) (producerState, error) {
	be := binary.BigEndian
	bad := func(format string, args ...any) (producerState, error) {
		return producerState{}, fmt.Errorf("%w: producer snapshot: %s", errBadCheckpoint, fmt.Sprintf(format, args...))
	}
	if len(b) < snapshotHeaderSize {
		return bad("%d bytes, less than a header", len(b))
	}
	version := be.Uint16(b)
	if version != snapshotVersion && version != snapshotVersionV1 {
		return bad("version %d, want %d or %d", version, snapshotVersionV1, snapshotVersion)
	}
	if got, want := crc32.Checksum(b[6:], snapshotCRC), be.Uint32(b[2:]); got != want {
		return bad("CRC-32C %08x, header says %08x", got, want)
	}
	if got := int64(be.Uint64(b[6:])); got != offset {
		return bad("covers offset %d, its name says %d", got, offset)
	}
	count := int(be.Uint32(b[14:]))
	rest := b[snapshotHeaderSize:]
	if count > len(rest)/(snapshotEntryFixed+8) { // the smallest entry: a bumped one
		return bad("%d producers in %d bytes", count, len(rest))
	}
	s := producerState{m: make(map[int64]*producerEntry, count)}
	prev := int64(-1)
	for i := range count {
		pid, e, after, err := decodeProducer(rest, version, prev, offset)
		if err != nil {
			return bad("producer %d: %v", i, err)
		}
		s.m[pid], prev, rest = e, pid, after
	}
	if version >= 2 {
		var err error
		if rest, err = decodeTxns(&s.txns, rest, offset); err != nil {
			return bad("%v", err)
		}
	}
	if len(rest) != 0 {
		return bad("%d bytes after the last producer", len(rest))
	}
	return s, nil
}

// decodeProducer parses one producer's entry of a snapshot of the given
// version covering offset, which must follow producer id prev, and returns
// the bytes after it.
func decodeProducer(b []byte, version uint16, prev, offset int64) (int64, *producerEntry, []byte, error) {
	be := binary.BigEndian
	if len(b) < snapshotEntryFixed {
		return 0, nil, nil, errors.New("truncated")
	}
	pid, epoch, n := int64(be.Uint64(b)), int16(be.Uint16(b[8:])), int(b[10])
	rest := b[snapshotEntryFixed:]
	switch {
	case pid <= prev:
		return 0, nil, nil, fmt.Errorf("producer id %d after %d", pid, prev)
	case epoch < 0:
		return 0, nil, nil, fmt.Errorf("producer %d has epoch %d", pid, epoch)
	case n > ProducerWindow || n == 0 && version < 2:
		return 0, nil, nil, fmt.Errorf("producer %d has %d batches", pid, n)
	case len(rest) < n*snapshotBatchSize:
		return 0, nil, nil, fmt.Errorf("producer %d truncated", pid)
	}
	e := &producerEntry{epoch: epoch, bumpedAt: -1}
	if n == 0 {
		if len(rest) < 8 {
			return 0, nil, nil, fmt.Errorf("producer %d truncated", pid)
		}
		e.bumpedAt, rest = int64(be.Uint64(rest)), rest[8:]
		if e.bumpedAt < 0 || e.bumpedAt >= offset {
			return 0, nil, nil, fmt.Errorf("producer %d bumped to epoch %d at offset %d, not below %d", pid, epoch, e.bumpedAt, offset)
		}
	}
	last := int64(-1)
	for range n {
		pb := ProducerBatch{FirstSeq: int32(be.Uint32(rest)), LastSeq: int32(be.Uint32(rest[4:])),
			FirstOffset: int64(be.Uint64(rest[8:])), LastOffset: int64(be.Uint64(rest[16:]))}
		rest = rest[snapshotBatchSize:]
		if pb.FirstSeq < 0 || pb.LastSeq < 0 || pb.FirstOffset <= last || pb.LastOffset < pb.FirstOffset || pb.LastOffset >= offset {
			return 0, nil, nil, fmt.Errorf("producer %d has batch %+v after offset %d, below %d", pid, pb, last, offset)
		}
		last = pb.LastOffset
		e.push(pb)
	}
	return pid, e, rest, nil
}

// decodeTxns parses a version 2 snapshot's transaction lists into t and
// returns the bytes after them.
func decodeTxns(t *txnState, b []byte, offset int64) ([]byte, error) {
	be := binary.BigEndian
	if len(b) < 4 {
		return nil, fmt.Errorf("open transactions truncated")
	}
	n := int(be.Uint32(b))
	b = b[4:]
	if n > len(b)/snapshotOpenSize {
		return nil, fmt.Errorf("%d open transactions in %d bytes", n, len(b))
	}
	prev := int64(-1)
	for range n {
		pid, first := int64(be.Uint64(b)), int64(be.Uint64(b[8:]))
		b = b[snapshotOpenSize:]
		if pid <= prev || first < 0 || first >= offset {
			return nil, fmt.Errorf("open transaction of producer %d from %d after producer %d, below %d", pid, first, prev, offset)
		}
		if t.open == nil {
			t.open = make(map[int64]int64, n)
		}
		t.open[pid], prev = first, pid
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("aborted transactions truncated")
	}
	n = int(be.Uint32(b))
	b = b[4:]
	if n > len(b)/snapshotAbortSize {
		return nil, fmt.Errorf("%d aborted transactions in %d bytes", n, len(b))
	}
	last := int64(-1)
	for range n {
		a := AbortedTxn{ProducerID: int64(be.Uint64(b)), FirstOffset: int64(be.Uint64(b[8:])), LastOffset: int64(be.Uint64(b[16:]))}
		b = b[snapshotAbortSize:]
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.LastOffset <= a.FirstOffset || a.LastOffset <= last || a.LastOffset >= offset {
			return nil, fmt.Errorf("aborted transaction %+v after marker %d, below %d", a, last, offset)
		}
		t.aborted, last = append(t.aborted, a), a.LastOffset
	}
	return b, nil
}

// snapshotPath names the snapshot covering the batches below offset.
func (l *Log) snapshotPath(offset int64) string { return segmentFile(l.dir, offset, snapshotSuffix) }

// snapshotLocked encodes the producer state at the log end offset. A roll
// hands it to the flusher (Log.snapPending; a newer one replaces one not yet
// taken). appendMu must be held.
func (l *Log) snapshotLocked() *producerSnapshot {
	return &producerSnapshot{offset: l.end, data: encodeProducers(&l.producers, l.end)}
}

// writeSnapshot writes a queued snapshot unless a truncation happened since
// the flusher took it (gen is truncGen then). It runs on the flusher. A
// failure is reported, not fatal: the snapshot is derived data.
func (l *Log) writeSnapshot(snap *producerSnapshot, gen uint64) {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	stale := gen != l.truncGen || l.failed != nil || l.closed
	l.mu.RUnlock()
	if stale {
		return
	}
	l.saveSnapshotLocked(snap)
}

// saveSnapshotLocked writes snap's file and deletes the snapshots beyond the
// newest producerSnapshotsKept. ckptMu must be held.
func (l *Log) saveSnapshotLocked(snap *producerSnapshot) {
	l.fsyncs.Add(1)
	if err := writeFileAtomic(l.fs, l.snapshotPath(snap.offset), snap.data); err != nil {
		l.logger.Warn("could not write a producer snapshot; recovery will scan more of the log",
			slog.Int64("offset", snap.offset), slog.Any("err", err))
		return
	}
	if i, found := slices.BinarySearch(l.snaps, snap.offset); !found {
		l.snaps = slices.Insert(l.snaps, i, snap.offset)
	}
	if n := len(l.snaps) - producerSnapshotsKept; n > 0 {
		l.removeSnapshotsLocked(l.snaps[:n])
		l.snaps = slices.Delete(l.snaps, 0, n)
	}
	l.mu.Lock()
	l.dirDirty = true
	l.mu.Unlock()
}

// removeSnapshotsLocked deletes snapshot files; ckptMu must be held (or the
// log unshared). It reports whether it removed any.
func (l *Log) removeSnapshotsLocked(offsets []int64) bool {
	removed := false
	for _, off := range offsets {
		if err := l.fs.Remove(l.snapshotPath(off)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("could not delete a producer snapshot", slog.Int64("offset", off), slog.Any("err", err))
			continue
		}
		removed = true
	}
	return removed
}

// dropSnapshotsLocked deletes the snapshot files outside [from, to] and
// reports whether it removed any. ckptMu must be held (or the log unshared).
func (l *Log) dropSnapshotsLocked(from, to int64) bool {
	keep := l.snaps[:0]
	var drop []int64
	for _, off := range l.snaps {
		if off < from || off > to {
			drop = append(drop, off)
		} else {
			keep = append(keep, off)
		}
	}
	l.snaps = keep
	return l.removeSnapshotsLocked(drop)
}

// saveSnapshotOnClose writes the snapshot at the log end offset; Close calls
// it after its last flush, when nothing changes the log any more.
func (l *Log) saveSnapshotOnClose() {
	l.appendMu.Lock()
	snap := l.snapshotLocked()
	l.appendMu.Unlock()
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	failed := l.failed
	l.mu.RUnlock()
	if failed != nil {
		return
	}
	l.saveSnapshotLocked(snap)
	if err := l.sync(l.dirF); err != nil {
		l.logger.Warn("could not sync the directory after the producer snapshot", slog.Any("err", err))
	}
}

// loadProducers returns the state after every batch below end: the newest
// usable snapshot at or below end plus a header scan from it, with producers
// whose last batch is below the log start offset dropped. Unusable snapshots
// are reported and deleted. ckptMu and appendMu must be held (or the log
// unshared); an error is a read error of a segment.
func (l *Log) loadProducers(end int64) (producerState, error) {
	start := l.start
	st, from, loaded := newProducerState(), l.segs[0].base, false
	for i := len(l.snaps) - 1; i >= 0 && !loaded; i-- {
		off := l.snaps[i]
		if off > end || off < start {
			continue
		}
		b, err := readSmallFile(l.snapshotPath(off), maxSnapshotBytes)
		if err == nil {
			st, err = decodeProducers(b, off)
		}
		if err == nil {
			from, loaded = off, true
			continue
		}
		l.logger.Warn("producer snapshot unusable; deleting it", slog.Int64("offset", off), slog.Any("reason", err))
		l.removeSnapshotsLocked([]int64{off})
		l.snaps = slices.Delete(l.snaps, i, i+1)
		st = newProducerState()
	}
	if !loaded && end > start {
		l.logger.Info("no producer snapshot; rebuilding the producer state from every batch header",
			slog.Int64("start_offset", start), slog.Int64("end_offset", end), slog.Int("segments", len(l.segs)))
	}
	if err := l.scanProducers(&st, from, end); err != nil {
		return producerState{}, err
	}
	st.evictBelow(start)
	return st, nil
}

// scanProducers applies the headers of the batches in [from, to) to st,
// starting each segment's walk at the offset index entry at or below from.
// No record is decoded and no CRC computed, but for the one record of each
// transaction marker. appendMu must be held (or the log
// unshared) so the segment list is stable.
func (l *Log) scanProducers(st *producerState, from, to int64) error {
	if from >= to {
		return nil
	}
	sc := newScanner(nil, 0, make([]byte, epochScanChunk))
	for _, s := range l.segs {
		if s.next <= from || s.base >= to {
			continue
		}
		pos, next := int64(0), s.base
		if from > s.base && len(s.index) > 0 {
			e := s.index[floorEntry(s.index, uint32(min(from-s.base, math.MaxUint32)))]
			pos, next = int64(e.pos), s.base+int64(e.rel)
		}
		out := walk(sc, s, pos, next, math.MaxInt64, func(pos int64, h record.Header) error {
			if h.BaseOffset >= to {
				return errStopScan
			}
			if h.BaseOffset < from {
				return nil
			}
			var m *record.Marker
			if h.IsControl() && h.IsTransactional() {
				b, err := sc.fill(pos, h.Size())
				if err == nil {
					h, err = record.Validate(b)
				}
				if err == nil {
					m, err = markerOf(b, &h)
				}
				if err != nil {
					return err
				}
			}
			st.applyHeader(&h, m)
			return nil
		})
		if out.bad == nil || errors.Is(out.bad, errStopScan) {
			continue
		}
		if pe := (*fs.PathError)(nil); errors.As(out.bad, &pe) {
			return fmt.Errorf("log: producer state scan of segment %d: %w", s.base, out.bad) // a read error
		}
		// Damaged data in an older segment: the scrubber, or the first read
		// of it, finds it and the replica is repaired from its leader. The
		// producers whose batches lie past the damage are missing from the
		// state meanwhile (a retry of theirs is not recognised as one);
		// refusing to open would leave the partition unavailable instead.
		l.logger.Warn("producer state scan stopped early in a damaged segment",
			slog.Int64("segment", s.base), slog.Any("reason", out.bad))
	}
	return nil
}

// recoverProducers sets the producer state in Open, after the segments are
// recovered. It runs before the Log is shared.
func (l *Log) recoverProducers() error {
	start, end := l.start, l.end
	slices.Sort(l.snaps)
	if l.dropSnapshotsLocked(start, end) {
		l.dirDirty = true
	}
	st, err := l.loadProducers(end)
	if err != nil {
		return err
	}
	l.producers = st
	return nil
}

// truncateProducers rebuilds the state after TruncateTo cut the log at end:
// snapshots above end are deleted (durably: a directory fsync) and the state
// is loaded again up to end. appendMu must be held.
func (l *Log) truncateProducers(end int64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if l.dropSnapshotsLocked(math.MinInt64, end) {
		if err := l.sync(l.dirF); err != nil {
			return err
		}
	}
	st, err := l.loadProducers(end)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.producers = st
	l.mu.Unlock()
	return nil
}
