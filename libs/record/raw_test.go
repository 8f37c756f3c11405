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

// TestSectionRoundTrip: a compressed batch's section decompresses to the
// records an uncompressed batch of the same records holds, and a batch
// rebuilt from a subset of them (compressed again) decodes to that subset
// with their offsets and timestamps.
func TestSectionRoundTrip(t *testing.T) {
	recs := []Record{{Timestamp: 10, Key: []byte("a"), Value: []byte("1")}, {Timestamp: 12, Key: []byte("b"), Value: []byte("2")},
		{Timestamp: 11, Key: []byte("a"), Value: nil}, {Timestamp: 15, Key: []byte("c"), Value: []byte("3")}}
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		b := NewBuilder(codec)
		for _, r := range recs {
			b.Append(r)
		}
		built, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		batch := bytes.Clone(built)
		SetBaseOffset(batch, 50)
		h, err := ParseHeader(batch)
		if err != nil {
			t.Fatal(err)
		}
		section, err := Section(nil, batch, &h, DefaultMaxDecompressedSize)
		if err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		var keep []byte
		var offsets []int64
		if err := EachRawSection(section, &h, func(r RawRecord) {
			if r.Offset%2 == 1 { // offsets 51 and 53
				keep = append(keep, r.Bytes...)
				offsets = append(offsets, r.Offset)
			}
		}); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		out := append([]byte(nil), batch[:HeaderSize]...)
		if out, err = CompressSection(codec, out, keep); err != nil {
			t.Fatal(err)
		}
		SealBatch(out, 2)
		it := NewIterator(out)
		var got []Record
		for it.Next() {
			got = append(got, *it.Record())
		}
		if it.Err() != nil || len(got) != 2 || got[0].Offset != 51 || got[1].Offset != 53 ||
			string(got[0].Key) != "b" || got[0].Timestamp != 12 || string(got[1].Value) != "3" || got[1].Timestamp != 15 {
			t.Fatalf("%v: rebuilt batch reads %+v, %v (kept offsets %v)", codec, got, it.Err(), offsets)
		}
		if _, err := Validate(out); err != nil {
			t.Fatalf("%v: rebuilt batch: %v", codec, err)
		}
		// Emptied, as compaction leaves a producer's last batch.
		empty := append([]byte(nil), batch[:HeaderSize]...)
		SealBatch(empty, 0)
		eh, err := Validate(empty)
		if err != nil {
			t.Fatal(err)
		}
		if sec, err := Section(nil, empty, &eh, 1<<20); err != nil || len(sec) != 0 || eh.Compression() != CodecNone || eh.RecordCount != 0 {
			t.Fatalf("%v: empty batch's section %q (%v), header %+v", codec, sec, err, eh)
		}
		if eh.ProducerID != h.ProducerID || eh.LastOffsetDelta != h.LastOffsetDelta || eh.MaxTimestamp != h.MaxTimestamp {
			t.Fatalf("%v: emptied header %+v lost fields of %+v", codec, eh, h)
		}
	}
}
