package record

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMarkerRoundTrip: a marker built here parses back, carries the control
// and transactional attributes and the producer's id and epoch, is read by
// kmsg as Kafka's ControlRecordKey and EndTxnMarker, and is skipped by the
// Iterator.
func TestMarkerRoundTrip(t *testing.T) {
	for _, m := range []Marker{{ControlCommit, 7}, {ControlAbort, 0}, {ControlCommit, -1}} {
		b, err := BuildMarker(42, 3, m, 1700000000000)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 ||
			h.BaseSequence != NoSequence || h.RecordCount != 1 || h.Compression() != CodecNone {
			t.Fatalf("header %+v", h)
		}
		got, err := ParseMarker(b, &h)
		if err != nil || got != m {
			t.Fatalf("ParseMarker = %+v, %v; want %+v", got, err, m)
		}
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		recs := readKmsgRecords(t, kb.Records, 1)
		var key kmsg.ControlRecordKey
		var val kmsg.EndTxnMarker
		if err := key.ReadFrom(recs[0].Key); err != nil || int16(key.Type) != int16(m.Type) {
			t.Fatalf("kmsg key %+v, %v", key, err)
		}
		if err := val.ReadFrom(recs[0].Value); err != nil || val.CoordinatorEpoch != m.CoordinatorEpoch {
			t.Fatalf("kmsg value %+v, %v", val, err)
		}
		if recs, it := collect(b, 0); len(recs) != 0 || it.Err() != nil {
			t.Fatalf("Iterator yielded %d records, err %v", len(recs), it.Err())
		}
	}
	bld := NewBuilder(CodecNone)
	bld.SetProducer(42, 3, 0)
	bld.SetTransactional(true)
	bld.Append(Record{Key: []byte("k")})
	if b, _ := bld.Build(); func() bool { h, _ := Validate(b); return !h.IsTransactional() || h.IsControl() }() {
		t.Fatal("SetTransactional(true) did not set the transactional attribute alone")
	}
	if _, err := BuildMarker(1, 0, Marker{Type: 2}, 0); err == nil {
		t.Fatal("BuildMarker accepted control type 2")
	}
}

// TestParseMarkerRefuses: what is not a well-formed transaction marker is
// an error wrapping ErrCorrupt.
func TestParseMarkerRefuses(t *testing.T) {
	control := func(key, value []byte, count int) []byte {
		bld := NewBuilder(CodecNone)
		for range count {
			bld.Append(Record{Key: key, Value: value})
		}
		b, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		b = append([]byte(nil), b...)
		b[offAttributes+1] = attrControl | attrTransactional
		SealBatch(b, count)
		return b
	}
	cases := map[string][]byte{
		"not control":      mustBuild(t, Record{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}),
		"two records":      control([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0}, 2),
		"short key":        control([]byte{0, 0, 0}, []byte{0, 0, 0, 0, 0, 0}, 1),
		"null key":         control(nil, []byte{0, 0, 0, 0, 0, 0}, 1),
		"unknown type":     control([]byte{0, 0, 0, 2}, []byte{0, 0, 0, 0, 0, 0}, 1),
		"negative key v":   control([]byte{0x80, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0}, 1),
		"short value":      control([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0}, 1),
		"null value":       control([]byte{0, 0, 0, 1}, nil, 1),
		"negative value v": control([]byte{0, 0, 0, 0}, []byte{0xff, 0xff, 0, 0, 0, 0}, 1),
	}
	for name, b := range cases {
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := ParseMarker(b, &h); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: ParseMarker err %v, want ErrCorrupt", name, err)
		}
	}
	// Later versions with more bytes are read, as Kafka reads them.
	b := control([]byte{0, 1, 0, 0, 9}, []byte{0, 1, 0, 0, 0, 5, 9, 9}, 1)
	h, _ := Validate(b)
	if m, err := ParseMarker(b, &h); err != nil || m != (Marker{ControlAbort, 5}) {
		t.Fatalf("version 1 marker: %+v, %v", m, err)
	}
}

