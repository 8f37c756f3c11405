package log

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The high watermark: the offset below which every record is committed
// (replicated to the in-sync replicas). The replica layer computes it and
// stores it here with SetHighWatermark; the log keeps it inside
// [log start offset, log end offset] and checkpoints it to HighWatermarkFile.
//
// SetHighWatermark is called on every fetch, so it only stores the value in
// memory; the flusher goroutine writes the file at most once per
// hwCheckpointInterval when the value changed, and Close writes it last. The
// file may therefore lag behind: after a crash the high watermark restarts
// from the checkpoint (clamped to the recovered log), an older value of a
// high watermark that only grows. That is safe: a lower high watermark only
// hides committed records from consumers for a moment, the leader recomputes
// it from its followers' fetches, and a follower re-learns it from the
// leader's next fetch response. The file write is atomic (temporary file,
// fsync, rename) but the directory is not fsynced for it: a lost rename
// leaves the previous value.

// HighWatermarkFile is the name of the high-watermark checkpoint in the
// partition directory: one line, the offset in decimal.
const HighWatermarkFile = "high-watermark-checkpoint"

// hwCheckpointInterval is the flusher's period for writing the checkpoint.
const hwCheckpointInterval = time.Second

// SetHighWatermark raises the high watermark to hw, clamped to the log start
// and end offsets. A value below the current high watermark is ignored: it
// moves backward only when TruncateTo cuts the log below it. The value is
// persisted later by the flusher (see HighWatermarkFile). Safe for concurrent
// use; it takes the read lock only.
func (l *Log) SetHighWatermark(hw int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	hw = min(max(hw, l.start), l.end)
	for {
		cur := l.hw.Load()
		if hw <= cur || l.hw.CompareAndSwap(cur, hw) {
			return
		}
	}
}

// HighWatermark returns the high watermark; it is always within the log start
// and end offsets.
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// saveHighWatermark writes the checkpoint if the high watermark changed since
// the last write. It runs on the flusher goroutine and in Close. A failed
// write fails the log, like any failed write.
func (l *Log) saveHighWatermark() error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	hw := l.hw.Load()
	if hw == l.hwSaved {
		return nil
	}
	l.mu.RLock()
	failed := l.failed
	l.mu.RUnlock()
	if failed != nil {
		return failed
	}
	l.fsyncs.Add(1)
	if err := writeFileAtomic(l.fs, filepath.Join(l.dir, HighWatermarkFile), encodeOffsetCheckpoint(hw)); err != nil {
		if isNoSpace(err) {
			// The checkpoint only shortens recovery; the next tick retries
			// once space returns, and the log goes on meanwhile.
			l.logger.Warn("high watermark checkpoint not written: disk full", slog.Any("err", err))
			return fmt.Errorf("%w: high watermark checkpoint: %w", ErrDiskFull, err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failLocked(fmt.Errorf("high watermark checkpoint: %w", err))
	}
	l.hwSaved = hw
	return nil
}

// recoverHighWatermark loads the checkpoint in Open, clamped to the recovered
// log: a missing file means the log start offset; an unreadable one is
// reported and also gives the log start offset (a lower high watermark is
// always safe). It runs before the Log is shared.
func (l *Log) recoverHighWatermark() {
	start, end := l.start, l.end
	l.hwSaved = -1 // unknown: the first flusher tick writes the file
	hw := start
	b, err := readSmallFile(filepath.Join(l.dir, HighWatermarkFile), 64)
	var saved int64
	if err == nil {
		saved, err = decodeOffsetCheckpoint(b, "high watermark")
	}
	switch {
	case err == nil:
		hw = min(max(saved, start), end)
		if hw == saved {
			l.hwSaved = saved
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		l.logger.Warn("high watermark checkpoint unusable; starting from the log start offset",
			slog.Any("reason", err), slog.Int64("high_watermark", hw))
	}
	l.hw.Store(hw)
}

// encodeOffsetCheckpoint is the content of an offset checkpoint (the high
// watermark, the log start offset): one decimal and a newline.
func encodeOffsetCheckpoint(offset int64) []byte {
	return append(strconv.AppendInt(nil, offset, 10), '\n')
}

// decodeOffsetCheckpoint parses an offset checkpoint: one non-negative
// decimal and a newline. Errors wrap errBadCheckpoint and name what.
func decodeOffsetCheckpoint(b []byte, what string) (int64, error) {
	text, ok := strings.CutSuffix(string(b), "\n")
	v, err := strconv.ParseInt(text, 10, 64)
	if !ok || err != nil || v < 0 {
		return 0, fmt.Errorf("%w: %s %q", errBadCheckpoint, what, b)
	}
	return v, nil
}
