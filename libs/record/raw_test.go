package record

import (
	"bytes"
	"errors"
	"testing"
)

// TestEachRaw: the records of an uncompressed batch come out in order with
// their offsets, timestamps, keys, null values and encodings; a compressed
// or damaged batch is refused.
func TestEachRaw(t *testing.T) {
	b := NewBuilder(CodecNone)
	b.Append(Record{Timestamp: 10, Key: []byte("a"), Value: []byte("1")})
	b.Append(Record{Timestamp: 12, Key: nil, Value: []byte("2")})
	b.Append(Record{Timestamp: 11, Key: []byte("a"), Value: nil})
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	SetBaseOffset(batch, 100)
	h, err := ParseHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	var got []RawRecord
	if err := EachRaw(batch, &h, func(r RawRecord) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	want := []RawRecord{{Offset: 100, Timestamp: 10, Key: []byte("a")}, {Offset: 101, Timestamp: 12}, {Offset: 102, Timestamp: 11, Key: []byte("a"), NullValue: true}}
	if len(got) != len(want) {
		t.Fatalf("%d records", len(got))
	}
	var joined []byte
	for i, r := range got {
		w := want[i]
		if r.Offset != w.Offset || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) || r.NullValue != w.NullValue {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
		joined = append(joined, r.Bytes...)
	}
	if !bytes.Equal(joined, batch[HeaderSize:]) {
		t.Fatal("the encodings do not make up the records section")
	}
	bad := append([]byte(nil), batch...)
	bad[HeaderSize] = 0x7f // the first record's length runs past the batch
	if err := EachRaw(bad, &h, func(RawRecord) {}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged batch: %v", err)
	}
	h.Attributes |= int16(CodecSnappy)
	if err := EachRaw(batch, &h, func(RawRecord) {}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("compressed batch: %v", err)
	}
}
