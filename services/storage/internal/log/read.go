package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sluicemq/sluice/libs/record"
)

// Slice is a run of whole batches in one segment file: Size bytes at Pos.
// Send it with positioned I/O only (pread, sendfile with an explicit offset):
// the file is shared and its offset must not move. Release it when done; the
// segment's files stay open until then, even if retention or truncation
// deletes the segment. The zero Slice is empty and needs no Release.
type Slice struct {
	f    *os.File
	pos  int64
	size int64
	// The segment as the read saw it: its size and end offset (NextOffset).
	segSize, segNext int64
	hold             *sliceHold
}

type sliceHold struct {
	once    sync.Once
	release func()
}

// FileSlice is a Slice of size bytes of whole batches at pos in f, for
// batches kept outside the log (a remote segment's cached blocks): next is
// the offset after the last of them, and release runs once, at the first
// Release.
func FileSlice(f *os.File, pos, size, next int64, release func()) Slice {
	return Slice{f: f, pos: pos, size: size, segSize: pos + size, segNext: next, hold: &sliceHold{release: release}}
}

// File returns the segment file (nil for an empty Slice). Use positioned
// reads only.
func (s Slice) File() *os.File { return s.f }

// Pos returns the position of the first batch in the file.
func (s Slice) Pos() int64 { return s.pos }

// Size returns the slice's length in bytes; 0 for an empty read.
func (s Slice) Size() int64 { return s.size }

// NextOffset returns the base offset of the batch after the slice in its
// segment, or the segment's end offset: one past the slice's last record,
// or further where compaction left a gap after it. It reads that batch's
// header (read_committed fetches want it; most reads do not). 0 for an
// empty read.
func (s Slice) NextOffset() (int64, error) {
	end := s.pos + s.size
	if s.size == 0 || end >= s.segSize {
		return s.segNext, nil
	}
	var b [record.HeaderSize]byte
	if _, err := s.f.ReadAt(b[:], end); err != nil {
		return 0, fmt.Errorf("read the header after a slice: %w", err)
	}
	h, err := record.ParseHeader(b[:])
	if err != nil {
		return 0, fmt.Errorf("the batch after a slice: %w", err)
	}
	return h.BaseOffset, nil
}

// Release drops the slice's hold on its segment. Copies of one Slice share the
// hold, so releasing any of them releases all; further calls do nothing.
func (s Slice) Release() {
	if s.hold != nil {
		s.hold.once.Do(s.hold.release)
	}
}

// ReadAll reads the slice's bytes with one positioned read.
func (s Slice) ReadAll() ([]byte, error) {
	if s.size == 0 {
		return nil, nil
	}
	b := make([]byte, s.size)
	n, err := s.f.ReadAt(b, s.pos)
	if n == len(b) {
		return b, nil
	}
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: segment cut under the slice (%d of %d bytes)", io.ErrUnexpectedEOF, n, len(b))
	}
	return nil, fmt.Errorf("log: read slice: %w", err)
}

// segView is a reader's copy of a segment's state, taken under Log.mu; the
// caller holds a reference on seg.
type segView struct {
	seg   *segment
	size  int64
	next  int64
	index []indexEntry
	gen   uint64 // the log's truncGen when the view was taken
}

// viewLocked takes a reference on s and notes what it holds; l.mu must be held.
func (l *Log) viewLocked(s *segment) segView {
	s.acquire()
	return segView{seg: s, size: s.size, next: s.next, index: s.index, gen: l.truncGen}
}

// Read returns whole batches starting with the one that holds offset: as many
// as fit in maxBytes, but always the first one, and none whose base offset is
// at or above maxOffset (the high watermark). The batches come from one
// segment. It returns an empty Slice when offset is the log end offset or at
// or above maxOffset, and ErrOffsetOutOfRange when offset is below the log
// start offset or above the log end offset. Only the index look-up runs under
// the read lock; the header reads are preads outside it.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Slice, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return Slice{}, ErrClosed
	}
	start, end := l.start, l.end
	if offset < start || offset > end {
		l.mu.RUnlock()
		return Slice{}, fmt.Errorf("%w: offset %d, the log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, end)
	}
	if offset == end || offset >= maxOffset {
		l.mu.RUnlock()
		return Slice{}, nil
	}
	i := l.segmentForLocked(offset)
	for i+1 < len(l.segs) && offset >= l.segs[i].next { // in a gap after segment i
		i++
	}
	v := l.viewLocked(l.segs[i])
	l.mu.RUnlock()

	sl, err := v.read(offset, maxBytes, maxOffset)
	if err != nil {
		v.seg.release()
		return Slice{}, err
	}
	return sl, nil
}

