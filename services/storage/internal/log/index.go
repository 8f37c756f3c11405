package log

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Index file entry sizes.
const (
	indexEntrySize = 8  // relative offset uint32, position uint32
	timeEntrySize  = 12 // max timestamp int64, relative offset uint32
)

// indexEntry maps a batch's base offset (relative to the segment's base) to the
// file position of the batch's first byte.
type indexEntry struct {
	rel uint32
	pos uint32
}

// timeEntry names a batch (by base offset relative to the segment's base)
// whose max timestamp ts is larger than every earlier batch's in the segment.
type timeEntry struct {
	ts  int64
	rel uint32
}

// The index slices a segment publishes are append-only: entries are never
// modified in place, and truncation makes a copy. A reader may therefore keep a
// slice header copied under Log.mu and search it after unlocking.

// floorEntry returns the index of the last entry whose offset is <= rel, or 0
// when there is none (the first entry is always the segment's first batch).
func floorEntry(idx []indexEntry, rel uint32) int {
	lo, hi := 0, len(idx) // the first entry with idx[i].rel > rel is in [lo, hi]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if idx[m].rel <= rel {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return max(lo-1, 0)
}

// floorPos returns the last indexed batch position <= pos, or 0.
func floorPos(idx []indexEntry, pos int64) int64 {
	lo, hi := 0, len(idx)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(idx[m].pos) <= pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return int64(idx[lo-1].pos)
}

// firstTimeAtOrAfter returns the index of the first entry with timestamp >= ts,
// or len(times). Because entries are added only when a batch's timestamp
// exceeds all earlier ones, that entry's batch is the first batch in the
// segment whose max timestamp reaches ts.
func firstTimeAtOrAfter(times []timeEntry, ts int64) int {
	lo, hi := 0, len(times)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if times[m].ts < ts {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// indexBuilder decides which batches get index entries. Append and recovery
// both use it, so a rebuilt index equals the one written during appends with
// the same interval.
type indexBuilder struct {
	interval int64
	lastPos  int64 // position of the last offset-index entry; -1 when none
	maxTs    int64 // timestamp of the last time-index entry; MinInt64 when none
	index    []indexEntry
	times    []timeEntry
}

// reset starts a builder that continues after a segment's published entries.
// The new-entry slices keep their capacity.
func (b *indexBuilder) reset(interval int, idx []indexEntry, times []timeEntry) {
	b.interval = int64(interval)
	b.lastPos, b.maxTs = -1, math.MinInt64
	if n := len(idx); n > 0 {
		b.lastPos = int64(idx[n-1].pos)
	}
	if n := len(times); n > 0 {
		b.maxTs = times[n-1].ts
	}
	b.index, b.times = b.index[:0], b.times[:0]
}

// add records the batch at pos (relative base offset rel, max timestamp maxTs).
func (b *indexBuilder) add(rel uint32, pos int64, maxTs int64) {
	if b.lastPos < 0 || pos-b.lastPos >= b.interval {
		b.index = append(b.index, indexEntry{rel: rel, pos: uint32(pos)})
		b.lastPos = pos
	}
	if maxTs > b.maxTs {
		b.times = append(b.times, timeEntry{ts: maxTs, rel: rel})
		b.maxTs = maxTs
	}
}

func appendIndexBytes(dst []byte, es []indexEntry) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
		dst = binary.BigEndian.AppendUint32(dst, e.pos)
	}
	return dst
}

func appendTimeBytes(dst []byte, es []timeEntry) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
	}
	return dst
}

// decodeIndex parses an offset index and checks that it can describe a segment
// of segSize bytes: whole entries, a first entry for the first batch, offsets
// and positions strictly increasing, positions inside the segment.
func decodeIndex(b []byte, segSize int64) ([]indexEntry, error) {
	if len(b)%indexEntrySize != 0 {
		return nil, fmt.Errorf("size %d is not a multiple of %d", len(b), indexEntrySize)
	}
	es := make([]indexEntry, len(b)/indexEntrySize)
	for i := range es {
		e := indexEntry{
			rel: binary.BigEndian.Uint32(b[i*indexEntrySize:]),
			pos: binary.BigEndian.Uint32(b[i*indexEntrySize+4:]),
		}
		switch {
		case int64(e.pos) >= segSize:
			return nil, fmt.Errorf("entry %d: position %d outside the %d-byte segment", i, e.pos, segSize)
		case i == 0 && e.pos != 0:
			return nil, fmt.Errorf("first entry (%d, %d) is not the first batch", e.rel, e.pos)
		case i > 0 && (e.rel <= es[i-1].rel || e.pos <= es[i-1].pos):
			return nil, fmt.Errorf("entry %d: (%d, %d) does not follow (%d, %d)", i, e.rel, e.pos, es[i-1].rel, es[i-1].pos)
		}
		es[i] = e
	}
	if segSize > 0 && len(es) == 0 {
		return nil, fmt.Errorf("empty index for a %d-byte segment", segSize)
	}
	return es, nil
}

// decodeTimeIndex parses a time index and checks whole entries with strictly
// increasing timestamps and offsets.
func decodeTimeIndex(b []byte) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("size %d is not a multiple of %d", len(b), timeEntrySize)
	}
	es := make([]timeEntry, len(b)/timeEntrySize)
	for i := range es {
		e := timeEntry{
			ts:  int64(binary.BigEndian.Uint64(b[i*timeEntrySize:])),
			rel: binary.BigEndian.Uint32(b[i*timeEntrySize+8:]),
		}
		if i > 0 && (e.ts <= es[i-1].ts || e.rel <= es[i-1].rel) {
			return nil, fmt.Errorf("entry %d: (%d, %d) does not follow (%d, %d)", i, e.ts, e.rel, es[i-1].ts, es[i-1].rel)
		}
		es[i] = e
	}
	return es, nil
}

// writeFileAtomic replaces path with data through a synced temporary file and
// a rename, all through fsys; the caller syncs the directory. A crash leaves
// either the old file or the new one, plus perhaps a .tmp file that Open
// removes.
func writeFileAtomic(fsys FileSystem, path string, data []byte) error {
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fsys.WriteAt(f, data, 0) // the file is empty: the same bytes as a Write
	if err == nil {
		err = fsys.Sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}
