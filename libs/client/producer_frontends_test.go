package client

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// TestSegmentsReader: read through small buffers or written whole, the
// pieces come out in order, empty pieces included, then EOF.
func TestSegmentsReader(t *testing.T) {
	segs := [][]byte{[]byte("ab"), nil, []byte("cdefg"), {}, []byte("h")}
	if err := iotest.TestReader(&segmentsReader{segs: segs}, []byte("abcdefgh")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(iotest.OneByteReader(&segmentsReader{segs: segs}))
	if err != nil || string(got) != "abcdefgh" {
		t.Fatalf("one byte at a time: %q %v", got, err)
	}
	var buf bytes.Buffer
	n, err := (&segmentsReader{segs: segs}).WriteTo(&buf)
	if err != nil || n != 8 || buf.String() != "abcdefgh" {
		t.Fatalf("WriteTo: %d %q %v", n, buf.String(), err)
	}
}
