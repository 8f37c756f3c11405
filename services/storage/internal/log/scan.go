package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sluicemq/sluice/libs/record"
)

// batchScanner walks the batches of a segment file with positioned reads
// through a buffer, so it never moves the file's shared offset and never
// holds more than one chunk (or one batch, if larger) in memory.
type batchScanner struct {
	f      *os.File
	limit  int64 // bytes of the file that may be read (a segment's published size)
	buf    []byte
	bufOff int64 // file position of buf[0]
	bufLen int   // valid bytes in buf
	// onRead, when not nil, is called after each read from f with its
	// size; its error fails the read (the cleaner's accounting and
	// throttle).
	onRead func(n int) error
	// trusted: batches ending at or below this position passed their
	// checks already in this process (segment.verified); batch skips
	// their CRC. reset clears it.
	trusted int64
}

// errZeroTail marks a run of zero bytes where a batch should start: space the
// file system allocated but the write never filled (a torn tail).
var errZeroTail = fmt.Errorf("%w: zero-filled tail", record.ErrShortBatch)

func newScanner(f *os.File, limit int64, buf []byte) *batchScanner {
	return &batchScanner{f: f, limit: limit, buf: buf[:cap(buf)]}
}

// reset points the scanner at another file or limit, keeping its buffer.
func (s *batchScanner) reset(f *os.File, limit int64) {
	s.f, s.limit, s.bufOff, s.bufLen, s.trusted = f, limit, 0, 0, 0
}

// fill returns the n bytes at pos, reading a chunk if they are not buffered.
func (s *batchScanner) fill(pos int64, n int) ([]byte, error) {
	if pos < 0 || int64(n) > s.limit-pos {
		return nil, fmt.Errorf("%w: %d bytes at position %d, segment has %d", record.ErrShortBatch, n, pos, s.limit)
	}
	if pos >= s.bufOff && pos+int64(n) <= s.bufOff+int64(s.bufLen) {
		start := int(pos - s.bufOff)
		return s.buf[start : start+n], nil
	}
	if n > len(s.buf) {
		s.buf = make([]byte, n)
	}
	want := int64(len(s.buf))
	if rest := s.limit - pos; rest < want {
		want = rest
	}
	got, err := s.f.ReadAt(s.buf[:want], pos)
	if err != nil && !(errors.Is(err, io.EOF) && got >= n) {
		s.bufLen = 0
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: file ends at %d", record.ErrShortBatch, pos+int64(got))
		}
		return nil, fmt.Errorf("read segment at %d: %w", pos, err)
	}
	s.bufOff, s.bufLen = pos, got
	if s.onRead != nil {
		if err := s.onRead(got); err != nil {
			s.bufLen = 0
			return nil, err
		}
	}
	return s.buf[:n], nil
}

// header parses the header of the batch at pos (no CRC check) and checks the
// batch fits before the limit.
func (s *batchScanner) header(pos int64) (record.Header, error) {
	if s.limit-pos < record.HeaderSize {
		if b, err := s.fill(pos, int(min(s.limit-pos, record.LogOverhead))); err == nil && allZero(b) {
			return record.Header{}, errZeroTail
		}
		return record.Header{}, fmt.Errorf("%w: %d bytes at position %d, less than a header", record.ErrShortBatch, s.limit-pos, pos)
	}
	b, err := s.fill(pos, record.HeaderSize)
	if err != nil {
		return record.Header{}, err
	}
	if allZero(b[:record.LogOverhead]) {
		return record.Header{}, errZeroTail
	}
	h, err := record.ParseHeader(b)
	if err != nil {
		return h, err
	}
	if int64(h.Size()) > s.limit-pos {
		return h, fmt.Errorf("%w: batch of %d bytes at position %d, %d present", record.ErrShortBatch, h.Size(), pos, s.limit-pos)
	}
	return h, nil
}

// batch reads and validates (length, magic, CRC-32C) the whole batch at pos;
// below trusted it checks the header only.
func (s *batchScanner) batch(pos int64) (record.Header, []byte, error) {
	h, err := s.header(pos)
	if err != nil {
		return h, nil, err
	}
	b, err := s.fill(pos, h.Size())
	if err != nil {
		return h, nil, err
	}
	if pos+int64(h.Size()) <= s.trusted {
		return h, b, nil // checked before: the header parse is enough
	}
	h, err = record.Validate(b)
	return h, b, err
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readBufs holds the small buffers of the read path: a header scan reads at
// most an index interval of headers, so a few KiB per chunk is enough.
var readBufs = sync.Pool{New: func() any { return newScanner(nil, 0, make([]byte, 4096)) }}

func getScanner(f *os.File, limit int64) *batchScanner {
	s := readBufs.Get().(*batchScanner)
	s.reset(f, limit)
	return s
}

func putScanner(s *batchScanner) {
	if cap(s.buf) > 64<<10 { // grown for a large batch: let it go
		return
	}
	s.f = nil
	readBufs.Put(s)
}
