package record

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func roundTripCases() map[string][]Record {
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]Record, 300)
	for i := range big {
		big[i] = Record{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte{byte(i)}, Value: textValue(rng, 700)}
	}
	return map[string][]Record{
		"one":                 {{Timestamp: 1_700_000_000_000, Key: []byte("k"), Value: []byte("v")}},
		"null key":            {{Timestamp: 5, Key: nil, Value: []byte("v")}},
		"null value":          {{Timestamp: 5, Key: []byte("tombstone"), Value: nil}},
		"null both":           {{Timestamp: 5}},
		"empty key and value": {{Timestamp: 5, Key: []byte{}, Value: []byte{}}},
		"headers": {{Timestamp: 7, Key: []byte("k"), Value: []byte("v"), Headers: []RecordHeader{
			{Key: "trace", Value: []byte("abc")}, {Key: "", Value: []byte{}}, {Key: "null", Value: nil}, {Key: "trace", Value: []byte("dup")},
		}}},
		"timestamps out of order": {
			{Timestamp: 1000, Value: []byte("a")}, {Timestamp: 10, Value: []byte("b")},
			{Timestamp: math.MaxInt32 * 4, Value: []byte("c")}, {Timestamp: -1, Value: []byte("d")},
		},
		// 210 KiB: several xerial chunks and several LZ4 blocks.
		"many large": big,
	}
}

func TestRoundTrip(t *testing.T) {
	for name, recs := range roundTripCases() {
		for _, codec := range allCodecs {
			t.Run(name+"/"+codec.String(), func(t *testing.T) {
				batch := buildBatch(t, codec, recs)
				h, err := Validate(batch)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if h.Size() != len(batch) || h.RecordCount != int32(len(recs)) || h.LastOffsetDelta != int32(len(recs)-1) ||
					h.Compression() != codec || h.BaseOffset != 0 || h.LeaderEpoch != -1 || h.ProducerID != -1 ||
					h.ProducerEpoch != -1 || h.BaseSequence != -1 || h.BaseTimestamp != recs[0].Timestamp {
					t.Fatalf("header %+v", h)
				}
				maxTs := recs[0].Timestamp
				for _, r := range recs {
					maxTs = max(maxTs, r.Timestamp)
				}
				if h.MaxTimestamp != maxTs {
					t.Fatalf("max timestamp %d, want %d", h.MaxTimestamp, maxTs)
				}
				SetBaseOffset(batch, 1000)
				got, it := collect(batch, 0)
				if it.Err() != nil || it.Partial() || it.Consumed() != len(batch) || it.NextOffset() != 1000+int64(len(recs)) {
					t.Fatalf("err %v partial %v consumed %d/%d next %d", it.Err(), it.Partial(), it.Consumed(), len(batch), it.NextOffset())
				}
				if len(got) != len(recs) {
					t.Fatalf("%d records, want %d", len(got), len(recs))
				}
				for i := range got {
					if got[i].Offset != 1000+int64(i) {
						t.Fatalf("record %d offset %d", i, got[i].Offset)
					}
					if d := sameRecord(got[i], recs[i]); d != "" {
						t.Fatalf("record %d: %s", i, d)
					}
				}
			})
		}
	}
}

func TestBuilderSizeAndReuse(t *testing.T) {
	b := NewBuilder(CodecNone)
	if _, err := b.Build(); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("empty Build: %v", err)
	}
	if b.Size() != HeaderSize {
		t.Fatalf("empty size %d", b.Size())
	}
	recs := roundTripCases()["headers"]
	recs = append(recs, Record{Timestamp: 3, Key: []byte("x"), Value: bytes.Repeat([]byte("y"), 300)})
	for _, r := range recs {
		want := b.SizeWith(r)
		b.Append(r)
		if b.Size() != want {
			t.Fatalf("Size %d after append, SizeWith said %d", b.Size(), want)
		}
	}
	first, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != b.Size() {
		t.Fatalf("uncompressed batch %d bytes, Size %d", len(first), b.Size())
	}
	again, _ := b.Build()
	if !bytes.Equal(first, again) {
		t.Fatal("second Build differs")
	}
	keep := bytes.Clone(first)

	// Reset keeps settings and gives the same bytes for the same records.
	b.SetProducer(77, 3, 1000)
	b.SetLeaderEpoch(9)
	b.Reset()
	if b.Count() != 0 || b.Size() != HeaderSize {
		t.Fatalf("after Reset: count %d size %d", b.Count(), b.Size())
	}
	for _, r := range recs {
		b.Append(r)
	}
	out, _ := b.Build()
	h, err := Validate(out)
	if err != nil {
		t.Fatal(err)
	}
	if h.ProducerID != 77 || h.ProducerEpoch != 3 || h.BaseSequence != 1000 || h.LeaderEpoch != 9 {
		t.Fatalf("producer fields not kept: %+v", h)
	}
	if !bytes.Equal(out[offAttributes+2:offProducerID], keep[offAttributes+2:offProducerID]) ||
		!bytes.Equal(out[HeaderSize:], keep[HeaderSize:]) {
		t.Fatal("same records built differently after Reset")
	}

	// Appending after Build extends the batch.
	b.Append(Record{Timestamp: 99, Value: []byte("late")})
	out, _ = b.Build()
	got, it := collect(out, 0)
	if it.Err() != nil || len(got) != len(recs)+1 || string(got[len(recs)].Value) != "late" {
		t.Fatalf("append after build: %d records, %v", len(got), it.Err())
	}

	b.SetCodec(Codec(6))
	if _, err := b.Build(); err == nil {
		t.Fatal("Build with an unknown codec succeeded")
	}
}

