package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// fixCRC recomputes the CRC of a batch whose covered bytes a test changed.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// buildBatch builds one batch of recs with codec, failing the test on error,
// and returns a copy the test may keep and mutate.
func buildBatch(t testing.TB, codec Codec, recs []Record) []byte {
	t.Helper()
	b := NewBuilder(codec)
	for _, r := range recs {
		b.Append(r)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatalf("Build(%v): %v", codec, err)
	}
	return bytes.Clone(out)
}

// rawBatch wraps a hand-written records section in a valid header and CRC;
// malformed-input tests use it to reach the record decoder.
func rawBatch(codec Codec, count, lastDelta int32, records []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(records))
	b = append(b, records...)
	putHeader(b, &Header{
		BatchLength: int32(len(b) - LogOverhead), LeaderEpoch: -1, Magic: Magic,
		Attributes: int16(codec), LastOffsetDelta: lastDelta, RecordCount: count,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	})
	return b
}

// collect iterates all of data from start and returns copies of the records
// and the iterator's final state.
func collect(data []byte, start int64) ([]Record, *Iterator) {
	it := NewIterator(data)
	it.SetStartOffset(start)
	var out []Record
	for it.Next() {
		r := *it.Record()
		r.Key = cloneNil(r.Key)
		r.Value = cloneNil(r.Value)
		if r.Headers != nil {
			hs := make([]RecordHeader, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = RecordHeader{Key: h.Key, Value: cloneNil(h.Value)}
			}
			r.Headers = hs
		}
		out = append(out, r)
	}
	return out, it
}

// cloneNil copies b, keeping nil distinct from empty.
func cloneNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// sameRecord reports how got differs from want (ignoring Offset), or "".
func sameRecord(got, want Record) string {
	switch {
	case got.Timestamp != want.Timestamp:
		return fmt.Sprintf("timestamp %d, want %d", got.Timestamp, want.Timestamp)
	case !sameBytes(got.Key, want.Key):
		return fmt.Sprintf("key %q (nil %v), want %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !sameBytes(got.Value, want.Value):
		return fmt.Sprintf("value of %d bytes (nil %v), want %d (nil %v)", len(got.Value), got.Value == nil, len(want.Value), want.Value == nil)
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("%d headers, want %d", len(got.Headers), len(want.Headers))
	}
	for i := range got.Headers {
		g, w := got.Headers[i], want.Headers[i]
		if g.Key != w.Key || !sameBytes(g.Value, w.Value) {
			return fmt.Sprintf("header %d = %q:%q, want %q:%q", i, g.Key, g.Value, w.Key, w.Value)
		}
	}
	return ""
}

// sameBytes is bytes.Equal that also tells nil from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// wantErr fails unless err wraps one of the targets.
func wantErr(t *testing.T, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one wrapping %v", targets)
	}
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	t.Fatalf("error %q wraps none of %v", err, targets)
}

// textValue returns n bytes of word-like text from rng: compressible the way
// real payloads are, not endlessly like zeros.
func textValue(rng *rand.Rand, n int) []byte {
	words := []string{"order", "id", "amount", "currency", "EUR", "status", "shipped", "customer", "42", "true", "{", "}", ":", ","}
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[rng.IntN(len(words))]...)
		b = append(b, ' ')
	}
	return b[:n]
}