func mustBuild(t *testing.T, recs ...Record) []byte {
	t.Helper()
	bld := NewBuilder(CodecNone)
	for _, r := range recs {
		bld.Append(r)
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b...)
}

// FuzzMarker: ParseMarker of any control batch returns a marker or an
// error, never panics, and a marker it returns builds back to the same
// marker.
func FuzzMarker(f *testing.F) {
	for _, m := range []Marker{{ControlCommit, 7}, {ControlAbort, 0}} {
		b, _ := BuildMarker(1, 0, m, 0)
		f.Add(b[HeaderSize:], uint8(1))
	}
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, section []byte, count uint8) {
		n := int32(count % 4)
		b := rawBatch(CodecNone, n, max(n-1, 0), section)
		b[offAttributes+1] = attrControl | attrTransactional
		SealBatch(b, int(n))
		h, err := Validate(b)
		if err != nil {
			return
		}
		m, err := ParseMarker(b, &h)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := BuildMarker(0, 0, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		h2, _ := Validate(again)
		if m2, err := ParseMarker(again, &h2); err != nil || m2 != m {
			t.Fatalf("rebuilt marker %+v, %v; want %+v", m2, err, m)
		}
	})
}

// TestIteratorDropsAbortedTransactions: with the aborted transactions of a
// fetch, the Iterator drops exactly their records: a producer's later
// transaction after its abort marker, other producers' transactional
// records and plain records stay.
func TestIteratorDropsAbortedTransactions(t *testing.T) {
	var data []byte
	next := int64(0)
	add := func(b []byte) int64 {
		b = append([]byte(nil), b...)
		SetBaseOffset(b, next)
		h, _ := ParseHeader(b)
		data = append(data, b...)
		base := next
		next = h.LastOffset() + 1
		return base
	}
	txn := func(pid int64, seq int32, value string) []byte {
		bld := NewBuilder(CodecNone)
		bld.SetProducer(pid, 0, seq)
		bld.SetTransactional(true)
		bld.Append(Record{Value: []byte(value + "-0")})
		bld.Append(Record{Value: []byte(value + "-1")})
		b, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	marker := func(pid int64, typ ControlType) []byte {
		b, err := BuildMarker(pid, 0, Marker{Type: typ}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	add(txn(1, 0, "p1-committed"))
	abortedFirst := add(txn(2, 0, "p2-aborted"))
	add(mustBuild(t, Record{Value: []byte("plain")}))
	add(txn(2, 2, "p2-aborted-too"))
	add(marker(2, ControlAbort))
	add(txn(2, 4, "p2-later"))
	add(marker(1, ControlCommit))
	add(marker(2, ControlCommit))

	values := func(start int64, aborted []AbortedTxn) []string {
		it := NewIterator(data)
		it.SetStartOffset(start)
		it.SetAborted(aborted)
		var out []string
		for it.Next() {
			out = append(out, string(it.Record().Value))
		}
		if it.Err() != nil || it.NextOffset() != next {
			t.Fatalf("err %v, next offset %d, want %d", it.Err(), it.NextOffset(), next)
		}
		return out
	}
	want := []string{"p1-committed-0", "p1-committed-1", "plain", "p2-later-0", "p2-later-1"}
	if got := values(0, []AbortedTxn{{ProducerID: 2, FirstOffset: abortedFirst}}); !slices.Equal(got, want) {
		t.Fatalf("read_committed read %q, want %q", got, want)
	}
	if got := values(abortedFirst+1, []AbortedTxn{{ProducerID: 2, FirstOffset: abortedFirst}}); !slices.Equal(got, want[2:]) {
		t.Fatalf("read_committed from inside the aborted batch read %q, want %q", got, want[2:])
	}
	if got := values(0, nil); len(got) != 9 {
		t.Fatalf("read_uncommitted read %d records, want 9: %q", len(got), got)
	}
}