// segmentForLocked returns the index of the last segment whose base offset is
// <= offset (0 if none). mu must be held.
func (l *Log) segmentForLocked(offset int64) int {
	lo, hi := 0, len(l.segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.segs[m].base <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return max(lo-1, 0)
}

// relOffset is offset relative to the segment base, clamped to the index's
// range.
func (v *segView) relOffset(offset int64) uint32 {
	return uint32(min(max(offset-v.seg.base, 0), int64(^uint32(0))))
}

// read builds the slice; the caller releases the view on error.
func (v *segView) read(offset int64, maxBytes int, maxOffset int64) (Slice, error) {
	sc := getScanner(v.seg.log, v.size)
	defer putScanner(sc)
	first, h, err := v.find(sc, offset, func(h record.Header) bool {
		return h.LastOffset() >= offset
	})
	if errors.Is(err, errNotFound) {
		err = fmt.Errorf("%w: offset %d is not in segment %d", record.ErrCorrupt, offset, v.seg.base)
	}
	if err != nil {
		return Slice{}, err
	}
	end := first + int64(h.Size())
	limit := v.size
	if room := int64(max(maxBytes, 0)); room < v.size-first {
		limit = first + room
	}
	if maxOffset < v.next && end < limit {
		hw, _, err := v.find(sc, maxOffset, func(h record.Header) bool {
			return h.BaseOffset >= maxOffset
		})
		if err != nil && !errors.Is(err, errNotFound) {
			return Slice{}, err
		}
		if err == nil {
			limit = min(limit, hw)
		}
	}
	if end < limit {
		// Whole batches up to limit: jump to the last indexed batch before
		// it, then walk headers.
		pos := max(end, floorPos(v.index, limit))
		for pos < limit {
			h, err := sc.header(pos)
			if err != nil {
				return Slice{}, v.corrupt(pos, err)
			}
			if pos+int64(h.Size()) > limit {
				break
			}
			pos += int64(h.Size())
		}
		end = pos
	}
	if err := v.verify(first, end); err != nil {
		return Slice{}, err
	}
	return Slice{f: v.seg.log, pos: first, size: end - first, segSize: v.size, segNext: v.next, hold: &sliceHold{release: v.seg.release}}, nil
}

var errNotFound = errors.New("no such batch")

// find looks up the last indexed batch at or before offset and walks batch
// headers from there to the first batch that match accepts, or errNotFound at
// the end of the view. The indexed batch must carry the offset its entry
// names: a wrong entry is reported, never followed to wrong data.
func (v *segView) find(sc *batchScanner, offset int64, match func(record.Header) bool) (int64, record.Header, error) {
	pos, want := int64(0), int64(-1)
	if len(v.index) > 0 {
		rel := v.relOffset(offset)
		if e := v.index[floorEntry(v.index, rel)]; e.rel <= rel {
			pos, want = int64(e.pos), v.seg.base+int64(e.rel)
		}
	}
	for pos < v.size {
		h, err := sc.header(pos)
		if err == nil && want >= 0 && h.BaseOffset != want {
			err = fmt.Errorf("%w: offset index names offset %d, the batch has %d", record.ErrCorrupt, want, h.BaseOffset)
		}
		if err != nil {
			return 0, h, v.corrupt(pos, err)
		}
		if match(h) {
			return pos, h, nil
		}
		pos += int64(h.Size())
		want = -1
	}
	return 0, record.Header{}, errNotFound
}

func (v *segView) corrupt(pos int64, err error) error {
	return fmt.Errorf("log: segment %d at position %d: %w", v.seg.base, pos, err)
}
