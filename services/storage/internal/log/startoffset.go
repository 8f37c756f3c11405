package log

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
)

// The log start offset (Kafka's logStartOffset). It is the first segment's
// base offset, unless a client deleted records (Kafka's DeleteRecords) up to
// an offset inside the first segment: Log.start then lies above the base,
// reads below it are out of range, and the next retention pass deletes the
// segments wholly below it. Leaders move it with RaiseStartOffset; followers
// move theirs to the leader's, up to their high watermark, from each fetch
// answer (Kafka does the same).
//
// A raised start is kept in StartOffsetFile, written durably (temporary
// file, fsync, rename, directory fsync) before RaiseStartOffset returns, so
// deleted records never come back after a crash. Recovery clamps the file's
// value into [first segment's base, log end]; a missing file means the
// base.

// StartOffsetFile is the name of the log start offset checkpoint in the
// partition directory: one line, the offset in decimal.
const StartOffsetFile = "log-start-offset-checkpoint"

// RaiseStartOffset moves the log start offset up to offset, which must not
// be above the high watermark (records not yet committed cannot be deleted;
// ErrOffsetOutOfRange). A lower offset changes nothing. The leader-epoch
// cache drops entries below the new start and idempotent producers whose
// last batch lies below it are forgotten, as retention does. It returns the
// log start offset after the call.
func (l *Log) RaiseStartOffset(offset int64) (int64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	if err := l.checkLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	start, hw := l.start, l.hw.Load()
	if offset <= start {
		l.mu.Unlock()
		return start, nil
	}
	if offset > hw {
		l.mu.Unlock()
		return start, fmt.Errorf("%w: delete records below %d, above the high watermark %d", ErrOffsetOutOfRange, offset, hw)
	}
	l.start = offset
	var epochsChanged bool
	l.epochs, epochsChanged = truncateEpochsFromStart(l.epochs, offset)
	l.producers.evictBelow(offset)
	l.notifyLocked()
	l.mu.Unlock()

	err := l.saveStartOffset(offset)
	if err == nil && epochsChanged {
		err = l.saveEpochs()
	}
	if err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return offset, l.failLocked(err)
	}
	l.logger.Info("log start offset raised (records deleted)", slog.Int64("start_offset", offset))
	return offset, nil
}

// saveStartOffset writes StartOffsetFile durably. appendMu is held, so
// writes do not cross.
func (l *Log) saveStartOffset(offset int64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.fsyncs.Add(1)
	if err := writeFileAtomic(l.fs, filepath.Join(l.dir, StartOffsetFile), encodeOffsetCheckpoint(offset)); err != nil {
		return fmt.Errorf("log start offset checkpoint: %w", err)
	}
	return l.sync(l.dirF)
}

// recoverStartOffset loads StartOffsetFile in Open, clamped into the
// recovered log; an unreadable file is reported and gives the first
// segment's base. It runs before the Log is shared.
func (l *Log) recoverStartOffset() {
	base, end := l.segs[0].base, l.end
	l.start = base
	b, err := readSmallFile(filepath.Join(l.dir, StartOffsetFile), 64)
	var saved int64
	if err == nil {
		saved, err = decodeOffsetCheckpoint(b, "log start offset")
	}
	switch {
	case err == nil:
		l.start = min(max(saved, base), end)
	case errors.Is(err, fs.ErrNotExist):
	default:
		l.logger.Warn("log start offset checkpoint unusable; starting from the first segment", slog.Any("reason", err),
			slog.Int64("start_offset", base))
	}
}