func TestIterateManyBatchesAndStartOffset(t *testing.T) {
	var data []byte
	var want []Record
	base := int64(0)
	for i, codec := range allCodecs {
		recs := make([]Record, 3+i)
		for j := range recs {
			recs[j] = Record{Timestamp: int64(100*i + j), Key: []byte{byte(i), byte(j)}, Value: []byte("value")}
		}
		batch := buildBatch(t, codec, recs)
		SetBaseOffset(batch, base)
		for j := range recs {
			recs[j].Offset = base + int64(j)
		}
		base += int64(len(recs))
		want = append(want, recs...)
		data = append(data, batch...)
	}
	for start := int64(0); start <= base+1; start++ {
		got, it := collect(data, start)
		if it.Err() != nil || it.Consumed() != len(data) {
			t.Fatalf("start %d: %v, consumed %d", start, it.Err(), it.Consumed())
		}
		var exp []Record
		for _, r := range want {
			if r.Offset >= start {
				exp = append(exp, r)
			}
		}
		if len(got) != len(exp) {
			t.Fatalf("start %d: %d records, want %d", start, len(got), len(exp))
		}
		for i := range got {
			if got[i].Offset != exp[i].Offset || sameRecord(got[i], exp[i]) != "" {
				t.Fatalf("start %d record %d: %+v, want %+v", start, i, got[i], exp[i])
			}
		}
		if it.NextOffset() != max(base, start) {
			t.Fatalf("start %d: next offset %d, want %d", start, it.NextOffset(), max(base, start))
		}
	}

	// A batch entirely below the start offset is skipped without its CRC.
	first := buildBatch(t, CodecNone, []Record{{Value: []byte("a")}, {Value: []byte("b")}})
	first[len(first)-1] ^= 0xff
	second := buildBatch(t, CodecNone, []Record{{Value: []byte("c")}})
	SetBaseOffset(second, 2)
	got, it := collect(append(first, second...), 2)
	if it.Err() != nil || len(got) != 1 || string(got[0].Value) != "c" {
		t.Fatalf("skip below start: %v %d", it.Err(), len(got))
	}
}

