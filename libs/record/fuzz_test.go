package record

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds returns named inputs for the fuzzers: a valid batch of each
// codec, several batches back to back, a partial tail, a control batch and a
// few broken ones. TestWriteFuzzCorpus writes them to testdata/fuzz.
func fuzzSeeds(t testing.TB) map[string][]byte {
	recs := []Record{
		{Timestamp: 1_700_000_000_000, Key: []byte("k1"), Value: []byte("hello"), Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}},
		{Timestamp: 1_700_000_000_005, Key: nil, Value: []byte("hello hello hello hello")},
		{Timestamp: 1_699_999_999_990, Key: []byte{}, Value: nil},
	}
	seeds := map[string][]byte{}
	var all []byte
	for i, c := range allCodecs {
		b := buildBatch(t, c, recs)
		SetBaseOffset(b, int64(3*i))
		seeds["valid-"+c.String()] = b
		all = append(all, b...)
	}
	seeds["five-batches"] = all
	seeds["partial-tail"] = all[:len(all)-7]
	ctrl := buildBatch(t, CodecNone, []Record{{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 1}}})
	ctrl[offAttributes+1] |= attrControl | attrTransactional
	fixCRC(ctrl)
	seeds["control"] = ctrl
	lat := bytes.Clone(seeds["valid-none"])
	lat[offAttributes+1] |= attrTimestampType
	fixCRC(lat)
	seeds["log-append-time"] = lat
	badCRC := bytes.Clone(seeds["valid-lz4"])
	badCRC[len(badCRC)-1] ^= 0xff
	seeds["bad-crc"] = badCRC
	seeds["bad-key-length"] = rawBatch(CodecNone, 1, 0, []byte{12, 0, 0, 0, 0x20, 'k', 2, 'v', 0, 0, 0, 0, 0})
	seeds["header-only"] = seeds["valid-none"][:HeaderSize]
	return seeds
}

// checkIteration runs an Iterator over data and fails on any broken
// invariant: errors not wrapping the sentinels, bytes consumed past the data,
// records below the start offset, past the end offset (none when end < 0)
// or out of order within a batch.
func checkIteration(t *testing.T, data []byte, start, end int64) {
	it := NewIterator(data)
	it.SetStartOffset(start)
	if end >= 0 {
		it.SetEndOffset(end)
	}
	it.SetMaxDecompressedSize(1 << 20)
	var last Header
	prev := int64(-1)
	for it.Next() {
		r := it.Record()
		h := it.Batch()
		if h != last {
			last, prev = h, -1
		}
		if r.Offset < start || r.Offset <= prev || r.Offset > h.LastOffset() || (end >= 0 && r.Offset > end) {
			t.Fatalf("offset %d (start %d, end %d, previous %d, batch last %d)", r.Offset, start, end, prev, h.LastOffset())
		}
		prev = r.Offset
	}
	err := it.Err()
	switch {
	case it.Consumed() < 0 || it.Consumed() > len(data):
		t.Fatalf("consumed %d of %d", it.Consumed(), len(data))
	case err == nil && !it.Partial() && end < 0 && it.Consumed() != len(data):
		t.Fatalf("clean end after %d of %d bytes", it.Consumed(), len(data))
	case err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrShortBatch):
		t.Fatalf("error wraps no sentinel: %v", err)
	case err != nil && it.Partial():
		t.Fatalf("both an error and a partial tail: %v", err)
	}
}

func FuzzIterator(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkIteration(t, data, 0, -1)
		checkIteration(t, data, 4, -1)
		checkIteration(t, data, 1, 2)
	})
}

// FuzzRecords gets past the CRC, which stops almost every mutation in
// FuzzIterator: it wraps the fuzzed bytes as the records section of a batch
// with a correct CRC, so they reach the decompressors and the record decoder.
func FuzzRecords(f *testing.F) {
	for name, s := range fuzzSeeds(f) {
		if h, err := Validate(s); err == nil && len(s) == h.Size() {
			f.Add(s[HeaderSize:], uint8(h.Compression()), uint8(h.RecordCount))
		} else {
			f.Add([]byte(name), uint8(0), uint8(1))
		}
	}
	f.Fuzz(func(t *testing.T, section []byte, codec, count uint8) {
		n := int32(count % 16)
		batch := rawBatch(Codec(codec%8), n, max(n-1, 0), section)
		checkIteration(t, batch, 0, -1)
		checkIteration(t, batch, 1, -1)
		checkIteration(t, batch, 1, 1)
		checkRawAgrees(t, batch)
	})
}

