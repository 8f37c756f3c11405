package frontendapi

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestRoundTripAndLibraryCompatibility(t *testing.T) {
	in := []PartitionBatch{{0, []byte("a")}, {7, bytes.Repeat([]byte{1}, 300)}, {1 << 20, bytes.Repeat([]byte{2}, 70000)}}
	for n := 0; n < 20; n++ { // past the fixarray limit
		in = append(in, PartitionBatch{int32(n), nil})
	}
	body := AppendBatches(nil, in)
	out, err := DecodeBatches(body)
	if err != nil || len(out) != len(in) {
		t.Fatalf("decode: %d batches, %v", len(out), err)
	}
	for i := range in {
		if out[i].Partition != in[i].Partition || !bytes.Equal(out[i].Batch, in[i].Batch) {
			t.Fatalf("batch %d differs", i)
		}
	}
	// The body is plain msgpack: the library reads it, and writes bodies we read.
	var generic []any
	if err := msgpack.Unmarshal(body, &generic); err != nil || len(generic) != len(in) {
		t.Fatalf("msgpack library: %v", err)
	}
	lib, err := msgpack.Marshal([]any{[]any{int64(-0), []byte("x")}, []any{int32(300), []byte("yz")}})
	if err != nil {
		t.Fatal(err)
	}
	out, err = DecodeBatches(lib)
	if err != nil || len(out) != 2 || out[1].Partition != 300 || string(out[1].Batch) != "yz" {
		t.Fatalf("library body: %+v, %v", out, err)
	}
}

func TestDecodeRejectsMalformedBodies(t *testing.T) {
	good := AppendBatches(nil, []PartitionBatch{{1, []byte("abc")}})
	neg, _ := msgpack.Marshal([]any{[]any{-1, []byte("x")}})
	str, _ := msgpack.Marshal([]any{[]any{1, "not bin"}})
	three, _ := msgpack.Marshal([]any{[]any{1, []byte("x"), 2}})
	for name, body := range map[string][]byte{
		"empty":              {},
		"not an array":       {0xc0},
		"truncated batch":    good[:len(good)-1],
		"trailing bytes":     append(append([]byte{}, good...), 0),
		"negative partition": neg,
		"string batch":       str,
		"three fields":       three,
		"huge count":         {0xdd, 0xff, 0xff, 0xff, 0xff},
		"bin past the end":   {0x91, 0x92, 0x01, 0xc6, 0x7f, 0xff, 0xff, 0xff},
	} {
		if _, err := DecodeBatches(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecodeBatches(f *testing.F) {
	f.Add(AppendBatches(nil, []PartitionBatch{{1, []byte("abc")}, {2, nil}}))
	f.Add([]byte{0x91, 0x92, 0xd3, 0, 0, 0, 0, 0, 0, 0, 1, 0xc4, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := DecodeBatches(body)
		if err != nil {
			return
		}
		again, err := DecodeBatches(AppendBatches(nil, out))
		if err != nil || len(again) != len(out) {
			t.Fatalf("re-encoded body does not decode: %v", err)
		}
	})
}

// TestBatchesSegmentsMatchAppendBatches: the pieces, concatenated, are the
// body AppendBatches builds, for every size class of count, partition and
// batch length; the batches are aliased, not copied.
func TestBatchesSegmentsMatchAppendBatches(t *testing.T) {
	big := bytes.Repeat([]byte{3}, 70000)
	cases := [][]PartitionBatch{nil, {{0, []byte("a")}}, {{7, bytes.Repeat([]byte{1}, 300)}, {1 << 20, big}, {-1, nil}}}
	var many []PartitionBatch
	for n := 0; n < 40; n++ { // past the fixarray length, partitions past 7 bits
		many = append(many, PartitionBatch{int32(n * 997), []byte{byte(n)}})
	}
	cases = append(cases, many)
	for i, in := range cases {
		segs, size := BatchesSegments(in)
		joined := bytes.Join(segs, nil)
		if want := AppendBatches(nil, in); !bytes.Equal(joined, want) || size != len(want) {
			t.Fatalf("case %d: segments give %d bytes (size %d), AppendBatches %d", i, len(joined), size, len(want))
		}
	}
	segs, _ := BatchesSegments(cases[2])
	if &segs[3][0] != &big[0] {
		t.Fatal("a batch was copied into the segments")
	}
}
