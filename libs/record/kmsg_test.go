package record

// Compatibility with an independent implementation of the format: franz-go's
// kmsg. Compressed sections are decoded and encoded here with other
// libraries or other entry points than the package's own code uses (the
// standard library's gzip, strict snappy, pierrec/lz4 defaults, streaming
// zstd), the way other Kafka clients write them.

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func compatRecords() []Record {
	return []Record{
		{Timestamp: 1_700_000_000_123, Key: []byte("user-1"), Value: []byte(`{"n":1}`)},
		{Timestamp: 1_700_000_000_100, Key: nil, Value: []byte("no key")},
		{Timestamp: 1_700_000_000_500, Key: []byte("user-2"), Value: nil},
		{Timestamp: 1_700_000_000_200, Key: []byte{}, Value: []byte{}, Headers: []RecordHeader{
			{Key: "content-type", Value: []byte("json")}, {Key: "empty", Value: []byte{}}, {Key: "null", Value: nil},
		}},
		{Timestamp: 1_700_000_000_300, Key: []byte("big"), Value: bytes.Repeat([]byte("0123456789abcdef"), 9000)},
	}
}

// independentDecompress decodes a records section without this package's
// decompress.
func independentDecompress(t *testing.T, c Codec, src []byte) []byte {
	t.Helper()
	var out []byte
	var err error
	switch c {
	case CodecNone:
		return src
	case CodecGzip:
		var r *stdgzip.Reader
		if r, err = stdgzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = io.ReadAll(r)
		}
	case CodecSnappy:
		if !bytes.HasPrefix(src, []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")) {
			t.Fatalf("snappy section lacks the xerial header: % x", src[:min(16, len(src))])
		}
		for rest := src[16:]; len(rest) > 0; {
			n := binary.BigEndian.Uint32(rest)
			var chunk []byte
			if chunk, err = snappy.DecodeStrict(nil, rest[4:4+n]); err != nil {
				break
			}
			out = append(out, chunk...)
			rest = rest[4+n:]
		}
	case CodecLZ4:
		out, err = io.ReadAll(lz4.NewReader(bytes.NewReader(src)))
	case CodecZstd:
		var d *zstd.Decoder
		if d, err = zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1)); err == nil {
			out, err = io.ReadAll(d)
			d.Close()
		}
	}
	if err != nil {
		t.Fatalf("independent %v decompression: %v", c, err)
	}
	return out
}

