package log

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/libs/record"
)

// The leader-epoch cache (Kafka's KIP-101): for each leader epoch that wrote
// to the log, the offset of its first record. A follower that comes back asks
// the leader where its own latest epoch ends (EndOffsetForEpoch) and truncates
// to that point instead of to its high watermark, so it neither keeps records
// the leader never had nor drops committed ones.
//
// The cache lives in Log.epochs (guarded by Log.mu and written only with
// Log.appendMu also held, like the segment list) and in the file
// EpochCheckpointFile. The file is rewritten whole, atomically and durably
// (temporary file, fsync, rename, directory fsync):
//
//   - before the first batch of a new epoch is written (Append, AppendReplica),
//     so the file never lacks an epoch that the log holds;
//   - by TruncateTo, before it returns, so entries for records cut away do not
//     come back after a crash and mislabel the records appended after the cut;
//   - by EnforceRetention after it moved the log start offset (stale entries
//     below the start are harmless: recovery drops them again).
//
// Writes of the file are serialized by Log.ckptMu, and each writes the cache
// as it is when the writer holds ckptMu, so the last write always carries the
// newest state.

// EpochCheckpointFile is the name of the leader-epoch cache's file in the
// partition directory.
const EpochCheckpointFile = "leader-epoch-checkpoint"

// Values EndOffsetForEpoch and LatestEpoch return when there is no answer
// (Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// EpochEntry is one entry of the leader-epoch cache: leader epoch Epoch wrote
// the log from StartOffset on. Entries are strictly increasing in both fields.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// LatestEpoch returns the largest epoch in the leader-epoch cache, or
// UndefinedEpoch (-1) when the cache is empty.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return latestEpoch(l.epochs)
}

// EndOffsetForEpoch answers a follower's (or consumer's) OffsetForLeaderEpoch
// question: it finds the largest cached epoch at or below epoch and returns
// it with its end offset, which is the start offset of the next cached epoch,
// or the log end offset when the found epoch is the latest one (so an epoch
// above every cached one gets the latest epoch and the log end offset). When
// the cache is empty or epoch is below every cached epoch it returns
// (UndefinedEpochOffset, UndefinedEpoch); a follower then holds nothing the
// leader is known to have and truncates its whole log.
//
// Kafka's LeaderEpochFileCache.endOffsetFor differs in two corners: it returns
// UNDEFINED for an epoch above the latest, and (epoch, first start offset) for
// one below the first.
func (l *Log) EndOffsetForEpoch(epoch int32) (endOffset int64, foundEpoch int32) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return endOffsetFor(l.epochs, epoch, l.end)
}

// Epochs returns a copy of the leader-epoch cache, oldest first.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.epochs)
}

// latestEpoch is the last entry's epoch, or UndefinedEpoch.
func latestEpoch(entries []EpochEntry) int32 {
	if len(entries) == 0 {
		return UndefinedEpoch
	}
	return entries[len(entries)-1].Epoch
}

// endOffsetFor is EndOffsetForEpoch on a cache and a log end offset.
func endOffsetFor(entries []EpochEntry, epoch int32, logEnd int64) (int64, int32) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Epoch > epoch })
	switch {
	case i == 0: // empty, or epoch below every cached epoch
		return UndefinedEpochOffset, UndefinedEpoch
	case i == len(entries):
		return logEnd, entries[i-1].Epoch
	}
	return entries[i].StartOffset, entries[i-1].Epoch
}

// appendEpoch records that e.Epoch, which must be greater than the latest
// epoch in entries, starts at e.StartOffset. Entries starting at or after
// e.StartOffset are dropped first (left by an append that never happened), so
// both fields stay strictly increasing. It modifies entries in place: callers
// pass a slice nobody else reads.
func appendEpoch(entries []EpochEntry, e EpochEntry) []EpochEntry {
	for len(entries) > 0 && entries[len(entries)-1].StartOffset >= e.StartOffset {
		entries = entries[:len(entries)-1]
	}
	return append(entries, e)
}

