package log

import (
	"errors"
	"fmt"
	"os"

	"github.com/sluicemq/sluice/libs/record"
)

// cleanedSegment is one rewritten segment on its way in: its files are
// %020d.{log,index,timeindex} plus the stage's suffix.
type cleanedSegment struct {
	old     *segment
	oldSize int64
	seg     *segment // the new segment, holding the .cleaned file's descriptor
	stage   string   // cleanedSuffix, then swapSuffix
	swapped bool     // its files replaced the old ones
}

// discard closes a cleaned segment the pass gives up, and removes its files
// unless they already replaced the old ones. Removal is best effort: Open
// removes a leftover .cleaned file and completes or removes a .swap one.
func (o *cleanedSegment) discard(fsys FileSystem) {
	if o.seg != nil {
		o.seg.release()
		o.seg = nil
	}
	if o.swapped {
		return
	}
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		for _, stage := range []string{cleanedSuffix, swapSuffix} {
			_ = fsys.Remove(o.old.path(suffix + stage)) // best effort: Open deals with what stays
		}
	}
}

// writeAll rewrites the plan's first n segments, oldest first, each to
// .cleaned files that end up renamed to .swap; segments that lose nothing
// are left alone. Each segment is durable as .swap before the next is
// started, so a crash leaves the swaps of a prefix of the rewritten
// segments (package doc, "Compaction").
func (c *cleaner) writeAll(n int) ([]*cleanedSegment, error) {
	var outs []*cleanedSegment
	for i := range n {
		o, err := c.writeSegment(i)
		if o != nil {
			outs = append(outs, o)
		}
		if err == nil && o != nil {
			err = c.stageSwap(o)
		}
		if err != nil {
			return outs, err
		}
	}
	return outs, nil
}

// writeSegment filters segment i into a new .cleaned segment, or returns
// nil when no batch changes. The file is created at the first change, with
// the unchanged bytes before it copied over.
func (c *cleaner) writeSegment(i int) (*cleanedSegment, error) {
	old, size := c.plan.segs[i], c.plan.sizes[i]
	var o *cleanedSegment
	var written int64 // bytes of the new segment, written or in c.out
	c.idx.reset(c.interval, nil, nil)
	c.out = c.out[:0]
	err := c.scan(i, func(pos int64, h record.Header, b []byte) error {
		before := len(c.out)
		var err error
		var dropped bool
		c.out, dropped, err = c.filterBatch(c.out, b, &h, pos+int64(h.Size()) == size)
		if err != nil {
			return err
		}
		changed := dropped || c.rewrote
		if o == nil && changed {
			// First change: start the new file with the bytes before it.
			if o, err = c.createCleaned(old, size, pos); err != nil {
				return err
			}
		}
		if !dropped {
			rel := uint32(h.BaseOffset - old.base)
			c.idx.add(rel, written, h.MaxTimestamp)
			written += int64(len(c.out) - before)
		}
		if o == nil {
			c.out = c.out[:0] // unchanged so far: the copy brings these bytes
			return nil
		}
		return c.flushOut(o, false)
	})
	if err == nil && o != nil {
		err = c.flushOut(o, true)
	}
	if err == nil && o != nil {
		err = c.finishCleaned(o, written)
	}
	if err != nil && !errors.As(err, new(*CorruptError)) && !errors.Is(err, ErrCleanAborted) {
		err = fmt.Errorf("%w: segment %d: %w", ErrCleanAborted, old.base, err)
	}
	return o, err
}

// filterBatch appends to dst what the batch b becomes: b itself, a copy
// without its removed records (same header fields, new length, count and
// CRC; a compressed one compressed again with its codec), an empty batch,
// or nothing (dropped), and sets c.rewrote unless it is b itself. last says
// b ends its segment.
// Each record is decoded and looked up once.
func (c *cleaner) filterBatch(dst, b []byte, h *record.Header, last bool) ([]byte, bool, error) {
	c.recs, c.kept, c.rewrote = 0, c.kept[:0], false
	if c.plan.abortedBatch(h) {
		c.recs = int(h.RecordCount) // every record goes
	} else if err := c.records(b, h, c.keepFn); err != nil {
		return dst, false, err
	}
	kept := len(c.kept)
	switch {
	case h.IsControl() || kept == c.recs:
		return append(dst, b...), false, nil // unchanged
	case kept == 0:
		c.st.RecordsRemoved += int64(c.recs)
		c.rewrote = true
		// The last batch of a segment stays so the segment keeps its end
		// offset (segments follow one another); a producer's last batch
		// stays so the producer state rebuilt from headers keeps it.
		if last || (idempotent(h) && c.plan.lastOfPID[h.ProducerID] == h.LastOffset()) {
			start := len(dst)
			dst = append(dst, b[:record.HeaderSize]...)
			record.SealBatch(dst[start:], 0)
			return dst, false, nil
		}
		c.st.BatchesRemoved++
		return dst, true, nil
	}
	c.rewrote = true
	start := len(dst)
	dst = append(dst, b[:record.HeaderSize]...)
	if codec := h.Compression(); codec != record.CodecNone {
		// Compressed: the kept records are compressed again with the
		// batch's codec, as Kafka's cleaner does.
		c.joined = c.joined[:0]
		for _, r := range c.kept {
			c.joined = append(c.joined, r...)
		}
		var err error
		if dst, err = record.CompressSection(codec, dst, c.joined); err != nil {
			return dst[:start], false, fmt.Errorf("compress a cleaned %v batch at offset %d: %w", codec, h.BaseOffset, err)
		}
	} else {
		for _, r := range c.kept {
			dst = append(dst, r...)
		}
	}
	record.SealBatch(dst[start:], kept)
	c.st.RecordsRemoved += int64(c.recs - kept)
	return dst, false, nil
}

