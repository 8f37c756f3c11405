package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// Log compaction (Kafka's cleanup.policy=compact): Clean rewrites the
// closed segments below the high watermark so that each key keeps only its
// latest record. The on-disk protocol, the tombstone clock, the map budget
// and what a failure does are in the package doc ("Compaction").

// CleanerCheckpointFile holds the first dirty offset: every record below it
// has been through a cleaning pass (Kafka's cleaner-offset-checkpoint).
const CleanerCheckpointFile = "cleaner-offset-checkpoint"

// File name suffixes of a cleaning pass's new segment files, appended to
// the final name (%020d.log.cleaned, %020d.index.swap, ...).
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// DefaultMapBytes is CleanOptions.MapBytes when zero: 128 MiB for a pass,
// 120 MiB of it key map holding 3.93 million keys (Kafka's
// log.cleaner.dedupe.buffer.size).
const DefaultMapBytes = 128 << 20

// Errors of a cleaning pass.
var (
	// ErrCleanAborted: the pass stopped before changing the log, because a
	// file step failed, the segments it read were truncated or deleted
	// meanwhile, or the hook or the throttle asked; the log is unchanged
	// and usable, and a later pass redoes the work.
	ErrCleanAborted = errors.New("log: cleaning pass aborted")
	// ErrCleanBudget: the first dirty segment spans more offsets than the
	// key map may hold keys (CleanOptions.MapBytes).
	ErrCleanBudget = errors.New("log: dirty segment too large for the cleaner's key map")
)

// CleanOptions configure one cleaning pass.
type CleanOptions struct {
	// Now is the pass's clock for MinCompactionLag and DeleteRetention.
	Now time.Time
	// DeleteRetention is how long a tombstone (a keyed record with a null
	// value) stays after its record timestamp (Kafka's delete.retention.ms):
	// a pass removes a tombstone whose timestamp is at or before
	// Now-DeleteRetention and that is the latest record of its key.
	DeleteRetention time.Duration
	// MinCompactionLag: a segment whose largest timestamp is after
	// Now-MinCompactionLag is not cleaned, nor any segment after it; 0
	// cleans regardless of timestamps (Kafka's min.compaction.lag.ms=0).
	MinCompactionLag time.Duration
	// MapBytes is the pass's memory budget (Kafka's
	// log.cleaner.dedupe.buffer.size): the key map (key hash -> latest
	// offset) gets all of it but cleanReserve (8 MiB) for the pass's
	// buffers. The map's 24-byte slots are at most 3/4 taken, so it holds
	// (MapBytes-8 MiB)/32 keys. A pass maps whole dirty segments while the
	// offsets they span fit in that many keys, and allocates the slots
	// those offsets need rounded up to the map's share halved a whole
	// number of times; the table is reused by the next pass. 0 means
	// DefaultMapBytes.
	MapBytes int64
	// Throttle, when not nil, is called with the size of each chunk the
	// pass reads from the old segments (mapping included) and of each
	// chunk it writes to the cleaned files, after the read or write; it
	// may block to limit the pass's I/O rate. A non-nil error aborts the
	// pass (ErrCleanAborted wrapping it), as a Hook error does. The sizes
	// add up to CleanStats.BytesRead plus BytesWritten.
	Throttle func(n int) error
	// Hook, when not nil, is called after each file step with the step's
	// name (cleanStep*); a non-nil error aborts the pass there as a failed
	// step would. Tests use it to copy the directory at each step (a crash
	// there) or to pause the pass.
	Hook func(step string) error
}

// The steps a pass reports to CleanOptions.Hook.
const (
	CleanStepWritten    = "written"    // a segment's .cleaned files are written and synced
	CleanStepSwapReady  = "swap-ready" // they are renamed to .swap and the directory synced
	CleanStepSwapped    = "swapped"    // one segment's .swap files replaced the old files (appendMu held)
	CleanStepCheckpoint = "checkpoint" // the cleaner checkpoint is durable
)

// CleanStats describe a pass.
type CleanStats struct {
	BytesRead       int64         // bytes read from the old segments (mapping and copying)
	BytesWritten    int64         // bytes written to the cleaned segments' files (indexes included)
	RecordsRemoved  int64         // records dropped
	BatchesRemoved  int64         // batches dropped whole
	SegmentsCleaned int           // segments replaced
	FirstDirty      int64         // the first dirty offset after the pass
	Duration        time.Duration // time the pass took
}

