package log

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Group commit. One flusher goroutine per log, started by Open and stopped by
// Close, runs flush passes on request. A pass notes the log end offset, fsyncs
// every file that holds data below it (segments rolled since the previous pass,
// the active segment, the directory when files were created or removed), then
// publishes that offset as flushed and wakes every waiter. Appends that land
// while an fsync runs are covered by the next pass, so one fsync serves every
// append that arrived meanwhile and no request pays for its own.

// requestFlush asks the flusher for a pass without blocking; requests made
// while one is pending merge into it.
func (l *Log) requestFlush() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// flushLoop is the flusher goroutine: flush passes on request, and the
// high-watermark checkpoint every hwCheckpointInterval when it changed.
func (l *Log) flushLoop() {
	defer close(l.done)
	tick := time.NewTicker(hwCheckpointInterval)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			// A failure is kept in l.failed and reported to every waiter.
			_ = l.flush(false)
		case <-tick.C:
			_ = l.saveHighWatermark() // a failure fails the log, as above
		}
	}
}

// WaitFlushed returns when every record below offset is fsynced. It asks the
// flusher for a pass if needed and shares that pass with every concurrent
// waiter. It returns ErrOffsetOutOfRange when offset is above the log end
// offset (for example when TruncateTo removed the records being waited for),
// ErrClosed or ErrFailed when the log closed or failed before that, and the
// context's error when ctx ends first. WaitFlushed holds no lock while waiting.
func (l *Log) WaitFlushed(ctx context.Context, offset int64) error {
	for {
		if l.flushed.Load() >= offset {
			return nil
		}
		l.mu.RLock()
		ch, closed, failed, end := l.flushedCh, l.closed, l.failed, l.end
		l.mu.RUnlock()
		switch {
		case l.flushed.Load() >= offset: // a pass finished meanwhile
			return nil
		case failed != nil:
			return failed
		case closed:
			return ErrClosed
		case offset > end:
			return fmt.Errorf("%w: waiting for offset %d to be flushed, log end offset is %d", ErrOffsetOutOfRange, offset, end)
		}
		l.requestFlush()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctxErr(ctx, offset)
		}
	}
}

// FlushedOffset returns the offset below which every record is fsynced.
func (l *Log) FlushedOffset() int64 { return l.flushed.Load() }

// Fsyncs returns the number of fsync calls the log has made (segment and index
// files and the directory), for tests and metrics.
func (l *Log) Fsyncs() int64 { return l.fsyncs.Load() }

// ObserveFlushes makes fn learn how long each flush pass that synced files
// took (the group commit's fsyncs, one pass at a time).
func (l *Log) ObserveFlushes(fn func(time.Duration)) { l.onFlush.Store(&fn) }

// flush runs one pass. It runs on the flusher goroutine, or in Close after the
// flusher stopped (final, which also syncs the active segment's indexes).
func (l *Log) flush(final bool) error {
	l.mu.Lock()
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return err
	}
	target, gen := l.end, l.truncGen
	rolled, dirty := l.unsynced, l.dirDirty
	snap := l.snapPending
	l.unsynced, l.dirDirty, l.snapPending = nil, false, nil
	active := l.segs[len(l.segs)-1]
	active.acquire()
	idle := !final && !dirty && len(rolled) == 0 && target <= l.flushed.Load()
	l.mu.Unlock()

	var err error
	if !idle {
		start := time.Now()
		err = l.syncFiles(rolled, active, dirty || final, final)
		if fn := l.onFlush.Load(); fn != nil && err == nil {
			(*fn)(time.Since(start))
		}
	}
	for _, s := range rolled {
		s.release()
	}
	active.release()

	l.mu.Lock()
	if err != nil {
		err = l.failLocked(err)
	} else if l.failed == nil && gen == l.truncGen && target > l.flushed.Load() {
		// A pass that overlapped a failure elsewhere (an append, a
		// checkpoint) publishes nothing: from the failure on, the log
		// acknowledges nothing more.
		l.flushed.Store(target)
	}
	close(l.flushedCh)
	l.flushedCh = make(chan struct{})
	l.mu.Unlock()
	// A roll's producer snapshot goes after the pass that synced the rolled
	// segment, and after its waiters were released. Close writes its own.
	if snap != nil && err == nil && !final {
		l.writeSnapshot(snap, gen)
	}
	return err
}

// syncFiles fsyncs the files of one pass, counting each call. No lock is held.
func (l *Log) syncFiles(rolled []*segment, active *segment, dir, final bool) error {
	for _, s := range rolled {
		if s == active {
			continue
		}
		if err := l.sync(s.log); err != nil {
			return err
		}
		n, err := s.syncIndexes()
		l.fsyncs.Add(int64(n))
		if err != nil {
			return err
		}
	}
	if err := l.sync(active.log); err != nil {
		return err
	}
	if final || containsSegment(rolled, active) {
		n, err := active.syncIndexes()
		l.fsyncs.Add(int64(n))
		if err != nil {
			return err
		}
	}
	if dir {
		return l.sync(l.dirF)
	}
	return nil
}

// sync fsyncs one file, or the directory, counting the call.
func (l *Log) sync(f *os.File) error {
	l.fsyncs.Add(1)
	if err := l.fs.Sync(f); err != nil {
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	return nil
}

func containsSegment(segs []*segment, s *segment) bool {
	for _, x := range segs {
		if x == s {
			return true
		}
	}
	return false
}

// ctxErr says why WaitFlushed stopped waiting.
func ctxErr(ctx context.Context, offset int64) error {
	return fmt.Errorf("log: waiting for offset %d to be flushed: %w", offset, context.Cause(ctx))
}
