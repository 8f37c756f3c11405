package log

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Log is one partition's segment log. All methods are safe for concurrent use.
type Log struct {
	dir    string
	logger *slog.Logger
	dirF   *os.File   // the directory, for fsync after creating or removing files
	fs     FileSystem // every change to the files goes through it; set by Open

	// appendMu serializes Append, AppendReplica, roll, TruncateTo, SetConfig
	// and Close. It is held while batches are written to the page cache, never
	// across a segment fsync (TruncateTo alone holds it across file truncation
	// and removal, so no append can land in a file being cut). The leader-epoch
	// checkpoint's fsyncs are the exception: an append that starts a new epoch
	// and TruncateTo write it under appendMu, since it must be durable before
	// the next batch is written; that happens once per leader change.
	appendMu   sync.Mutex
	fence      int32          // guarded by appendMu: leader appends below this epoch are refused (Fence)
	space      *SpaceGuard    // guarded by appendMu: the free-space reserve (nil: none)
	build      indexBuilder   // guarded by appendMu: new index entries of one append
	idxBuf     []byte         // guarded by appendMu: their encoding
	timeBuf    []byte         // guarded by appendMu
	epochBuf   []EpochEntry   // guarded by appendMu: cache entries one append starts
	pending    []pendingBatch // guarded by appendMu: idempotent batches of one append
	pendingTxn []pendingTxn   // guarded by appendMu: transactional and control batches of one append

	// cleanMu serializes cleaning passes (clean.go); it is taken before
	// appendMu.
	cleanMu   sync.Mutex
	cleanedTo atomic.Int64 // written with cleanMu held (or by Open): the first dirty offset

	// ckptMu serializes writes of the checkpoint files (EpochCheckpointFile,
	// HighWatermarkFile) and Close's closing of dirF. It is taken after
	// appendMu and before mu, and held across those files' fsyncs.
	ckptMu  sync.Mutex
	hwSaved int64   // ckptMu; the value in HighWatermarkFile, -1 when unknown
	snaps   []int64 // ckptMu; offsets of the producer snapshot files, sorted

	// mu guards the fields below. It is held only for in-memory work: picking
	// segments, copying index slices, publishing an append. Fields also marked
	// appendMu are written with both held and may be read with either.
	mu        sync.RWMutex
	cfg       Config        // mu+appendMu
	segs      []*segment    // mu+appendMu; oldest first, the last is active; never empty while open
	end       int64         // mu+appendMu; log end offset
	start     int64         // mu+appendMu; log start offset, at or above segs[0].base (startoffset.go)
	closed    bool          // mu+appendMu
	failed    error         // mu; sticky write/fsync failure (wraps ErrFailed)
	changed   chan struct{} // mu; closed when end moves or the log closes
	unsynced  []*segment    // mu; rolled (or recovered) segments awaiting fsync, each with a reference
	dirDirty  bool          // mu; files created or removed since the last directory fsync
	truncGen  uint64        // mu; bumped by TruncateTo so an overlapping flush does not advance flushed
	cleanCut  int64         // mu; lowest offset TruncateTo cut to since a cleaning pass last planned (MaxInt64: none)
	flushedCh chan struct{} // mu; closed and replaced after each flush pass
	// epochs is the leader-epoch cache (epochs.go), oldest first. It is
	// copy-on-write: a change replaces the slice, so a holder of either lock
	// may keep reading the one it saw.
	epochs  []EpochEntry // mu+appendMu
	scanned []EpochEntry // recovery only: epochs seen by rebuild's scans
	// recoveryCut is set when recovery cut the log short of an older
	// segment's end (a damaged or torn older segment): records the node had
	// acknowledged may be gone. Set before the Log is shared.
	recoveryCut bool
	// producers is the idempotent producers' state (producers.go) after
	// every batch below end; entries change in place.
	producers   producerState     // mu+appendMu
	snapPending *producerSnapshot // mu; a roll's producer snapshot for the flusher

	// hw is the high watermark (hwcheckpoint.go). It changes under mu:
	// SetHighWatermark raises it under the read lock (compare-and-swap, so
	// concurrent raises keep the largest); TruncateTo lowers it and retention
	// raises it to the new start under the write lock. Readers load it freely.
	hw atomic.Int64

	// uploaded is the end of the remote log (tier.go): a tiered log's
	// retention deletes nothing at or above it. heldBack is how many
	// segments the last retention pass kept for want of an upload.
	uploaded atomic.Int64
	heldBack atomic.Int64

	flushed atomic.Int64                        // written under mu; every offset below it is fsynced
	fsyncs  atomic.Int64                        // fsync calls made (files and directory), for tests and metrics
	onFlush atomic.Pointer[func(time.Duration)] // ObserveFlushes

	kick chan struct{} // capacity 1: a flush is wanted
	stop chan struct{} // closed by Close to stop the flusher
	done chan struct{} // closed when the flusher has returned
}