// checkRawAgrees checks Section and EachRawSection against the Iterator on
// one batch: both accept it or both refuse it, and they see the same
// records.
func checkRawAgrees(t *testing.T, batch []byte) {
	t.Helper()
	h, err := Validate(batch)
	if err != nil {
		return
	}
	it := NewIterator(batch)
	var want []Record
	for it.Next() {
		want = append(want, *it.Record())
	}
	itOK := it.Err() == nil && it.Consumed() == len(batch)
	var got []RawRecord
	section, err := Section(nil, batch, &h, DefaultMaxDecompressedSize)
	if err == nil {
		err = EachRawSection(section, &h, func(r RawRecord) { got = append(got, r) })
	}
	if (err == nil) != itOK {
		t.Fatalf("EachRawSection error %v, Iterator error %v (consumed %d of %d)", err, it.Err(), it.Consumed(), len(batch))
	}
	if err != nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("EachRawSection saw %d records, the Iterator %d", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Offset != w.Offset || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) || r.NullValue != (w.Value == nil) ||
			!bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
			t.Fatalf("record %d: raw %+v, Iterator %+v", i, r, w)
		}
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Validate(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrShortBatch) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		size, perr := PeekSize(data)
		if perr != nil || size != h.Size() || size > len(data) || size < HeaderSize {
			t.Fatalf("valid batch: size %d, PeekSize %d %v, %d bytes", h.Size(), size, perr, len(data))
		}
		if h.Magic != Magic || crc32.Checksum(data[offAttributes:size], castagnoli) != h.CRC {
			t.Fatalf("Validate passed a bad header %+v", h)
		}
		// Stamping offset and epoch must keep a valid batch valid.
		b := bytes.Clone(data[:size])
		SetBaseOffset(b, h.BaseOffset+1)
		SetLeaderEpoch(b, h.LeaderEpoch+1)
		if _, err := Validate(b); err != nil {
			t.Fatalf("stamping broke the batch: %v", err)
		}
	})
}

// FuzzRoundTrip checks that whatever a producer appends comes back as it
// went in, for every codec.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("key"), []byte("value"), "header", []byte("hv"), int64(1_700_000_000_000), int64(-5), uint8(0), uint8(0))
	f.Add([]byte(nil), bytes.Repeat([]byte("z"), 3000), "", []byte(nil), int64(0), int64(1<<40), uint8(3), uint8(1))
	f.Fuzz(func(t *testing.T, key, value []byte, hkey string, hvalue []byte, ts, delta int64, codec, nulls uint8) {
		c := allCodecs[int(codec)%len(allCodecs)]
		r1 := Record{Timestamp: ts, Key: key, Value: value, Headers: []RecordHeader{{Key: hkey, Value: hvalue}}}
		r2 := Record{Timestamp: ts + delta, Key: value, Value: key}
		if nulls&1 != 0 {
			r1.Key, r2.Value = nil, nil
		} else if r1.Key == nil {
			r1.Key = []byte{}
		}
		b := NewBuilder(c)
		b.Append(r1)
		b.Append(r2)
		if b.Size() > 8<<20 {
			return
		}
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		got, it := collect(batch, 0)
		if it.Err() != nil || len(got) != 2 {
			t.Fatalf("%v: %d records", it.Err(), len(got))
		}
		for i, want := range []Record{r1, r2} {
			if want.Key != nil && len(want.Key) == 0 {
				want.Key = []byte{}
			}
			if d := sameRecord(got[i], want); d != "" {
				t.Fatalf("record %d: %s", i, d)
			}
		}
	})
}

// TestWriteFuzzCorpus regenerates the committed seed corpus under
// testdata/fuzz when SLUICE_WRITE_FUZZ_CORPUS=1; otherwise it checks that the
// corpus is there.
func TestWriteFuzzCorpus(t *testing.T) {
	for _, fuzzer := range []string{"FuzzIterator", "FuzzValidate"} {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		if os.Getenv("SLUICE_WRITE_FUZZ_CORPUS") != "1" {
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) < 5 {
				t.Fatalf("%s: %d seed files, %v (regenerate with SLUICE_WRITE_FUZZ_CORPUS=1)", dir, len(entries), err)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range fuzzSeeds(t) {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
