package log

import (
	"errors"
	"fmt"
	"log/slog"
)

// ResetTo empties the log and restarts it at offset: every segment is deleted
// and a new, empty one begins there; the leader-epoch cache and the producer
// state (with its snapshots) are cleared and the high watermark and flushed
// offset move to offset. A follower uses it when its whole log lies below the
// leader's log start offset (it was down longer than retention, or its disk
// was replaced): nothing it holds is still on the leader, and it must continue
// from the leader's start. offset must be at or above the current log end
// offset.
func (l *Log) ResetTo(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err, end := l.checkLocked(), l.end
	l.mu.RUnlock()
	if err != nil {
		return err
	}
	if offset < end {
		return fmt.Errorf("%w: reset to %d, below the log end offset %d", ErrOffsetOutOfRange, offset, end)
	}
	s, err := createSegment(l.fs, l.dir, offset)
	if err != nil {
		return fmt.Errorf("log: reset to %d: %w", offset, err)
	}
	l.mu.Lock()
	victims := l.segs
	l.segs = []*segment{s}
	l.end, l.start = offset, offset
	l.flushed.Store(offset)
	l.hw.Store(offset)
	l.epochs = nil
	l.producers, l.snapPending = newProducerState(), nil
	l.truncGen++
	l.dirDirty = true
	l.notifyLocked()
	l.mu.Unlock()

	var errs []error
	for _, v := range victims {
		v.retire()
		if err := v.removeFiles(); err != nil {
			errs = append(errs, fmt.Errorf("log: delete segment %d: %w", v.base, err))
		}
		v.release()
	}
	errs = append(errs, l.saveEpochs())
	l.ckptMu.Lock()
	l.removeSnapshotsLocked(l.snaps)
	l.snaps = nil
	l.ckptMu.Unlock()
	l.requestFlush() // sync the directory
	l.logger.Warn("log reset", slog.Int64("start_offset", offset), slog.Int("segments_deleted", len(victims)))
	if err := errors.Join(errs...); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failLocked(err)
	}
	return nil
}
