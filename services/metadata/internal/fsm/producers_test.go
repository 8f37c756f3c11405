package fsm

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"testing"
)

func allocIDs(n int64) Command {
	return Command{Type: TypeAllocProducerIDs, AllocProducerIDs: &AllocProducerIDs{Count: n}}
}

func TestAllocProducerIDs(t *testing.T) {
	h := newHarness()
	h.applyAll(t, reg(1, "a"))
	version, changed := h.Changed()
	tests := []struct {
		name      string
		count     int64
		next      int64 // the counter before; 0 keeps the previous test's
		wantFirst int64
		wantErr   error
	}{
		{name: "first block", count: 1000, wantFirst: FirstProducerID},
		{name: "next block follows", count: 1, wantFirst: FirstProducerID + 1000},
		{name: "largest block", count: MaxProducerIDBlock, wantFirst: FirstProducerID + 1001},
		{name: "empty block", count: 0, wantErr: ErrMalformedCommand},
		{name: "negative block", count: -5, wantErr: ErrMalformedCommand},
		{name: "block too large", count: MaxProducerIDBlock + 1, wantErr: ErrMalformedCommand},
		{name: "last ids", count: 5, next: math.MaxInt64 - 5, wantFirst: math.MaxInt64 - 5},
		{name: "exhausted", count: 1, wantErr: ErrProducerIDsExhausted},
	}
	for _, tc := range tests {
		if tc.next != 0 {
			h.st.nextProducerID = tc.next
		}
		before := h.NextProducerID()
		r := h.apply(t, allocIDs(tc.count))
		if !errors.Is(r.Err, tc.wantErr) {
			t.Fatalf("%s: err = %v; want %v", tc.name, r.Err, tc.wantErr)
		}
		if tc.wantErr != nil {
			if h.NextProducerID() != before {
				t.Fatalf("%s: rejected command moved the counter from %d to %d", tc.name, before, h.NextProducerID())
			}
			continue
		}
		if r.ProducerID != tc.wantFirst || h.NextProducerID() != tc.wantFirst+tc.count {
			t.Fatalf("%s: first %d, next %d; want %d, %d", tc.name, r.ProducerID, h.NextProducerID(), tc.wantFirst, tc.wantFirst+tc.count)
		}
	}
	// Not a change of the cluster model: no version, no wake-up.
	if v := h.Version(); v != version {
		t.Fatalf("version %d after reservations; want %d", v, version)
	}
	select {
	case <-changed:
		t.Fatal("a reservation woke the watchers")
	default:
	}
}

func TestAllocProducerIDsEncoding(t *testing.T) {
	b := mustEncode(t, allocIDs(7))
	c, err := DecodeCommand(b)
	if err != nil || c.AllocProducerIDs == nil || c.AllocProducerIDs.Count != 7 {
		t.Fatalf("DecodeCommand(%s) = %+v, %v", b, c, err)
	}
	for _, bad := range []string{
		`{"type":"alloc_producer_ids"}`,
		`{"type":"alloc_producer_ids","alloc_producer_ids":{"count":1},"delete_topic":{"name":"x"}}`,
		`{"type":"delete_topic","alloc_producer_ids":{"count":1}}`,
	} {
		if _, err := DecodeCommand([]byte(bad)); !errors.Is(err, ErrMalformedCommand) {
			t.Errorf("DecodeCommand(%s) = %v; want ErrMalformedCommand", bad, err)
		}
	}
}

// TestRestoreSnapshotBeforeProducerIDs restores a snapshot written before
// the producer id counter existed: the counter starts at FirstProducerID.
func TestRestoreSnapshotBeforeProducerIDs(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-before-producer-ids.json")
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	f.ApplyCommand(1, allocIDs(50)) // overwritten by the restore
	if err := f.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if v := f.View(); v.NextProducerID != FirstProducerID || v.ClusterID != "cid" || len(v.Nodes) != 1 || !v.ShuttingDown[1] {
		t.Fatalf("restored %+v; want the old state and next producer id %d", v, FirstProducerID)
	}
	if r := f.ApplyCommand(4, allocIDs(10)); r.Err != nil || r.ProducerID != FirstProducerID {
		t.Fatalf("first reservation after restore = %+v", r)
	}

	// A counter below FirstProducerID was never written: corrupt.
	for _, in := range []string{`{"format":1,"next_producer_id":999}`, `{"format":1,"next_producer_id":-3}`} {
		if err := New().Restore(io.NopCloser(bytes.NewReader([]byte(in)))); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("Restore(%s) = %v; want ErrCorruptSnapshot", in, err)
		}
	}
}
