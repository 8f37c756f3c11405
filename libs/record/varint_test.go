package record

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestVarintAgainstEncodingBinary(t *testing.T) {
	// encoding/binary's Varint is the same zigzag LEB128 as Kafka's varlong.
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 8191, 8192, math.MaxInt32, math.MinInt32,
		math.MaxInt32 + 1, math.MaxInt64, math.MinInt64, 1 << 40, -(1 << 40)} {
		want := binary.AppendVarint(nil, v)
		got := appendVarlong(nil, v)
		if string(got) != string(want) || varlongSize(v) != len(want) {
			t.Fatalf("varlong %d: % x (size %d), want % x", v, got, varlongSize(v), want)
		}
		if r, n := readVarlong(got); r != v || n != len(got) {
			t.Fatalf("readVarlong(% x) = %d, %d", got, r, n)
		}
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			got := appendVarint(nil, int32(v))
			if string(got) != string(want) || varintSize(int32(v)) != len(want) {
				t.Fatalf("varint %d: % x, want % x", v, got, want)
			}
			if r, n := readVarint(got); r != int32(v) || n != len(got) {
				t.Fatalf("readVarint(% x) = %d, %d", got, r, n)
			}
		}
	}
}

func TestVarintErrors(t *testing.T) {
	for _, c := range []struct {
		in    []byte
		wantN int
	}{
		{nil, 0},
		{[]byte{0x80}, 0},
		{[]byte{0xff, 0xff, 0xff, 0xff}, 0},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x10}, -1}, // bits past 32
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x8f, 0x00}, -1},
	} {
		if _, n := readVarint(c.in); n != c.wantN {
			t.Errorf("readVarint(% x): n = %d, want %d", c.in, n, c.wantN)
		}
	}
	if v, n := readVarint([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}); n != 5 || v != math.MinInt32 {
		t.Errorf("largest varint: %d, %d", v, n)
	}
	long := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}
	if _, n := readVarlong(long); n != -1 {
		t.Errorf("varlong past 64 bits: n = %d", n)
	}
	if _, n := readVarlong(long[:9]); n != 0 {
		t.Errorf("cut varlong: n = %d", n)
	}
}