// noteEpoch records the epoch of a batch found on disk, Kafka's recovery rule:
// a batch whose (non-negative) epoch is greater than the latest one starts a
// new entry. It modifies entries in place.
func noteEpoch(entries []EpochEntry, h record.Header) []EpochEntry {
	if h.LeaderEpoch > latestEpoch(entries) {
		return appendEpoch(entries, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
	}
	return entries
}

// truncateEpochsFromEnd drops the entries starting at or after end. It returns
// a new slice, and whether anything was dropped.
func truncateEpochsFromEnd(entries []EpochEntry, end int64) ([]EpochEntry, bool) {
	n := len(entries)
	for n > 0 && entries[n-1].StartOffset >= end {
		n--
	}
	if n == len(entries) {
		return entries, false
	}
	return slices.Clone(entries[:n]), true
}

// truncateEpochsFromStart drops the entries wholly below a new log start
// offset: of those starting at or before start, the last one stays, moved up
// to start (Kafka's truncateFromStart). It returns a new slice, and whether
// anything changed.
func truncateEpochsFromStart(entries []EpochEntry, start int64) ([]EpochEntry, bool) {
	n := 0 // entries starting at or before start
	for n < len(entries) && entries[n].StartOffset <= start {
		n++
	}
	if n == 0 || (n == 1 && entries[0].StartOffset == start) {
		return entries, false
	}
	out := make([]EpochEntry, 0, len(entries)-n+1)
	out = append(out, EpochEntry{Epoch: entries[n-1].Epoch, StartOffset: start})
	return append(out, entries[n:]...), true
}

// newEpochs returns (in l.epochBuf) the cache entries an append starts. As
// leader, epoch (already checked not to be stale) starts an entry at base when
// it is greater than the latest epoch. As follower, each batch whose stamped
// epoch is greater than the latest epoch and every earlier batch's starts one
// at its base offset; lower epochs are ignored, as Kafka's follower does.
// appendMu must be held.
func (l *Log) newEpochs(b []byte, epoch int32, base int64, replica bool) []EpochEntry {
	latest := latestEpoch(l.epochs)
	out := l.epochBuf[:0]
	if !replica {
		if epoch > latest {
			out = append(out, EpochEntry{Epoch: epoch, StartOffset: base})
		}
		l.epochBuf = out
		return out
	}
	for pos := 0; pos < len(b); {
		h, err := record.ParseHeader(b[pos:])
		if err != nil { // validated already; stamp reports a change
			break
		}
		if h.LeaderEpoch > latest {
			out = append(out, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
			latest = h.LeaderEpoch
		}
		pos += h.Size()
	}
	l.epochBuf = out
	return out
}

// assignEpochs adds entries to the cache and makes the checkpoint file hold
// them, durably, before it returns; only then may the batches that carry them
// be written. A failed write fails the log. appendMu must be held.
func (l *Log) assignEpochs(add []EpochEntry) error {
	next := slices.Clone(l.epochs)
	for _, e := range add {
		next = appendEpoch(next, e)
	}
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if err := l.writeEpochs(next); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failLocked(err)
	}
	l.mu.Lock()
	l.epochs = next
	l.mu.Unlock()
	l.logger.Info("new leader epoch", slog.Any("entries", add))
	return nil
}

// saveEpochs writes the cache as it is now to the checkpoint file, after a
// truncation or retention changed it. It does nothing once the log is closed
// (recovery corrects a stale file). The caller fails the log on an error.
func (l *Log) saveEpochs() error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	entries, closed := l.epochs, l.closed
	l.mu.RUnlock()
	if closed {
		return nil
	}
	return l.writeEpochs(entries)
}

// writeEpochs replaces the checkpoint file durably: temporary file, fsync,
// rename, directory fsync. ckptMu must be held (and the directory open).
func (l *Log) writeEpochs(entries []EpochEntry) error {
	l.fsyncs.Add(1) // the temporary file's
	if err := writeFileAtomic(l.fs, filepath.Join(l.dir, EpochCheckpointFile), encodeEpochs(entries)); err != nil {
		return fmt.Errorf("leader epoch checkpoint: %w", err)
	}
	return l.sync(l.dirF)
}

// EpochAt returns the leader epoch that wrote offset (for the log end, the
// latest epoch), or UndefinedEpoch when the cache does not go back that far.
func (l *Log) EpochAt(offset int64) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].StartOffset > offset })
	if i == 0 {
		return UndefinedEpoch
	}
	return l.epochs[i-1].Epoch
}