// cleanPlan is what a pass read under the lock: the cleanable segments, each
// with a reference, and the sizes it saw.
type cleanPlan struct {
	segs       []*segment
	sizes      []int64 // each segment's size when planned
	nexts      []int64 // its end offset
	modMs      []int64 // its modification time
	gen        uint64  // the log's truncGen
	firstDirty int64
	lastOfPID  map[int64]int64        // producer id -> last offset of its newest batch in the log
	aborted    map[int64][]AbortedTxn // producer id -> its aborted transactions
}

// abortedBatch reports whether h is a batch of an aborted transaction: the
// pass drops its records (no reader of committed data sees them, and one of
// them must not hide an older committed value of its key).
func (p *cleanPlan) abortedBatch(h *record.Header) bool {
	if len(p.aborted) == 0 || !h.IsTransactional() || h.IsControl() {
		return false
	}
	for _, a := range p.aborted[h.ProducerID] {
		if a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
			return true
		}
	}
	return false
}

func (p *cleanPlan) indexOf(s *segment) int { return slices.Index(p.segs, s) }

func (p *cleanPlan) release() {
	for _, s := range p.segs {
		s.release()
	}
}

// Clean runs one cleaning pass over the cleanable range: the closed segments
// wholly below the high watermark, up to the first one younger than
// opts.MinCompactionLag. It maps the keys of the dirty segments (from the
// first dirty offset on, as many whole segments as opts.MapBytes allows),
// rewrites every cleanable segment up to the last mapped one that loses a
// record, swaps the rewritten segments in, and saves the new first dirty
// offset. Offsets never change; a Read at a removed offset returns the
// next batch.
//
// Clean reads and writes files without the log's locks; it takes appendMu
// and mu only to swap the segment list, and aborts (ErrCleanAborted, nothing
// changed) if truncation or retention changed the segments it read. Passes
// are serialized. A corrupt batch in the range stops the pass with an error
// wrapping ErrCorruptData that names the segment and position.
func (l *Log) Clean(opts CleanOptions) (CleanStats, error) {
	begin := time.Now()
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if opts.MapBytes <= 0 {
		opts.MapBytes = DefaultMapBytes
	}
	plan, err := l.planClean(opts)
	if err != nil {
		return CleanStats{}, err
	}
	defer plan.release()
	st := CleanStats{FirstDirty: plan.firstDirty}
	c := newCleaner(l, opts, plan, &st)
	defer c.release()
	covered, err := c.buildMap() // the pass covers plan.segs[:covered]
	if err != nil || covered == 0 {
		st.Duration = time.Since(begin)
		return st, err
	}
	dirtyEnd := max(plan.nexts[covered-1], plan.firstDirty)
	outs, err := c.writeAll(covered)
	if err == nil {
		err = l.swapCleaned(outs, opts)
	}
	if err != nil {
		for _, o := range outs {
			o.discard(l.fs)
		}
		st.Duration = time.Since(begin)
		return st, err
	}
	st.SegmentsCleaned = len(outs)
	st.FirstDirty = dirtyEnd
	l.cleanedTo.Store(dirtyEnd)
	err = l.saveCleanerCheckpoint(dirtyEnd, opts)
	l.logger.Info("cleaned log", slog.Int("segments", len(outs)), slog.Int64("first_dirty", dirtyEnd),
		slog.Int64("records_removed", st.RecordsRemoved), slog.Int64("bytes_read", st.BytesRead),
		slog.Int64("bytes_written", st.BytesWritten))
	st.Duration = time.Since(begin)
	return st, err
}

