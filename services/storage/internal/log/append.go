package log

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// AppendInfo describes what one append wrote.
type AppendInfo struct {
	BaseOffset   int64 // offset of the first record appended
	LastOffset   int64 // offset of the last record appended
	MaxTimestamp int64 // largest batch max timestamp; -1 when no batch has one
	Batches      int   // batches appended
	Bytes        int   // bytes appended
	AppendTime   int64 // wall-clock ms of the append (Config.Now)
	// Duplicate: every batch was an idempotent producer's retry of a batch
	// already in the log; nothing was appended, and BaseOffset and LastOffset
	// are the original batches' (Batches and Bytes are 0).
	Duplicate bool
}

// Append appends one or more concatenated RecordBatch v2 batches as the
// partition leader. It validates every batch (record.Validate: length, magic,
// CRC-32C; the errors wrap record.ErrCorrupt or record.ErrShortBatch, or
// ErrBatchTooLarge) before writing anything, then assigns consecutive offsets
// from the log end offset, stamps each batch's base offset and leaderEpoch in
// place (batches is modified), rolls the segment if needed, and writes the
// whole slice with one write. It returns once the bytes are in the page cache;
// WaitFlushed(ctx, info.LastOffset+1) waits for them to be on disk.
//
// Batches of idempotent producers are checked first (producers.go): a
// stale producer epoch or a sequence gap refuses the whole append with
// ErrInvalidProducerEpoch, ErrOutOfOrderSequence, ErrDuplicateSequence or
// ErrMixedDuplicates, and
// an append that only repeats batches already in the log writes nothing and
// returns their original offsets with info.Duplicate set.
//
// leaderEpoch is the caller's leader epoch. One below the latest epoch in the
// leader-epoch cache is refused with ErrStaleEpoch (a fenced leader must not
// write); one above it starts a cache entry at info.BaseOffset, made durable
// in the checkpoint file before the batches are written. A negative epoch
// (record.NoLeaderEpoch, a log used without replication) is never cached.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.append(batches, leaderEpoch, originClient)
}

// AppendReplica appends batches fetched from the leader as a follower: the
// offsets and leader epochs already stamped are kept. The first batch must
// start at the log end offset and offsets must increase from batch to batch
// (ErrOffsetMismatch otherwise); on a compacted log (Config.Compact) the first
// batch may start above the log end offset, since the leader's cleaner may
// have removed the offsets between. Each batch whose leader epoch is greater than
// the latest in the leader-epoch cache (and every earlier batch's) starts a
// cache entry at its base offset, made durable before the batches are
// written; a batch with a lower epoch adds nothing. Idempotent producers'
// batches update the producer state without being checked: the leader did.
func (l *Log) AppendReplica(batches []byte) (AppendInfo, error) {
	return l.append(batches, 0, originReplica)
}

// batchSummary is what validation learned about an append.
type batchSummary struct {
	batches int
	offsets int64 // offsets the batches take (sum of lastOffsetDelta+1)
	first   int64 // replica: first base offset
	last    int64 // replica: last offset
	maxTs   int64
}

// validateBatches checks every batch of an append without touching the log.
// keys (a leader append to a compacted log) refuses records without a key;
// control batches are refused unless controlOK (a follower's, or the
// coordinator's markers).
func validateBatches(b []byte, maxBatch int, replica, keys, controlOK bool) (batchSummary, error) {
	sum := batchSummary{maxTs: -1}
	var it *record.Iterator // decompresses for the key check
	if len(b) == 0 {
		return sum, fmt.Errorf("%w: no batch to append", record.ErrShortBatch)
	}
	if len(b) > MaxSegmentBytes {
		return sum, fmt.Errorf("%w: %d bytes in one append", ErrBatchTooLarge, len(b))
	}
	for pos := 0; pos < len(b); sum.batches++ {
		h, err := record.Validate(b[pos:])
		if err != nil {
			return sum, fmt.Errorf("batch %d at byte %d: %w", sum.batches, pos, err)
		}
		if h.Size() > maxBatch {
			return sum, fmt.Errorf("%w: batch %d is %d bytes, the limit is %d", ErrBatchTooLarge, sum.batches, h.Size(), maxBatch)
		}
		if !replica && (h.RecordCount < 1 || h.LastOffsetDelta != h.RecordCount-1) {
			return sum, fmt.Errorf("%w: batch %d has %d records and last offset delta %d", record.ErrCorrupt, sum.batches, h.RecordCount, h.LastOffsetDelta)
		}
		if h.IsControl() && !controlOK {
			return sum, fmt.Errorf("%w: batch %d of producer %d", ErrControlBatch, sum.batches, h.ProducerID)
		}
		if !replica {
			if err := checkProducerFields(&h); err != nil {
				return sum, fmt.Errorf("batch %d: %w", sum.batches, err)
			}
		}
		if keys && !h.IsControl() {
			if err := checkKeys(b[pos:pos+h.Size()], &h, &it); err != nil {
				return sum, fmt.Errorf("batch %d: %w", sum.batches, err)
			}
		}
		if replica {
			if h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
				return sum, fmt.Errorf("%w: batch %d has base offset %d", ErrOffsetMismatch, sum.batches, h.BaseOffset)
			}
			if sum.batches > 0 && h.BaseOffset <= sum.last {
				return sum, fmt.Errorf("%w: batch %d starts at %d, after offset %d", ErrOffsetMismatch, sum.batches, h.BaseOffset, sum.last)
			}
			if sum.batches == 0 {
				sum.first = h.BaseOffset
			}
			sum.last = h.LastOffset()
		}
		sum.offsets += int64(h.LastOffsetDelta) + 1
		sum.maxTs = max(sum.maxTs, h.MaxTimestamp)
		pos += h.Size()
	}
	return sum, nil
}

