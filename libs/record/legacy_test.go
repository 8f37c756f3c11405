package record

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Message sets are built here with franz-go's kmsg (MessageV0, MessageV1),
// their sizes and CRCs filled in as a client does, and compressed with
// other libraries than the package's own code uses.

// sealMessage fills in the size and CRC of the message m, as AppendTo
// wrote it with zeros there.
func sealMessage(m []byte) []byte {
	binary.BigEndian.PutUint32(m[8:], uint32(len(m)-12))
	binary.BigEndian.PutUint32(m[12:], crc32.ChecksumIEEE(m[16:]))
	return m
}

func messageV0(offset int64, attrs int8, key, value []byte) []byte {
	m := kmsg.MessageV0{Offset: offset, Magic: 0, Attributes: attrs, Key: key, Value: value}
	return sealMessage(m.AppendTo(nil))
}

func messageV1(offset int64, attrs int8, ts int64, key, value []byte) []byte {
	m := kmsg.MessageV1{Offset: offset, Magic: 1, Attributes: attrs, Timestamp: ts, Key: key, Value: value}
	return sealMessage(m.AppendTo(nil))
}

// legacyCompress compresses an inner message set as Kafka 0.10 clients do.
func legacyCompress(t *testing.T, c Codec, set []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case CodecGzip:
		w := stdgzip.NewWriter(&buf)
		_, _ = w.Write(set)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CodecSnappy:
		return snappy.Encode(nil, set)
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		_, _ = w.Write(set)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("codec %v", c)
	}
	return buf.Bytes()
}

// readBatch returns the records of one RecordBatch v2 and its header.
func readBatch(t *testing.T, batch []byte) ([]Record, Header) {
	t.Helper()
	h, err := Validate(batch)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	it := NewIterator(batch)
	for it.Next() {
		r := *it.Record()
		r.Key, r.Value = cloneNil(r.Key), cloneNil(r.Value)
		out = append(out, r)
	}
	if it.Err() != nil || it.Consumed() != len(batch) {
		t.Fatalf("%v, consumed %d of %d", it.Err(), it.Consumed(), len(batch))
	}
	return out, h
}

func TestFromMessageSet(t *testing.T) {
	const now = 1_700_000_009_999
	inner := func(v1 bool) ([]byte, []Record) {
		var set []byte
		want := []Record{
			{Timestamp: 1_700_000_000_001, Key: []byte("k1"), Value: []byte("v1")},
			{Timestamp: 1_700_000_000_002, Key: nil, Value: []byte("no key")},
			{Timestamp: -1, Key: []byte{}, Value: nil},
		}
		for i, r := range want {
			if v1 {
				set = append(set, messageV1(int64(i), 0, r.Timestamp, r.Key, r.Value)...)
			} else {
				set = append(set, messageV0(int64(i), 0, r.Key, r.Value)...)
				want[i].Timestamp = -1
			}
			if want[i].Timestamp < 0 {
				want[i].Timestamp = now
			}
			want[i].Offset = int64(i)
		}
		return set, want
	}
	check := func(name string, set []byte, want []Record, codec Codec) {
		t.Helper()
		batch, err := FromMessageSet(set, now, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, h := readBatch(t, batch)
		if h.Compression() != codec || h.ProducerID != NoProducerID || h.IsTransactional() || len(got) != len(want) {
			t.Fatalf("%s: codec %v, producer %d, %d records; want %v, %d", name, h.Compression(), h.ProducerID, len(got), codec, len(want))
		}
		for i := range got {
			if d := sameRecord(got[i], want[i]); d != "" || got[i].Offset != want[i].Offset {
				t.Fatalf("%s: record %d: %s (offset %d)", name, i, d, got[i].Offset)
			}
		}
	}
	for _, v1 := range []bool{false, true} {
		set, want := inner(v1)
		name := map[bool]string{false: "v0", true: "v1"}[v1]
		check(name, set, want, CodecNone)
		for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4} {
			if c == CodecLZ4 && !v1 {
				continue
			}
			var wrapper []byte
			if v1 {
				wrapper = messageV1(2, int8(c), 1_700_000_000_002, nil, legacyCompress(t, c, set))
			} else {
				wrapper = messageV0(2, int8(c), nil, legacyCompress(t, c, set))
			}
			check(name+" "+c.String(), wrapper, want, c)
			// Two wrappers and a plain message after them: one batch, in
			// order, compressed with the first wrapper's codec.
			plain := messageV1(9, 0, 1_700_000_000_003, []byte("k"), []byte("plain"))
			if !v1 {
				plain = messageV0(9, 0, []byte("k"), []byte("plain"))
			}
			all := append(append(append([]byte(nil), wrapper...), wrapper...), plain...)
			both := append(append([]Record(nil), want...), want...)
			ts := int64(1_700_000_000_003)
			if !v1 {
				ts = now
			}
			both = append(both, Record{Timestamp: ts, Key: []byte("k"), Value: []byte("plain")})
			for i := range both {
				both[i].Offset = int64(i)
			}
			check(name+" "+c.String()+" twice and a plain one", all, both, c)
		}
	}
}

func TestFromMessageSetRefuses(t *testing.T) {
	good := messageV1(0, 0, 1, []byte("k"), []byte("v"))
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	trailing := messageV1(0, 0, 1, []byte("k"), []byte("v"))
	trailing = sealMessage(append(trailing, 0)) // a byte after the value
	magic2 := bytes.Clone(good)
	magic2[16] = 2
	sealMessage(magic2)
	lz4v0 := messageV0(0, int8(CodecLZ4), nil, legacyCompress(t, CodecLZ4, messageV0(0, 0, nil, []byte("v"))))
	zstd := messageV1(0, int8(CodecZstd), 1, nil, []byte("whatever"))
	inner := messageV1(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, good))
	nested := messageV1(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, inner))
	bomb := messageV1(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip,
		messageV1(0, 0, 1, nil, make([]byte, 2<<20))))
	badKey := bytes.Clone(good)
	binary.BigEndian.PutUint32(badKey[12+4+1+1+8:], 99) // the key's length
	sealMessage(badKey)
	for name, set := range map[string][]byte{
		"empty":          nil,
		"cut size":       good[:10],
		"cut message":    good[:len(good)-1],
		"bad crc":        badCRC,
		"trailing bytes": trailing,
		"magic 2":        magic2,
		"lz4 in v0":      lz4v0,
		"zstd":           zstd,
		"nested":         nested,
		"over the limit": bomb,
		"key too long":   badKey,
		"good then cut":  append(bytes.Clone(good), good[:20]...),
	} {
		_, err := FromMessageSet(set, 0, 1<<20)
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzFromMessageSet: any input converts to a batch that reads back whole,
// or is refused with ErrCorrupt; nothing panics.
func FuzzFromMessageSet(f *testing.F) {
	f.Add(messageV1(0, 0, 1, []byte("k"), []byte("v")))
	f.Add(messageV0(0, 0, nil, []byte("v")))
	f.Add(messageV1(0, int8(CodecSnappy), 1, nil, snappy.Encode(nil, messageV1(0, 0, 1, nil, []byte("inner")))))
	f.Fuzz(func(t *testing.T, set []byte) {
		batch, err := FromMessageSet(set, 1, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error wraps no ErrCorrupt: %v", err)
			}
			return
		}
		readBatch(t, batch)
	})
}