// planClean picks the cleanable segments under mu and takes a reference on
// each. It takes mu for writing only to consume cleanCut: a TruncateTo since
// the last plan lowers the first dirty offset to its cut.
func (l *Log) planClean(opts CleanOptions) (*cleanPlan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return nil, err
	}
	// Not past the last stable offset: an open transaction's records may
	// still be aborted.
	hw := l.producers.txns.firstOpen(l.hw.Load())
	lagMs := opts.Now.Add(-opts.MinCompactionLag).UnixMilli()
	p := &cleanPlan{firstDirty: max(min(l.cleanedTo.Load(), l.cleanCut), l.segs[0].base), lastOfPID: map[int64]int64{}, gen: l.truncGen}
	for _, s := range l.segs[:len(l.segs)-1] {
		// With no lag asked for, timestamps do not matter: a producer
		// clock ahead of the node's must not hold cleaning back.
		if s.next > hw || opts.MinCompactionLag > 0 && s.largestTimestamp() > lagMs {
			break
		}
		s.acquire()
		p.segs = append(p.segs, s)
		p.sizes = append(p.sizes, s.size)
		p.nexts = append(p.nexts, s.next)
		p.modMs = append(p.modMs, s.modMs)
	}
	l.cleanedTo.Store(p.firstDirty)
	l.cleanCut = math.MaxInt64
	for pid, e := range l.producers.m {
		if e.n > 0 {
			p.lastOfPID[pid] = e.newest().LastOffset
		}
	}
	for _, a := range l.producers.txns.aborted {
		if p.aborted == nil {
			p.aborted = map[int64][]AbortedTxn{}
		}
		p.aborted[a.ProducerID] = append(p.aborted[a.ProducerID], a)
	}
	return p, nil
}

// swapCleaned replaces the old segments with the cleaned ones, oldest first:
// on disk (rename of each .swap file over its final name) and in the list.
// It holds appendMu throughout, so neither truncation nor retention can
// change the segments between the check and the swap. A failed rename fails
// the log: the files no longer match what the log serves.
func (l *Log) swapCleaned(outs []*cleanedSegment, opts CleanOptions) error {
	if len(outs) == 0 {
		return nil
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err := l.checkLocked()
	if err == nil {
		err = l.stillListedLocked(outs)
	}
	l.mu.RUnlock()
	if err != nil {
		return err
	}
	for _, o := range outs {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, logSuffix} {
			if rerr := l.fs.Rename(o.old.path(suffix+swapSuffix), o.old.path(suffix)); rerr != nil {
				l.mu.Lock()
				defer l.mu.Unlock()
				return l.failLocked(fmt.Errorf("clean: swap segment %d: %w", o.old.base, rerr))
			}
		}
		o.swapped = true
		if opts.Hook != nil {
			_ = opts.Hook(CleanStepSwapped) // too late to abort: the swap goes on
		}
	}
	l.mu.Lock()
	segs := slices.Clone(l.segs)
	for _, o := range outs {
		i := slices.Index(segs, o.old)
		segs[i] = o.seg
	}
	l.segs = segs
	l.dirDirty = true
	l.mu.Unlock()
	for _, o := range outs {
		o.old.retire()
		o.old.release() // the list's reference; Slices keep theirs
		o.seg = nil     // now the list's
	}
	return nil
}

// stillListedLocked checks that every segment a pass rewrote is still in the
// list, closed, and of the size the pass read. mu must be held.
func (l *Log) stillListedLocked(outs []*cleanedSegment) error {
	for _, o := range outs {
		i := slices.Index(l.segs, o.old)
		if i < 0 || i == len(l.segs)-1 || o.old.size != o.oldSize {
			return fmt.Errorf("%w: segment %d was truncated or deleted during the pass", ErrCleanAborted, o.old.base)
		}
	}
	return nil
}

// saveCleanerCheckpoint writes the first dirty offset durably, after syncing
// the directory so the swapped names are on disk first. The directory sync
// failing fails the log (the swap is published); the checkpoint failing
// does not: a stale checkpoint only makes the next pass redo work.
func (l *Log) saveCleanerCheckpoint(offset int64, opts CleanOptions) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	err := l.checkLocked()
	l.mu.RUnlock()
	if err != nil {
		return err // Close's final flush syncs the directory (dirDirty)
	}
	if err := l.sync(l.dirF); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failLocked(fmt.Errorf("clean: %w", err))
	}
	l.fsyncs.Add(1)
	err = writeFileAtomic(l.fs, filepath.Join(l.dir, CleanerCheckpointFile), encodeOffsetCheckpoint(offset))
	if err == nil {
		err = l.sync(l.dirF)
	}
	if err != nil {
		return fmt.Errorf("clean: cleaner checkpoint: %w", err)
	}
	if opts.Hook != nil {
		_ = opts.Hook(CleanStepCheckpoint)
	}
	return nil
}

// syncDirForClean fsyncs the directory for a pass that has not changed the
// log yet; a failure aborts the pass (the caller removes its files).
func (l *Log) syncDirForClean() error {
	l.ckptMu.Lock() // Close closes dirF under ckptMu
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	err := l.checkLocked()
	l.mu.RUnlock()
	if err != nil {
		return err
	}
	return l.sync(l.dirF)
}