// appendOrigin is who appends: a producer through the leader, the leader's
// fetch as a follower, or the transaction coordinator through the leader
// (AppendMarker).
type appendOrigin uint8

const (
	originClient appendOrigin = iota
	originReplica
	originCoordinator
)

func (l *Log) append(b []byte, epoch int32, origin appendOrigin) (AppendInfo, error) {
	replica := origin == originReplica
	l.mu.RLock()
	maxBatch, compact := l.cfg.MaxBatchBytes, l.cfg.Compact
	l.mu.RUnlock()
	// CRC-32C runs before taking the append lock, so appenders validate in
	// parallel.
	sum, err := validateBatches(b, maxBatch, replica, compact && !replica, origin != originClient)
	if err != nil {
		return AppendInfo{}, err
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err, cfg := l.checkLocked(), l.cfg
	l.mu.RUnlock()
	if err != nil {
		return AppendInfo{}, err
	}
	if latest := max(latestEpoch(l.epochs), l.fence); !replica && epoch < latest {
		return AppendInfo{}, fmt.Errorf("%w: append with leader epoch %d, the log has epoch %d", ErrStaleEpoch, epoch, latest)
	}
	now := cfg.now()
	base, last := l.end, l.end+sum.offsets-1
	if replica {
		if sum.first < l.end || sum.first > l.end && !cfg.Compact {
			return AppendInfo{}, fmt.Errorf("%w: first batch at offset %d, log end offset is %d", ErrOffsetMismatch, sum.first, l.end)
		}
		last = sum.last
	}
	if err := l.collectProducers(b, base, replica); err != nil {
		return AppendInfo{}, err
	}
	if err := l.checkTxns(origin); err != nil {
		return AppendInfo{}, err
	}
	if !replica && len(l.pending) > 0 {
		first, lastDup, dup, err := l.checkProducers(sum.batches)
		if err != nil {
			return AppendInfo{}, err
		}
		if dup {
			return AppendInfo{BaseOffset: first, LastOffset: lastDup, MaxTimestamp: -1,
				AppendTime: now.UnixMilli(), Duplicate: true}, nil
		}
	}
	if l.space != nil {
		if err := l.space.Reserve(int64(len(b))); err != nil {
			return AppendInfo{}, err
		}
	}
	s := l.segs[len(l.segs)-1]
	if shouldRoll(s, cfg, len(b), last, now) {
		if s, err = l.roll(); err != nil {
			return AppendInfo{}, err
		}
	}
	if last-s.base > math.MaxUint32 {
		return AppendInfo{}, fmt.Errorf("%w: offsets %d to %d do not fit one segment", ErrBatchTooLarge, base, last)
	}
	next, err := l.stamp(b, s, base, epoch, replica, cfg.IndexIntervalBytes)
	if err != nil {
		return AppendInfo{}, err
	}
	if add := l.newEpochs(b, epoch, base, replica); len(add) > 0 {
		if err := l.assignEpochs(add); err != nil {
			return AppendInfo{}, err
		}
	}
	if err := l.write(s, b); err != nil {
		return AppendInfo{}, err
	}

	l.mu.Lock()
	s.size += int64(len(b))
	s.next = next
	s.index = append(s.index, l.build.index...)
	s.times = append(s.times, l.build.times...)
	s.modMs = now.UnixMilli()
	l.end = next
	l.commitProducersLocked()
	l.notifyLocked()
	l.mu.Unlock()
	if s.firstAppend.IsZero() {
		s.firstAppend = now
	}
	return AppendInfo{
		BaseOffset: base, LastOffset: next - 1, MaxTimestamp: sum.maxTs,
		Batches: sum.batches, Bytes: len(b), AppendTime: now.UnixMilli(),
	}, nil
}

// shouldRoll reports whether an append of n bytes up to offset last must go to
// a new segment. An empty segment always takes the append.
func shouldRoll(s *segment, cfg Config, n int, last int64, now time.Time) bool {
	if s.size == 0 {
		return false
	}
	return s.size+int64(n) > cfg.SegmentBytes ||
		(!s.firstAppend.IsZero() && now.Sub(s.firstAppend) >= time.Duration(cfg.SegmentMs)*time.Millisecond) ||
		last-s.base > math.MaxUint32
}

// stamp sets offsets and the leader epoch in the batches (leader appends) and
// computes their index entries into l.build. It returns the next offset.
// appendMu must be held.
func (l *Log) stamp(b []byte, s *segment, off int64, epoch int32, replica bool, interval int) (int64, error) {
	l.build.reset(interval, s.index, s.times)
	for pos := 0; pos < len(b); {
		h, err := record.ParseHeader(b[pos:])
		if err != nil { // validated already: only a caller changing b meanwhile
			return 0, fmt.Errorf("batch at byte %d changed during append: %w", pos, err)
		}
		if !replica {
			record.SetBaseOffset(b[pos:], off)
			record.SetLeaderEpoch(b[pos:], epoch)
			h.BaseOffset = off
		}
		l.build.add(uint32(h.BaseOffset-s.base), s.size+int64(pos), h.MaxTimestamp)
		off = h.LastOffset() + 1
		pos += h.Size()
	}
	return off, nil
}

// write puts the batches and their index entries in the page cache. A failure
// fails the log: what reached the files is unknown, and Open will recover.
// appendMu must be held.
func (l *Log) write(s *segment, b []byte) error {
	_, err := s.fs.WriteAt(s.log, b, s.size)
	if err == nil {
		l.idxBuf = appendIndexBytes(l.idxBuf[:0], l.build.index)
		l.timeBuf = appendTimeBytes(l.timeBuf[:0], l.build.times)
		err = s.writeIndexEntries(l.idxBuf, l.timeBuf, len(s.index), len(s.times))
	}
	if err == nil {
		// Validated on the way in: the watermark covers them if it reached
		// the segment's end.
		s.verified.CompareAndSwap(s.size, s.size+int64(len(b)))
		return nil
	}
	if isNoSpace(err) {
		// Nothing is published: readers never look past s.size, and the next
		// append writes over what this one left. Cut it back all the same, so
		// a restart does not have to.
		_ = s.fs.Truncate(s.log, s.size)
		return fmt.Errorf("%w: append to segment %d: %w", ErrDiskFull, s.base, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(fmt.Errorf("append to segment %d: %w", s.base, err))
}

// roll starts a new active segment at the log end offset and hands the old
// one to the flusher. appendMu must be held.
func (l *Log) roll() (*segment, error) {
	old := l.segs[len(l.segs)-1]
	s, err := createSegment(l.fs, l.dir, l.end)
	if err != nil {
		return nil, fmt.Errorf("log: roll at offset %d: %w", l.end, err)
	}
	old.retire()
	snap := l.snapshotLocked() // encoded outside mu: readers do not wait for it
	l.mu.Lock()
	l.snapPending = snap // for the flusher, after it synced old
	l.segs = append(l.segs, s)
	old.acquire()
	l.unsynced = append(l.unsynced, old)
	l.dirDirty = true
	l.mu.Unlock()
	l.requestFlush()
	l.logger.Debug("rolled segment", "old", old.base, "old_bytes", old.size, "new", s.base)
	return s, nil
}

// Fence refuses, from now on, leader appends with an epoch below epoch. The
// replica calls it when it learns a new leader epoch: an append that passed
// its leadership check under the old epoch either completed before Fence
// returned (and is subject to the truncation a follower does) or fails with
// ErrStaleEpoch. Fence waits for an append in progress.
func (l *Log) Fence(epoch int32) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.fence = max(l.fence, epoch)
}
