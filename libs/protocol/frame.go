package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame limits.
const (
	// LengthSize is the size of the frame length prefix.
	LengthSize = 4
	// DefaultMaxFrame is the largest frame a reader accepts unless told otherwise.
	DefaultMaxFrame = 64 << 20
)

// Sentinel errors of the framing layer.
var (
	// ErrFrameTooLarge is returned for a frame longer than the reader's maximum;
	// the connection cannot be resynchronised after it and must be closed.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
	// ErrMalformedFrame is returned when a frame's header cannot be decoded or its
	// stated lengths disagree.
	ErrMalformedFrame = errors.New("protocol: malformed frame")
)

// FrameReader cuts length-prefixed frames from a stream. It owns one buffer that
// it grows up to the maximum frame size; a frame returned by Next is valid until
// the following call. A FrameReader is not safe for concurrent use.
type FrameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
	// Alloc, when set, supplies the buffer for a frame larger than the current
	// one (for example from a pool); it must return a slice of length n.
	Alloc func(n int) []byte
}

// NewFrameReader reads frames of at most max bytes (DefaultMaxFrame when max <= 0).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &FrameReader{r: br, max: max}
}

// Next reads the next frame and returns its bytes after the length prefix.
func (fr *FrameReader) Next() ([]byte, error) {
	var lb [LengthSize]byte
	if _, err := io.ReadFull(fr.r, lb[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(lb[:]))
	if n > fr.max {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, fr.max)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrMalformedFrame)
	}
	if cap(fr.buf) < n {
		if fr.Alloc != nil {
			fr.buf = fr.Alloc(n)
		} else {
			fr.buf = make([]byte, n, growCap(n))
		}
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return fr.buf, nil
}

// Detach hands the current buffer to the caller (who may keep the last frame)
// and makes the reader allocate a fresh one for the next frame.
func (fr *FrameReader) Detach() { fr.buf = nil }

// GrowCap rounds a frame size up to the buffer capacity a reader allocates for
// it (a power of two, at least 4 KiB), so pooled buffers come in few sizes.
func GrowCap(n int) int { return growCap(n) }

func growCap(n int) int {
	c := 4096
	for c < n {
		c *= 2
	}
	return c
}