// Open opens (creating if needed) the log in dir, recovering it as described
// in the package doc, and starts its flusher. logger may be nil.
func Open(dir string, cfg Config, logger *slog.Logger) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: create %s: %w", dir, err)
	}
	dirF, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	l := &Log{fence: -1, cleanCut: math.MaxInt64,
		dir:       dir,
		logger:    logger.With(slog.String("log", dir)),
		dirF:      dirF,
		fs:        cfg.fileSystem(),
		cfg:       cfg,
		changed:   make(chan struct{}),
		flushedCh: make(chan struct{}),
		kick:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if err := l.recover(); err != nil {
		for _, s := range l.segs {
			s.release()
		}
		_ = dirF.Close()
		return nil, fmt.Errorf("log: recover %s: %w", dir, err)
	}
	l.end = l.segs[len(l.segs)-1].next
	l.recoverStartOffset()
	l.recoverEpochs()
	l.recoverHighWatermark()
	l.recoverCleanerCheckpoint()
	if err := l.recoverProducers(); err != nil {
		for _, s := range l.segs {
			s.release()
		}
		_ = dirF.Close()
		return nil, fmt.Errorf("log: recover %s: %w", dir, err)
	}
	l.flushed.Store(l.segs[0].base)
	// Nothing recovered is known to be on disk (the previous process may have
	// died before its flush), so the flusher's first pass syncs every segment.
	for _, s := range l.segs {
		s.acquire()
		l.unsynced = append(l.unsynced, s)
	}
	go l.flushLoop()
	l.requestFlush()
	return l, nil
}

// StartOffset returns the log start offset: the first segment's base
// offset, or above it after records were deleted (startoffset.go).
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset returns the log end offset: the offset the next record gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// Size returns the bytes of all segments' .log files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments returns the number of segments.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// RecoveryCut reports whether Open cut the log short of an older segment's
// end: more than an unflushed tail may be gone, so this replica must not lead
// until it has fetched again from another.
func (l *Log) RecoveryCut() bool { return l.recoveryCut }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the current configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig replaces the configuration; it applies from the next append (roll)
// and the next EnforceRetention. A nil cfg.Now keeps the current clock;
// cfg.FS is ignored (the log keeps the file system Open gave it).
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if cfg.Now == nil {
		cfg.Now = l.cfg.Now
	}
	cfg.FS = l.cfg.FS // the file system is Open's
	l.cfg = cfg
	return nil
}

// Changed returns a channel that is closed when the log end offset moves
// (append or truncation) or the log closes. Call it again after each close for
// the next change. Fetch long-polls wait on it.
func (l *Log) Changed() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.changed
}

// notifyLocked wakes the waiters on Changed. mu must be held for writing.
func (l *Log) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// failLocked records a write or fsync failure, the fail-stop of the package
// doc, and returns the sticky error (wrapping ErrFailed); mu must be held for
// writing. It wakes every WaitFlushed waiter at once: no flush pass closes
// flushedCh once the log failed, and a waiter must learn of the failure now,
// not when its context ends.
func (l *Log) failLocked(err error) error {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		l.logger.Error("log failed; it must be reopened", slog.Any("err", err))
		close(l.flushedCh)
		l.flushedCh = make(chan struct{})
	}
	return l.failed
}

// checkLocked returns the error that stops a write, if any; mu must be held.
func (l *Log) checkLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// Close stops the flusher, fsyncs everything, writes the high-watermark
// checkpoint and releases the files. A Slice still held keeps its segment
// open until released. Close is idempotent.
func (l *Log) Close() error {
	l.appendMu.Lock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.appendMu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.appendMu.Unlock()

	close(l.stop)
	<-l.done
	err := l.flush(true) // nothing else runs the flush now
	if herr := l.saveHighWatermark(); err == nil {
		err = herr
	}
	if err == nil {
		l.saveSnapshotOnClose() // a failure only costs the next Open a scan
	}

	l.mu.Lock()
	close(l.changed) // left closed: Changed keeps reporting the close
	segs := l.segs
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
	l.ckptMu.Lock() // a retention pass may still be writing the epoch checkpoint
	cerr := l.dirF.Close()
	l.ckptMu.Unlock()
	if err == nil && cerr != nil {
		err = fmt.Errorf("log: close directory: %w", cerr)
	}
	return err
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("log: delete %s: %w", l.dir, err)
	}
	return cerr
}