// TestEndOffset: with an end, records above it are not yielded and the
// batches that start above it are neither read nor consumed; every
// (start, end) pair over batches of every codec yields exactly the records
// between them.
func TestEndOffset(t *testing.T) {
	var data []byte
	var starts []int // byte position of each batch
	var bases []int64
	base := int64(0)
	for i, codec := range allCodecs {
		recs := make([]Record, 2+i)
		for j := range recs {
			recs[j] = Record{Value: []byte{byte(i), byte(j)}}
		}
		batch := buildBatch(t, codec, recs)
		SetBaseOffset(batch, base)
		starts, bases = append(starts, len(data)), append(bases, base)
		base += int64(len(recs))
		data = append(data, batch...)
	}
	for start := int64(0); start <= base; start++ {
		for end := start - 1; end <= base; end++ {
			it := NewIterator(data)
			it.SetStartOffset(start)
			it.SetEndOffset(end)
			var got []int64
			for it.Next() {
				got = append(got, it.Record().Offset)
			}
			var want []int64
			for o := start; o <= end && o < base; o++ {
				want = append(want, o)
			}
			if it.Err() != nil || !slices.Equal(got, want) {
				t.Fatalf("start %d end %d: %v %v, want %v", start, end, it.Err(), got, want)
			}
			consumed := len(data) // up to the first batch past the end
			for i, b := range bases {
				if b > end {
					consumed = starts[i]
					break
				}
			}
			if it.Consumed() != consumed {
				t.Fatalf("start %d end %d: consumed %d bytes, want %d", start, end, it.Consumed(), consumed)
			}
		}
	}
	// A batch past the end is not read: a corrupt one is no error.
	first := buildBatch(t, CodecNone, []Record{{Value: []byte("a")}})
	second := buildBatch(t, CodecNone, []Record{{Value: []byte("b")}})
	SetBaseOffset(second, 1)
	second[len(second)-1] ^= 0xff
	it := NewIterator(append(first, second...))
	it.SetEndOffset(0)
	n := 0
	for it.Next() {
		n++
	}
	if it.Err() != nil || n != 1 {
		t.Fatalf("corrupt batch past the end: %v, %d records", it.Err(), n)
	}

	// Inside a batch whose CRC holds, a malformed record outside the range
	// is framed only; in the range, or without an end, it is an error.
	bad := []byte{16, 0, 0, 0, 10, 'k', 2, 'v', 0} // offset delta 0, a key of 5 bytes in 1
	good := []byte{16, 0, 0, 2, 2, 'k', 2, 'v', 0} // offset delta 1
	batch := rawBatch(CodecNone, 2, 1, append(bad, good...))
	for _, tc := range []struct {
		start, end int64 // end < 0: none
		ok         bool
	}{{1, 1, true}, {0, 1, false}, {1, -1, false}} {
		it := NewIterator(batch)
		it.SetStartOffset(tc.start)
		if tc.end >= 0 {
			it.SetEndOffset(tc.end)
		}
		var got []string
		for it.Next() {
			got = append(got, string(it.Record().Value))
		}
		if ok := it.Err() == nil; ok != tc.ok || (ok && !slices.Equal(got, []string{"v"})) {
			t.Errorf("start %d end %d: %q, %v; want ok %v", tc.start, tc.end, got, it.Err(), tc.ok)
		}
	}
}

func TestPartialTrailingBatch(t *testing.T) {
	a := buildBatch(t, CodecNone, []Record{{Value: []byte("a1")}, {Value: []byte("a2")}})
	b := buildBatch(t, CodecZstd, []Record{{Value: []byte("b1")}})
	SetBaseOffset(b, 2)
	data := append(append([]byte{}, a...), b...)
	for cut := 0; cut <= len(data); cut++ {
		got, it := collect(data[:cut], 0)
		if it.Err() != nil {
			t.Fatalf("cut %d: %v", cut, it.Err())
		}
		wantConsumed, wantRecs := 0, 0
		switch {
		case cut == len(data):
			wantConsumed, wantRecs = len(data), 3
		case cut >= len(a):
			wantConsumed, wantRecs = len(a), 2
		}
		wantPartial := cut != wantConsumed
		if it.Consumed() != wantConsumed || len(got) != wantRecs || it.Partial() != wantPartial {
			t.Fatalf("cut %d: consumed %d records %d partial %v; want %d %d %v",
				cut, it.Consumed(), len(got), it.Partial(), wantConsumed, wantRecs, wantPartial)
		}
		if _, err := Validate(data[:min(cut, len(a))]); cut < len(a) && !errors.Is(err, ErrShortBatch) {
			t.Fatalf("cut %d: Validate: %v", cut, err)
		}
	}
}

func TestLogAppendTime(t *testing.T) {
	batch := buildBatch(t, CodecNone, []Record{{Timestamp: 1, Value: []byte("a")}, {Timestamp: 2, Value: []byte("b")}})
	batch[offAttributes+1] |= attrTimestampType
	batch[offMaxTimestamp+7] = 0x99 // the broker's append time
	fixCRC(batch)
	got, it := collect(batch, 0)
	if it.Err() != nil || len(got) != 2 {
		t.Fatal(it.Err())
	}
	for _, r := range got {
		if r.Timestamp != 0x99 {
			t.Fatalf("timestamp %d, want the batch's max timestamp", r.Timestamp)
		}
	}
}

