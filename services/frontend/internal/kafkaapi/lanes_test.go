package kafkaapi

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// batchOf builds a batch of n records.
func batchOf(t *testing.T, n int) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	for i := 0; i < n; i++ {
		b.Append(record.Record{Value: []byte{byte(i)}})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

// leader records the storage requests a lane sends; the first waits for
// release, so that the parts submitted meanwhile queue behind it.
type leader struct {
	mu      sync.Mutex
	sent    [][]byte
	next    int64
	entered chan struct{} // closed once the first request is sent
	release chan struct{}
	refuse  func(records []byte) error // a refusal of a request, or nil
}

func (ld *leader) send(ctx context.Context, k laneKey, records []byte, deadline time.Time) produce.RecordsResult {
	ld.mu.Lock()
	first := len(ld.sent) == 0
	ld.sent = append(ld.sent, bytes.Clone(records))
	ld.mu.Unlock()
	if first {
		close(ld.entered)
		<-ld.release
	}
	if ld.refuse != nil {
		if err := ld.refuse(records); err != nil {
			return produce.RecordsResult{BaseOffset: -1, LogStartOffset: -1, Err: err}
		}
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	base := ld.next
	_, span := record.Count(records)
	ld.next += span
	return produce.RecordsResult{BaseOffset: base}
}

func newLeader() *leader {
	return &leader{entered: make(chan struct{}), release: make(chan struct{})}
}

// submitAll submits the first batch to an idle lane, starting its sender as
// the service does, and the others once the sender's first request is out;
// it returns the parts and a wait for the sender's end.
func submitAll(ls *lanes, ld *leader, batches ...[]byte) ([]*part, func()) {
	var wg sync.WaitGroup
	k := laneKey{"t", 0, -1}
	parts := make([]*part, len(batches))
	for i, b := range batches {
		if i == 1 {
			<-ld.entered
		}
		p, l := ls.submit(k, b, time.Now().Add(time.Minute))
		parts[i] = p
		if l != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ls.run(context.Background(), ld.send, k, l)
			}()
		}
	}
	return parts, wg.Wait
}

func TestLaneJoinsWaitingBatchesInOrder(t *testing.T) {
	a, b, c := batchOf(t, 3), batchOf(t, 2), batchOf(t, 5)
	ld := newLeader()
	ls := newLanes().(*lanes)
	parts, wait := submitAll(ls, ld, a, b, c)
	close(ld.release)
	wait()

	// a went alone (the lane was idle); b and c waited and went together.
	want := [][]byte{a, append(bytes.Clone(b), c...)}
	if len(ld.sent) != len(want) {
		t.Fatalf("sent %d requests, want %d", len(ld.sent), len(want))
	}
	for i := range want {
		if !bytes.Equal(ld.sent[i], want[i]) {
			t.Errorf("request %d carries %d bytes, want %d", i, len(ld.sent[i]), len(want[i]))
		}
	}
	for i, wantBase := range []int64{0, 3, 5} {
		res := waitPart(context.Background(), parts[i])
		if res.Err != nil || res.BaseOffset != wantBase {
			t.Errorf("part %d: base %d err %v, want base %d", i, res.BaseOffset, res.Err, wantBase)
		}
	}
	if len(ls.m) != 0 {
		t.Errorf("%d lanes left after the queue emptied", len(ls.m))
	}
}

func TestLaneResendsRefusedPartsAlone(t *testing.T) {
	a, good, bad := batchOf(t, 1), batchOf(t, 4), batchOf(t, 2)
	bad[len(bad)-1] ^= 0xff // the CRC no longer matches
	ld := newLeader()
	ld.refuse = func(records []byte) error {
		for len(records) > 0 {
			h, err := record.Validate(records)
			if err != nil {
				return protocol.CorruptRecord.Err("%v", err)
			}
			records = records[h.Size():]
		}
		return nil
	}
	ls := newLanes().(*lanes)
	parts, wait := submitAll(ls, ld, a, good, bad)
	close(ld.release)
	wait()

	// The joined request was refused whole; its parts went again alone.
	if len(ld.sent) != 4 {
		t.Fatalf("sent %d requests, want 4 (a, good+bad, good, bad)", len(ld.sent))
	}
	if res := waitPart(context.Background(), parts[1]); res.Err != nil || res.BaseOffset != 1 {
		t.Errorf("good part: base %d err %v, want base 1", res.BaseOffset, res.Err)
	}
	if res := waitPart(context.Background(), parts[2]); protocol.CodeOf(res.Err) != protocol.CorruptRecord {
		t.Errorf("bad part: err %v, want CORRUPT_MESSAGE", res.Err)
	}
}

func TestLaneAnswersEveryPartOfAFailedRequest(t *testing.T) {
	a, b, c := batchOf(t, 1), batchOf(t, 1), batchOf(t, 1)
	ld := newLeader()
	ld.refuse = func([]byte) error { return protocol.RequestTimedOut.Err("no quorum") }
	ls := newLanes().(*lanes)
	parts, wait := submitAll(ls, ld, a, b, c)
	close(ld.release)
	wait()

	// A timeout may have written the request: it is not resent, each part
	// gets the error to retry.
	if len(ld.sent) != 2 {
		t.Fatalf("sent %d requests, want 2", len(ld.sent))
	}
	for i, p := range parts {
		if res := waitPart(context.Background(), p); protocol.CodeOf(res.Err) != protocol.RequestTimedOut {
			t.Errorf("part %d: err %v, want REQUEST_TIMED_OUT", i, res.Err)
		}
	}
}