// keepRecord counts a record of the current batch and notes its bytes if
// it stays: the latest of its key stays, unless it is a tombstone past
// DeleteRetention; keyless records stay.
func (c *cleaner) keepRecord(r record.RawRecord) {
	c.recs++
	if r.Key != nil {
		if m, ok := c.offsets.get(hashKey(r.Key)); (ok && r.Offset < m) || (r.NullValue && r.Timestamp <= c.tombBefore) {
			return
		}
	}
	c.kept = append(c.kept, r.Bytes)
}

// createCleaned creates the .cleaned segment file for old and copies its
// first prefix bytes (unchanged batches) into it.
func (c *cleaner) createCleaned(old *segment, oldSize, prefix int64) (*cleanedSegment, error) {
	f, err := c.fsys.OpenFile(old.path(logSuffix+cleanedSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create cleaned segment: %w", err)
	}
	seg := &segment{base: old.base, dir: old.dir, fs: c.fsys, log: f}
	seg.refs.Store(1)
	o := &cleanedSegment{old: old, oldSize: oldSize, seg: seg, stage: cleanedSuffix}
	for pos := int64(0); pos < prefix; {
		n := int(min(int64(len(c.copyBuf)), prefix-pos))
		if _, err := old.log.ReadAt(c.copyBuf[:n], pos); err != nil {
			return o, fmt.Errorf("read segment %d: %w", old.base, err)
		}
		if err := c.didRead(n); err != nil {
			return o, err
		}
		if _, err := c.fsys.WriteAt(f, c.copyBuf[:n], pos); err != nil {
			return o, fmt.Errorf("write cleaned segment: %w", err)
		}
		if err := c.didWrite(n); err != nil {
			return o, err
		}
		pos += int64(n)
	}
	seg.size = prefix
	return o, nil
}

// flushOut writes the buffered output once it reaches a chunk, or all of it
// when final.
func (c *cleaner) flushOut(o *cleanedSegment, final bool) error {
	if len(c.out) == 0 || (!final && len(c.out) < cleanChunk) {
		return nil
	}
	if _, err := c.fsys.WriteAt(o.seg.log, c.out, o.seg.size); err != nil {
		return fmt.Errorf("write cleaned segment: %w", err)
	}
	o.seg.size += int64(len(c.out))
	n := len(c.out)
	c.out = c.out[:0]
	return c.didWrite(n)
}

// finishCleaned writes the new segment's indexes, fsyncs its files and
// fills in the segment.
func (c *cleaner) finishCleaned(o *cleanedSegment, size int64) error {
	if size != o.seg.size {
		return fmt.Errorf("cleaned segment %d: wrote %d bytes, expected %d", o.old.base, o.seg.size, size)
	}
	idx, times := c.idx.index, c.idx.times
	for _, f := range []struct {
		suffix string
		encode func([]byte) []byte
	}{
		{indexSuffix, func(b []byte) []byte { return appendIndexBytes(b, idx) }},
		{timeIndexSuffix, func(b []byte) []byte { return appendTimeBytes(b, times) }},
	} {
		c.indexBytes = f.encode(c.indexBytes[:0])
		if err := writeSynced(c.fsys, o.old.path(f.suffix+cleanedSuffix), c.indexBytes); err != nil {
			return err
		}
		if err := c.didWrite(len(c.indexBytes)); err != nil {
			return err
		}
	}
	if err := c.fsys.Sync(o.seg.log); err != nil {
		return fmt.Errorf("fsync cleaned segment: %w", err)
	}
	c.l.fsyncs.Add(3)
	s := o.seg
	s.index, s.times = append([]indexEntry(nil), idx...), append([]timeEntry(nil), times...)
	s.next, s.modMs = c.plan.nexts[c.plan.indexOf(o.old)], c.plan.modMs[c.plan.indexOf(o.old)]
	s.verified.Store(size)
	if c.hook != nil {
		return c.hook(CleanStepWritten)
	}
	return nil
}

// stageSwap renames the .cleaned files to .swap and syncs the directory.
func (c *cleaner) stageSwap(o *cleanedSegment) error {
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := c.fsys.Rename(o.old.path(suffix+cleanedSuffix), o.old.path(suffix+swapSuffix)); err != nil {
			return fmt.Errorf("%w: segment %d: %w", ErrCleanAborted, o.old.base, err)
		}
		o.stage = swapSuffix
	}
	if err := c.l.syncDirForClean(); err != nil {
		return fmt.Errorf("%w: segment %d: %w", ErrCleanAborted, o.old.base, err)
	}
	if c.hook != nil {
		if err := c.hook(CleanStepSwapReady); err != nil {
			return fmt.Errorf("%w: %w", ErrCleanAborted, err)
		}
	}
	return nil
}

// writeSynced creates path with data and fsyncs it.
func writeSynced(fsys FileSystem, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fsys.WriteAt(f, data, 0)
	if err == nil {
		err = fsys.Sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