func TestControlBatchSkipped(t *testing.T) {
	ctrl := buildBatch(t, CodecNone, []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}})
	ctrl[offAttributes+1] |= attrControl | attrTransactional
	fixCRC(ctrl)
	data := buildBatch(t, CodecNone, []Record{{Value: []byte("x")}})
	SetBaseOffset(data, 1)
	got, it := collect(append(ctrl, data...), 0)
	if it.Err() != nil || len(got) != 1 || got[0].Offset != 1 || it.NextOffset() != 2 {
		t.Fatalf("%v %d records %d", it.Err(), len(got), it.NextOffset())
	}
}

func TestRawSnappyAccepted(t *testing.T) {
	// librdkafka and franz-go write one raw snappy block, no xerial frame.
	recs := []Record{{Timestamp: 1, Key: []byte("k"), Value: bytes.Repeat([]byte("snappy "), 100)}}
	plain := buildBatch(t, CodecNone, recs)
	raw := appendSnappyBlock(nil, plain[HeaderSize:])
	batch := rawBatch(CodecSnappy, 1, 0, raw)
	copy(batch[offBaseTimestamp:offProducerID], plain[offBaseTimestamp:offProducerID])
	fixCRC(batch)
	got, it := collect(batch, 0)
	if it.Err() != nil || len(got) != 1 || sameRecord(got[0], recs[0]) != "" {
		t.Fatalf("raw snappy: %v %d", it.Err(), len(got))
	}
}

func TestHeaderAccessors(t *testing.T) {
	for _, s := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		c, err := ParseCodec(s)
		if err != nil || c.String() != s {
			t.Fatalf("ParseCodec(%q) = %v, %v", s, c, err)
		}
	}
	if _, err := ParseCodec("brotli"); err == nil {
		t.Fatal("ParseCodec accepted brotli")
	}
	batch := buildBatch(t, CodecNone, []Record{{Value: []byte("a")}, {Value: []byte("b")}})
	SetBaseOffset(batch, 10)
	SetLeaderEpoch(batch, 4)
	h, err := Validate(batch) // stamping leaves the CRC valid
	if err != nil || h.BaseOffset != 10 || h.LeaderEpoch != 4 || h.LastOffset() != 11 || h.IsControl() || h.IsTransactional() || h.LogAppendTime() {
		t.Fatalf("%+v %v", h, err)
	}
	if n, err := PeekSize(batch); err != nil || n != len(batch) {
		t.Fatalf("PeekSize %d %v", n, err)
	}
}

func TestEmptyBatchFromCompaction(t *testing.T) {
	empty := rawBatch(CodecZstd, 0, 5, nil) // every record compacted away
	SetBaseOffset(empty, 10)
	next := buildBatch(t, CodecNone, []Record{{Value: []byte("x")}})
	SetBaseOffset(next, 16)
	got, it := collect(append(empty, next...), 0)
	if it.Err() != nil || len(got) != 1 || got[0].Offset != 16 || it.NextOffset() != 17 {
		t.Fatalf("%v, %d records, next %d", it.Err(), len(got), it.NextOffset())
	}
	_, it = collect(empty, 0)
	if it.Err() != nil || it.NextOffset() != 16 || it.Consumed() != len(empty) {
		t.Fatalf("%v next %d", it.Err(), it.NextOffset())
	}
	// Records present although the count says none: corrupt.
	_, it = collect(rawBatch(CodecNone, 0, 0, []byte{2, 0, 0}), 0)
	wantErr(t, it.Err(), ErrCorrupt)
}

func TestCount(t *testing.T) {
	values := func(n int) []Record { return make([]Record, n) }
	b := append(buildBatch(t, CodecNone, values(3)), buildBatch(t, CodecNone, values(7))...)
	if n, offsets := Count(b); n != 10 || offsets != 10 {
		t.Errorf("Count = %d records, %d offsets; want 10, 10", n, offsets)
	}
	if n, offsets := Count(b[:20]); n != 0 || offsets != 0 {
		t.Errorf("Count of a cut header = %d, %d; want 0, 0", n, offsets)
	}
}

// TestSetChecked: batches the caller checked are not checked again, so a
// bad CRC is then not seen; otherwise it is.
func TestSetChecked(t *testing.T) {
	batch := buildBatch(t, CodecNone, []Record{{Value: []byte("a")}})
	batch[len(batch)-2] ^= 0xff // the value (the header count follows): the records still decode
	for _, checked := range []bool{false, true} {
		it := NewIterator(batch)
		it.SetChecked(checked)
		n := 0
		for it.Next() {
			n++
		}
		if bad := errors.Is(it.Err(), ErrCorrupt); bad == checked || (checked && n != 1) {
			t.Errorf("checked %v: %d records, %v", checked, n, it.Err())
		}
	}
}