// independentCompress encodes a records section the way other clients do:
// raw snappy (librdkafka, franz-go), LZ4 frames with the library's defaults
// (4 MiB blocks, content checksum), streaming zstd without a content size.
func independentCompress(t *testing.T, c Codec, src []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch c {
	case CodecNone:
		return src
	case CodecSnappy:
		return snappy.Encode(nil, src)
	case CodecGzip:
		w = stdgzip.NewWriter(&buf)
	case CodecLZ4:
		w = lz4.NewWriter(&buf)
	case CodecZstd:
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	}
	if _, err := w.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func toKmsg(r Record, i int, base int64) kmsg.Record {
	k := kmsg.Record{TimestampDelta64: r.Timestamp - base, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		k.Headers = append(k.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	k.Length = int32(len(k.AppendTo(nil)) - 1) // the length varint of 0 takes 1 byte
	return k
}

// kmsgBatch encodes recs with kmsg into a whole batch with a correct CRC.
func kmsgBatch(t *testing.T, c Codec, recs []Record) ([]byte, kmsg.RecordBatch) {
	var section []byte
	maxTs := recs[0].Timestamp
	for i, r := range recs {
		k := toKmsg(r, i, recs[0].Timestamp)
		section = k.AppendTo(section)
		maxTs = max(maxTs, r.Timestamp)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(c),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: recs[0].Timestamp, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)),
		Records: independentCompress(t, c, section),
	}
	b := kb.AppendTo(nil)
	kb.Length = int32(len(b) - LogOverhead)
	kb.CRC = int32(crc32.Checksum(b[offAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return kb.AppendTo(nil), kb
}

func TestCompatBuilderToKmsg(t *testing.T) {
	recs := compatRecords()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			batch := buildBatch(t, c, recs)
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(batch); err != nil {
				t.Fatalf("kmsg ReadFrom: %v", err)
			}
			wantCRC := crc32.Checksum(batch[offAttributes:], crc32.MakeTable(crc32.Castagnoli))
			if uint32(kb.CRC) != wantCRC || int(kb.Length) != len(batch)-LogOverhead || kb.Magic != 2 ||
				kb.Attributes != int16(c) || kb.LastOffsetDelta != int32(len(recs)-1) || kb.NumRecords != int32(len(recs)) ||
				kb.FirstTimestamp != recs[0].Timestamp || kb.MaxTimestamp != 1_700_000_000_500 ||
				kb.ProducerID != -1 || kb.ProducerEpoch != -1 || kb.FirstSequence != -1 || kb.PartitionLeaderEpoch != -1 {
				t.Fatalf("kmsg sees header %+v (crc want %08x)", kb, wantCRC)
			}
			krs := readKmsgRecords(t, independentDecompress(t, c, kb.Records), len(recs))
			for i, want := range recs {
				kr := krs[i]
				got := Record{Timestamp: kb.FirstTimestamp + kr.TimestampDelta64, Key: kr.Key, Value: kr.Value}
				for _, h := range kr.Headers {
					got.Headers = append(got.Headers, RecordHeader{Key: h.Key, Value: h.Value})
				}
				if kr.OffsetDelta != int32(i) || kr.Attributes != 0 {
					t.Fatalf("record %d: offset delta %d attributes %d", i, kr.OffsetDelta, kr.Attributes)
				}
				if d := sameRecord(got, want); d != "" {
					t.Fatalf("record %d: %s", i, d)
				}
			}
		})
	}
}

func TestCompatKmsgToIterator(t *testing.T) {
	recs := compatRecords()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			batch, kb := kmsgBatch(t, c, recs)
			h, err := Validate(batch)
			if err != nil {
				t.Fatalf("Validate of kmsg's batch: %v", err)
			}
			if h.CRC != uint32(kb.CRC) {
				t.Fatalf("CRC %08x, kmsg %08x", h.CRC, uint32(kb.CRC))
			}
			got, it := collect(batch, 0)
			if it.Err() != nil || len(got) != len(recs) {
				t.Fatalf("%d records, %v", len(got), it.Err())
			}
			for i := range recs {
				if d := sameRecord(got[i], recs[i]); d != "" || got[i].Offset != int64(i) {
					t.Fatalf("record %d (offset %d): %s", i, got[i].Offset, d)
				}
			}
			if c == CodecNone {
				// Same records, same fields: byte for byte the same batch.
				if ours := buildBatch(t, CodecNone, recs); !bytes.Equal(ours, batch) {
					t.Fatalf("uncompressed batches differ:\nours % x\nkmsg % x", ours[:HeaderSize], batch[:HeaderSize])
				}
			}
		})
	}
}

// TestCompatProducerFields checks the idempotent producer's fields land where
// kmsg expects them.
func TestCompatProducerFields(t *testing.T) {
	b := NewBuilder(CodecNone)
	b.SetProducer(1234567890123, 7, 42)
	b.SetLeaderEpoch(3)
	b.Append(Record{Timestamp: 9, Value: []byte("x")})
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(out); err != nil {
		t.Fatal(err)
	}
	if kb.ProducerID != 1234567890123 || kb.ProducerEpoch != 7 || kb.FirstSequence != 42 || kb.PartitionLeaderEpoch != 3 {
		t.Fatalf("%+v", kb)
	}
}

// TestLZ4FrameAsKafkaWritesIt pins the frame descriptor Kafka's
// KafkaLZ4BlockOutputStream writes and its reader requires: version 01,
// independent blocks, no block or content checksum, no content size, 64 KiB
// blocks.
func TestLZ4FrameAsKafkaWritesIt(t *testing.T) {
	out, err := compress(CodecLZ4, nil, bytes.Repeat([]byte("kafka"), 50000))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[:4], []byte{0x04, 0x22, 0x4d, 0x18}) || out[4] != 0x60 || out[5] != 0x40 {
		t.Fatalf("frame starts % x, want 04 22 4d 18 60 40", out[:6])
	}
	if !bytes.Equal(out[len(out)-4:], []byte{0, 0, 0, 0}) {
		t.Fatalf("frame ends % x, want the end mark and no content checksum", out[len(out)-8:])
	}
}

// readKmsgRecords decodes the n records of an uncompressed records section
// with kmsg, failing on bytes after them.
func readKmsgRecords(t *testing.T, section []byte, n int) []kmsg.Record {
	t.Helper()
	out := make([]kmsg.Record, n)
	for i := range out {
		length, m := binary.Varint(section)
		if m <= 0 || int(length) > len(section)-m {
			t.Fatalf("record %d: bad length prefix", i)
		}
		if err := out[i].ReadFrom(section[:m+int(length)]); err != nil {
			t.Fatalf("record %d: kmsg: %v", i, err)
		}
		section = section[m+int(length):]
	}
	if len(section) != 0 {
		t.Fatalf("%d bytes after the records", len(section))
	}
	return out
}
