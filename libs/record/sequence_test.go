package record

import (
	"math"
	"testing"
)

func TestLastSequence(t *testing.T) {
	for _, tc := range []struct {
		base, delta, want int32
	}{
		{0, 0, 0},
		{0, 9, 9},
		{100, 4, 104},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0}, // wraps to 0, as Kafka
		{math.MaxInt32 - 2, 4, 1},
		{math.MaxInt32 - 2, 2, math.MaxInt32},
		{NoSequence, 5, NoSequence},
	} {
		h := Header{BaseSequence: tc.base, LastOffsetDelta: tc.delta, RecordCount: tc.delta + 1}
		if got := h.LastSequence(); got != tc.want {
			t.Errorf("base %d delta %d: last sequence %d, want %d", tc.base, tc.delta, got, tc.want)
		}
	}
	if got := IncrementSequence(math.MaxInt32, math.MaxInt32); got != math.MaxInt32-1 {
		t.Errorf("IncrementSequence(max, max) = %d", got)
	}
}

func TestLastSequenceOfBuiltBatch(t *testing.T) {
	b := NewBuilder(CodecNone)
	b.SetProducer(7, 3, math.MaxInt32-1)
	for range 4 {
		b.Append(Record{Value: []byte("v")})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Validate(out)
	if err != nil {
		t.Fatal(err)
	}
	if h.ProducerID != 7 || h.ProducerEpoch != 3 || h.BaseSequence != math.MaxInt32-1 || h.LastSequence() != 1 {
		t.Fatalf("header %+v, last sequence %d", h, h.LastSequence())
	}
}
