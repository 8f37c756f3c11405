package record

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRecords returns n records with 8-byte keys and size-byte text values.
func benchRecords(n, size int) []Record {
	rng := rand.New(rand.NewPCG(7, 7))
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Timestamp: 1_700_000_000_000 + int64(i),
			Key:       fmt.Appendf(nil, "key-%04d", i%10000),
			Value:     textValue(rng, size),
		}
	}
	return recs
}

// BenchmarkBuild encodes 1000 records of 100 bytes; throughput counts the
// uncompressed batch.
func BenchmarkBuild(b *testing.B) {
	recs := benchRecords(1000, 100)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			bld := NewBuilder(c)
			size := 0
			b.ReportAllocs()
			for b.Loop() {
				bld.Reset()
				for _, r := range recs {
					bld.Append(r)
				}
				size = bld.Size()
				out, err := bld.Build()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(out)), "batch-bytes")
			}
			b.SetBytes(int64(size))
		})
	}
}

// BenchmarkIterate decodes the same batches; throughput counts the
// uncompressed batch.
func BenchmarkIterate(b *testing.B) {
	recs := benchRecords(1000, 100)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			bld := NewBuilder(c)
			for _, r := range recs {
				bld.Append(r)
			}
			batch, err := bld.Build()
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(bld.Size()))
			it := NewIterator(nil)
			b.ReportAllocs()
			for b.Loop() {
				it.Reset(batch)
				n := 0
				for it.Next() {
					n += len(it.Record().Value)
				}
				if it.Err() != nil || n != 100*len(recs) {
					b.Fatalf("%v, %d value bytes", it.Err(), n)
				}
			}
		})
	}
}

// BenchmarkValidate checks length, magic and CRC of a 64 KiB batch, the work
// a storage leader does per produced batch.
func BenchmarkValidate(b *testing.B) {
	bld := NewBuilder(CodecNone)
	for _, r := range benchRecords(1000, 100) {
		if bld.SizeWith(r) > 64<<10 {
			break
		}
		bld.Append(r)
	}
	batch, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIterateRange reads a batch of 5,000 records of 100 bytes in ten
// ranges of 500, as the members of a share group each read the part of a
// batch they acquired: "ranged" with an end offset per range, "unranged"
// with a start offset alone (every record of the batch decoded each time,
// those past the range dropped by the reader), "checked" ranged with the
// CRC checked once before (SetChecked).
func BenchmarkIterateRange(b *testing.B) {
	recs := benchRecords(5000, 100)
	bld := NewBuilder(CodecNone)
	for _, r := range recs {
		bld.Append(r)
	}
	batch, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"ranged", "checked", "unranged"} {
		ranged := mode != "unranged"
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(bld.Size()))
			it := NewIterator(nil)
			it.SetChecked(mode == "checked")
			b.ReportAllocs()
			for b.Loop() {
				for start := int64(0); start < 5000; start += 500 {
					it.Reset(batch)
					it.SetStartOffset(start)
					if ranged {
						it.SetEndOffset(start + 499)
					}
					n := 0
					for it.Next() && it.Record().Offset < start+500 {
						n++
					}
					if it.Err() != nil || n != 500 {
						b.Fatalf("%v, %d records", it.Err(), n)
					}
				}
			}
		})
	}
}
