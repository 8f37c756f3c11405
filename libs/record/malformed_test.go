package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// rec encodes one record body by hand (attributes 0, timestamp delta 0) from
// already-encoded fields, prefixed with its true length.
func rec(fields ...[]byte) []byte {
	body := []byte{0}
	for _, f := range fields {
		body = append(body, f...)
	}
	return append(appendVarint(nil, int32(len(body))), body...)
}

// pad follows a record with bytes outside it, so that a record cut short
// fails inside its own length, past the records-fit check.
func pad(r []byte) []byte { return append(r, 0, 0, 0, 0, 0, 0, 0) }

// vi encodes Kafka varints.
func vi(vs ...int32) []byte {
	var b []byte
	for _, v := range vs {
		b = appendVarint(b, v)
	}
	return b
}

func TestMalformedBatches(t *testing.T) {
	good := rec(vi(0), vi(0), vi(1), []byte("k"), vi(1), []byte("v"), vi(0)) // ts delta, offset delta, key, value, no headers
	valid := buildBatch(t, CodecNone, []Record{{Timestamp: 1, Key: []byte("k"), Value: []byte("v")}})
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(valid)) }

	cases := map[string][]byte{
		"bad crc":               mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
		"bad magic":             mutate(func(b []byte) []byte { b[offMagic] = 1; return b }),
		"length below header":   mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offBatchLength:], 10); return b }),
		"negative length":       mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offBatchLength:], 0xffffffff); return b }),
		"length over max":       mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offBatchLength:], MaxBatchSize+1); return b }),
		"unknown codec":         mutate(func(b []byte) []byte { b[offAttributes+1] |= 7; fixCRC(b); return b }),
		"negative record count": mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 0xffffffff); fixCRC(b); return b }),
		"count above delta":     mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 5); fixCRC(b); return b }),

		"count past the data":       rawBatch(CodecNone, 2, 1, good),
		"huge count":                rawBatch(CodecNone, 1<<30, 1<<30, good),
		"trailing bytes":            rawBatch(CodecNone, 1, 0, append(bytes.Clone(good), 0, 0)),
		"no records section":        rawBatch(CodecNone, 1, 0, nil),
		"length varint too long":    rawBatch(CodecNone, 1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0}),
		"length varint overflows":   rawBatch(CodecNone, 1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0}),
		"length varint cut":         rawBatch(CodecNone, 1, 0, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}),
		"length past end":           rawBatch(CodecNone, 1, 0, append(vi(100), good[1:]...)),
		"length zero":               rawBatch(CodecNone, 1, 0, []byte{0, 0, 0, 0, 0, 0, 0, 0}),
		"length negative":           rawBatch(CodecNone, 1, 0, append(vi(-3), good[1:]...)),
		"length longer than fields": rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-1), vi(-1), vi(0), []byte{0})),
		"timestamp varlong too long": rawBatch(CodecNone, 1, 0,
			rec([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, vi(0), vi(-1), vi(-1), vi(0))),
		"timestamp varlong cut":  rawBatch(CodecNone, 1, 0, pad(rec([]byte{0xff, 0xff}))),
		"offset delta negative":  rawBatch(CodecNone, 1, 0, pad(rec(vi(0), vi(-1), vi(-1), vi(-1), vi(0)))),
		"offset delta past last": rawBatch(CodecNone, 1, 0, rec(vi(0), vi(1), vi(-1), vi(-1), vi(0))),
		"offset deltas repeat": rawBatch(CodecNone, 2, 1, append(
			rec(vi(0), vi(0), vi(-1), vi(-1), vi(0)), rec(vi(0), vi(0), vi(-1), vi(-1), vi(0))...)),
		"offset delta cut":     rawBatch(CodecNone, 1, 0, pad(rec(vi(0), []byte{0x80}))),
		"key length -2":        rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-2), vi(-1), vi(0))),
		"key past end":         rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(50), []byte("k"), vi(-1), vi(0))),
		"key length cut":       rawBatch(CodecNone, 1, 0, pad(rec(vi(0), vi(0)))),
		"value past end":       rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-1), vi(9), []byte("v"), vi(0))),
		"value length -5":      rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-1), vi(-5), vi(0))),
		"header count cut":     rawBatch(CodecNone, 1, 0, pad(rec(vi(0), vi(0), vi(-1), vi(-1)))),
		"header count -1":      rawBatch(CodecNone, 1, 0, pad(rec(vi(0), vi(0), vi(-1), vi(-1), vi(-1)))),
		"header count too big": rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-1), vi(-1), vi(1000), vi(0, 0))),
		"header key null":      rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(-1, -1))),
		"header key past end":  rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(20, -1))),
		"header value past end": rawBatch(CodecNone, 1, 0,
			rec(vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(1), []byte("h"), vi(30), []byte("x"))),
		"header value length cut": rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(1), []byte("h"))),

		"gzip garbage":       rawBatch(CodecGzip, 1, 0, []byte("this is not gzip at all")),
		"gzip truncated":     truncatedCompressed(t, CodecGzip),
		"snappy garbage":     rawBatch(CodecSnappy, 1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3}),
		"snappy bad literal": rawBatch(CodecSnappy, 1, 0, []byte{10, 0x3c, 'a'}),
		"xerial chunk past end": rawBatch(CodecSnappy, 1, 0,
			append(compressSnappy(nil, nil), 0, 0, 1, 0, 1, 2)),
		"xerial stray bytes": rawBatch(CodecSnappy, 1, 0, append(compressSnappy(nil, good), 1, 2)),
		"xerial bad chunk":   rawBatch(CodecSnappy, 1, 0, append(compressSnappy(nil, nil), 0, 0, 0, 3, 10, 0x3c, 'a')),
		"lz4 garbage":        rawBatch(CodecLZ4, 1, 0, []byte("not an lz4 frame")),
		"lz4 truncated":      truncatedCompressed(t, CodecLZ4),
		"zstd garbage":       rawBatch(CodecZstd, 1, 0, []byte("not a zstd frame")),
		"zstd truncated":     truncatedCompressed(t, CodecZstd),
		"compressed empty":   rawBatch(CodecZstd, 1, 0, nil),
		"gzip of bad record": compressedRecords(t, CodecGzip, rec(vi(0), vi(0), vi(-2), vi(-1), vi(0))),
		"zstd of bad record": compressedRecords(t, CodecZstd, rec(vi(0), vi(0), vi(-1), vi(-1), vi(-1))),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			// A good batch first: its records are yielded, then the error.
			next := buildBatch(t, CodecNone, []Record{{Value: []byte("ok")}})
			data := append(next, bad...)
			got, it := collect(data, 0)
			if len(got) != 1 || string(got[0].Value) != "ok" {
				t.Fatalf("yielded %d records before the bad batch", len(got))
			}
			wantErr(t, it.Err(), ErrCorrupt)
			if it.Consumed() != len(next) || it.Partial() {
				t.Fatalf("consumed %d (want %d), partial %v", it.Consumed(), len(next), it.Partial())
			}
			if it.Next() {
				t.Fatal("Next true after an error")
			}
			t.Log(it.Err())
		})
	}
}

