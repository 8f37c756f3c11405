package log

import (
	"io"
	"slices"
)

// Tiered storage, the log's side. A topic with remote storage has its
// closed segments copied to an object store by its leader (the storage
// node's tier package); the log hands those segments out (Closed), and
// retention deletes only what the remote log holds (Config.Tiered,
// SetUploaded), so a record leaves the disk only once it is remote.

// ClosedSegment is a closed segment held for reading while it is copied:
// its file stays open, even if retention deletes the segment, until
// Release.
type ClosedSegment struct {
	// Base is the segment's base offset, Next the offset after its last
	// batch, Size its bytes of whole batches.
	Base, Next, Size int64
	seg              *segment
}

// ReaderAt reads the segment's file (positioned reads only).
func (c ClosedSegment) ReaderAt() io.ReaderAt { return c.seg.log }

// Release drops the hold on the segment.
func (c ClosedSegment) Release() { c.seg.release() }

// Closed returns the oldest closed (not active) segment that holds offsets
// at or after from and lies wholly below the high watermark and the last
// stable offset, so that its records are on every in-sync replica and its
// transactions are decided, and, in a compacted log, below the cleaner's
// first dirty offset, so that what is uploaded is the cleaner's output;
// false when there is none yet.
func (l *Log) Closed(from int64) (ClosedSegment, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ClosedSegment{}, false
	}
	bound := l.producers.txns.firstOpen(l.hw.Load())
	if l.cfg.Compact {
		bound = min(bound, l.cleanedTo.Load())
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.next <= from || s.size == 0 {
			continue
		}
		if s.next > bound {
			return ClosedSegment{}, false
		}
		s.acquire()
		return ClosedSegment{Base: s.base, Next: s.next, Size: s.size, seg: s}, true
	}
	return ClosedSegment{}, false
}

// SetUploaded records that the remote log holds every record below offset:
// a tiered log's retention may delete the segments wholly below it. It
// only moves forward.
func (l *Log) SetUploaded(offset int64) {
	for {
		old := l.uploaded.Load()
		if offset <= old || l.uploaded.CompareAndSwap(old, offset) {
			return
		}
	}
}

// Uploaded returns what SetUploaded last raised the bound to.
func (l *Log) Uploaded() int64 { return l.uploaded.Load() }

// HeldBack returns how many segments the last retention pass kept only
// because they were not yet in remote storage.
func (l *Log) HeldBack() int64 { return l.heldBack.Load() }

// Unuploaded returns the closed segments (and their bytes) holding offsets
// at or after from: what a tiered log's leader has still to upload.
func (l *Log) Unuploaded(from int64) (segments int, bytes int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.next > from {
			segments++
			bytes += s.size
		}
	}
	return segments, bytes
}

// PrependEpochs completes the leader-epoch cache with the epochs of the
// remote log (oldest first), which a replica that copied only the local
// tail never saw: the entries older than the cache's first are put in
// front of it, and the first entry starts earlier when its epoch began in
// the remote part. The cache is saved when it changed.
func (l *Log) PrependEpochs(older []EpochEntry) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	merged := prependEpochs(l.epochs, older)
	changed := !slices.Equal(merged, l.epochs)
	l.epochs = merged
	l.mu.Unlock()
	if !changed {
		return nil
	}
	return l.saveEpochs()
}

// prependEpochs is PrependEpochs on a cache.
func prependEpochs(entries, older []EpochEntry) []EpochEntry {
	if len(entries) == 0 {
		return slices.Clone(older)
	}
	first := entries[0]
	var out []EpochEntry
	for _, e := range older {
		switch {
		case e.Epoch < first.Epoch && e.StartOffset < first.StartOffset:
			out = appendEpoch(out, e)
		case e.Epoch == first.Epoch && e.StartOffset < first.StartOffset:
			first.StartOffset = e.StartOffset
		}
	}
	out = appendEpoch(out, first)
	return append(out, entries[1:]...)
}