// truncatedCompressed is a batch whose compressed records section lost its
// last bytes (the CRC is fixed to match).
func truncatedCompressed(t *testing.T, codec Codec) []byte {
	b := buildBatch(t, codec, []Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("abcdefgh"), 500)}})
	b = b[:len(b)-6]
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
	fixCRC(b)
	return b
}

// compressedRecords compresses a hand-written records section of one record.
func compressedRecords(t *testing.T, codec Codec, records []byte) []byte {
	c, err := compress(codec, nil, records)
	if err != nil {
		t.Fatal(err)
	}
	return rawBatch(codec, 1, 0, c)
}

func TestValidateErrors(t *testing.T) {
	valid := buildBatch(t, CodecLZ4, []Record{{Value: []byte("v")}})
	for n := range len(valid) {
		_, err := Validate(valid[:n])
		wantErr(t, err, ErrShortBatch)
	}
	bad := bytes.Clone(valid)
	bad[HeaderSize] ^= 0x40
	_, err := Validate(bad)
	wantErr(t, err, ErrCorrupt)
}

func TestDecompressionBombs(t *testing.T) {
	zeros := make([]byte, 2<<20)
	records := rec(vi(0), vi(0), vi(-1), vi(int32(len(zeros))), zeros, vi(0))
	for _, codec := range allCodecs[1:] {
		t.Run(codec.String(), func(t *testing.T) {
			batch := compressedRecords(t, codec, records)
			t.Logf("%d compressed bytes", len(batch))
			it := NewIterator(batch)
			it.SetMaxDecompressedSize(1 << 20)
			if it.Next() {
				t.Fatal("yielded a record past the cap")
			}
			wantErr(t, it.Err(), ErrCorrupt)
			wantErr(t, it.Err(), ErrTooLarge)

			// Within the cap it decodes.
			it.Reset(batch)
			it.SetMaxDecompressedSize(4 << 20)
			if !it.Next() || len(it.Record().Value) != len(zeros) {
				t.Fatalf("within the cap: %v", it.Err())
			}
		})
	}
	// The default cap, with a zstd frame that declares no content size.
	big := make([]byte, DefaultMaxDecompressedSize+1)
	batch := compressedRecords(t, CodecZstd, big)
	_, it := collect(batch, 0)
	wantErr(t, it.Err(), ErrTooLarge)
}

func TestErrorsWrapWithContext(t *testing.T) {
	bad := rawBatch(CodecNone, 1, 0, rec(vi(0), vi(0), vi(-2), vi(-1), vi(0)))
	_, it := collect(bad, 0)
	if !errors.Is(it.Err(), ErrCorrupt) || !bytes.Contains([]byte(it.Err().Error()), []byte("key length -2")) {
		t.Fatalf("unhelpful error: %v", it.Err())
	}
}
