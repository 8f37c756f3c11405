package sharecoord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator/coordtest"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// startCo runs a group coordinator (coordtest.Start) that knows topics, for
// a share-group coordinator to run on.
func startCo(t testing.TB, topics coordtest.Topics) (*coordinator.Coordinator, *fsm.FSM) {
	t.Helper()
	co, f, _ := coordtest.Start(t, t.TempDir(), func(f *fsm.FSM, n *raftgroup.Node, log *slog.Logger) *coordinator.Coordinator {
		return coordinator.New(f, n, topics, coordinator.DefaultSettings(), log)
	})
	return co, f
}

// fixedBounds gives every partition the log start 0 and a high watermark.
type fixedBounds int64

func (b fixedBounds) ListOffset(_ context.Context, _ string, _ int32, ts int64) (int64, error) {
	if ts == protocol.TimestampEarliest {
		return 0, nil
	}
	return int64(b), nil
}

// deadLetterLog stands in for the storage nodes of the dead-letter writer:
// it serves records whose value is their offset and keeps every batch
// produced; with failAfter set, a produce succeeds and then reports an
// error, as when the writer dies between its write and its report.
type deadLetterLog struct {
	mu        sync.Mutex
	batches   [][]byte
	targets   []int32
	failAfter bool
}

func (d *deadLetterLog) ReadRecords(_ context.Context, _ string, _ int32, offsets []int64) (map[int64]record.Record, error) {
	out := map[int64]record.Record{}
	for _, o := range offsets {
		out[o] = record.Record{Offset: o, Timestamp: 1000 + o, Value: []byte{byte('a' + o)}}
	}
	return out, nil
}

func (d *deadLetterLog) ProduceBatch(_ context.Context, topic string, partition int32, batch []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.batches = append(d.batches, bytes.Clone(batch))
	d.targets = append(d.targets, partition)
	if d.failAfter {
		return errors.New("connection lost after the write")
	}
	return nil
}

func (d *deadLetterLog) NewProducerID(context.Context) (int64, error) { return 4242, nil }

// TestDeadLetterRetryWritesTheSameBatch: a dead-letter batch written but not
// reported (the writer died in between) is written again byte for byte,
// producer id and sequence numbers included, so the partition leader drops
// it as a duplicate; the next batch continues the sequence.
func TestDeadLetterRetryWritesTheSameBatch(t *testing.T) {
	co, f := startCo(t, coordtest.Topics{"t": 4, "dlt": 3})
	dl := &deadLetterLog{failAfter: true}
	s := New(co, fixedBounds(10), dl)
	ctx := context.Background()
	if err := s.Configure(ctx, "q", map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigDeadLetterTopic: "dlt"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Acquire(ctx, "q", shares.AcquireRequest{MemberID: "a", Topic: "t", MaxRecords: 3})
	if err != nil || len(got.Acquired) != 1 {
		t.Fatalf("acquired %+v, %v", got, err)
	}
	a := got.Acquired[0]
	resp, err := s.Ack(ctx, "q", shares.AckRequest{MemberID: "a", Acks: []shares.Ack{{Topic: "t", Partition: a.Partition,
		FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, Type: shares.AckReject, Reason: "poison"}}})
	if err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("reject: %+v, %v", resp, err)
	}
	s.writeDeadLetters() // writes, then "dies" before reporting
	g, _ := f.Share("q")
	p := g.Partitions[fsmKey("t", a.Partition)]
	if p.Archived != 0 || p.DeadLetters == nil || p.DeadLetters.Pending == nil {
		t.Fatalf("after a write that was not reported: archived %d, writer %+v", p.Archived, p.DeadLetters)
	}
	dl.failAfter = false
	s.writeDeadLetters()
	if len(dl.batches) != 2 || !bytes.Equal(dl.batches[0], dl.batches[1]) {
		t.Fatalf("the retried batch differs from the first write (%d batches)", len(dl.batches))
	}
	h, err := record.ParseHeader(dl.batches[0])
	if err != nil || h.ProducerID != 4242 || h.BaseSequence != 0 || h.RecordCount != 3 || dl.targets[0] != a.Partition%3 {
		t.Fatalf("batch header %+v (%v) to partition %d", h, err, dl.targets[0])
	}
	it := record.NewIterator(dl.batches[0])
	for it.Next() {
		r := it.Record()
		hs := map[string]string{}
		for _, x := range r.Headers {
			hs[x.Key] = string(x.Value)
		}
		if hs[shares.HeaderReason] != "poison" || hs[shares.HeaderGroup] != "q" || hs[shares.HeaderDeliveryCount] != "1" || hs[shares.HeaderSourceTopic] != "t" {
			t.Fatalf("dead letter headers %v", hs)
		}
	}
	g, _ = f.Share("q")
	p = g.Partitions[fsmKey("t", a.Partition)]
	if p.Archived != 3 || p.DeadLetters.Pending != nil || p.DeadLetters.NextSeq != 3 || p.Start != a.LastOffset+1 {
		t.Fatalf("after the retry: archived %d, writer %+v, start %d", p.Archived, p.DeadLetters, p.Start)
	}
	s.writeDeadLetters()
	if len(dl.batches) != 2 {
		t.Fatalf("%d batches written with nothing left to write", len(dl.batches))
	}
}

func fsmKey(topic string, p int32) string {
	return partkey.String(groups.TP{Topic: topic, Partition: p})
}

// TestAcquireCarriesAcknowledgements: acknowledgements sent with an
// acquisition apply first, in the same step: accepted records are done,
// a refused acknowledgement comes back with the acquisition's answer and
// changes nothing, released records are taken again at once, and an
// acquisition that finds nothing still answers its acknowledgements.
func TestAcquireCarriesAcknowledgements(t *testing.T) {
	co, f := startCo(t, coordtest.Topics{"t": 1})
	s := New(co, fixedBounds(6), nil)
	ctx := context.Background()
	if err := s.Configure(ctx, "q", map[string]string{shares.ConfigAutoOffsetReset: "earliest"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Acquire(ctx, "q", shares.AcquireRequest{MemberID: "a", Topic: "t", MaxRecords: 4})
	if err != nil || len(got.Acquired) != 1 || got.Acquired[0].LastOffset != 3 || got.AckResults != nil {
		t.Fatalf("first acquisition: %+v, %v", got, err)
	}
	ack := func(first, last int64, typ shares.AckType) shares.Ack {
		return shares.Ack{Topic: "t", Partition: 0, FirstOffset: first, LastOffset: last, Type: typ}
	}
	// Accept 0-1, release 2-3: the same step takes 2-5 (2-3 for the
	// second time).
	got, err = s.Acquire(ctx, "q", shares.AcquireRequest{MemberID: "a", Topic: "t", MaxRecords: 10,
		Acks: []shares.Ack{ack(0, 1, shares.AckAccept), ack(2, 3, shares.AckRelease)}})
	if err != nil || len(got.AckResults) != 1 || got.AckResults[0].ErrorCode != 0 {
		t.Fatalf("acquisition with acknowledgements: %+v, %v", got, err)
	}
	want := []shares.Acquired{{Topic: "t", FirstOffset: 2, LastOffset: 3, DeliveryCount: 2}, {Topic: "t", FirstOffset: 4, LastOffset: 5, DeliveryCount: 1}}
	if len(got.Acquired) != 2 || got.Acquired[0] != want[0] || got.Acquired[1] != want[1] {
		t.Fatalf("acquired %+v, want %+v", got.Acquired, want)
	}
	// Another member's acknowledgement of a's records is refused, and the
	// acquisition (nothing left) still answers it.
	got, err = s.Acquire(ctx, "q", shares.AcquireRequest{MemberID: "b", Topic: "t", Acks: []shares.Ack{ack(2, 5, shares.AckAccept)}})
	if err != nil || len(got.Acquired) != 0 || len(got.AckResults) != 1 || protocol.Code(got.AckResults[0].ErrorCode) != protocol.InvalidRecordState {
		t.Fatalf("b's acknowledgement of a's records: %+v, %v", got, err)
	}
	g, _ := f.Share("q")
	st := g.Partitions[partkey.String(groups.TP{Topic: "t"})].State(6, co.Now().UnixMilli())
	if st.StartOffset != 2 || st.Acquired != 4 || st.Accepted != 2 {
		t.Fatalf("state after the refusal: %+v; want 0-1 accepted and 2-5 held by a", st)
	}
	// Mismatched member ids are refused outright.
	if _, err := s.propose(ctx, sharefsm.Command{Group: "q", Ack: &shares.AckRequest{MemberID: "a", Acks: []shares.Ack{ack(2, 2, shares.AckAccept)}},
		Acquire: &sharefsm.Acquire{MemberID: "b", Topic: "t"}}); protocol.CodeOf(err) != protocol.InvalidRequest {
		t.Fatalf("acknowledgements and acquisition of two members: %v", err)
	}
}

// TestWaitingAcquisitionWakesWhenRecordsAreGivenBack: an acquisition that
// found every record under another member's lock waits; another member's
// release wakes it, and it takes the released records at once rather than
// at its next look (an hour away here).
func TestWaitingAcquisitionWakesWhenRecordsAreGivenBack(t *testing.T) {
	co, _ := startCo(t, coordtest.Topics{"t": 1})
	s := New(co, fixedBounds(10), nil)
	s.ttl = time.Hour
	ctx := context.Background()
	if err := s.Configure(ctx, "q", map[string]string{shares.ConfigAutoOffsetReset: "earliest"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Acquire(ctx, "q", shares.AcquireRequest{MemberID: "a", Topic: "t", MaxRecords: 10})
	if err != nil || len(got.Acquired) != 1 || got.Acquired[0].LastOffset != 9 {
		t.Fatalf("a's acquisition: %+v, %v", got, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	woken := make(chan *shares.AcquireResponse, 1)
	go func() {
		resp, err := s.Acquire(wctx, "q", shares.AcquireRequest{MemberID: "b", Topic: "t", WaitMs: 30_000})
		if err != nil {
			t.Error(err)
		}
		woken <- resp
	}()
	testkit.WaitFor(t, 10*time.Second, "the acquisition to wait", func() bool { return s.waiting.Load() > 0 })
	if _, err := s.Ack(ctx, "q", shares.AckRequest{MemberID: "a", Acks: []shares.Ack{{Topic: "t", FirstOffset: 0, LastOffset: 4, Type: shares.AckRelease}}}); err != nil {
		t.Fatal(err)
	}
	resp := <-woken
	if resp == nil || len(resp.Acquired) != 1 || resp.Acquired[0].FirstOffset != 0 || resp.Acquired[0].LastOffset != 4 {
		t.Fatalf("b's acquisition after a's release: %+v; want offsets 0-4", resp)
	}
}

// TestLockExpiryHandsRecordsToTheNextMember: records a member acquired and
// never acknowledged are another member's once their lock expires, at their
// second delivery; before that they are not. It runs in a synctest bubble:
// the lock's duration passes on the bubble's clock, which the coordinator
// proposes with every acquisition (the FSM decides expiry from it).
func TestLockExpiryHandsRecordsToTheNextMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		co, _ := startCo(t, coordtest.Topics{"t": 1})
		s := New(co, fixedBounds(10), nil)
		ctx := context.Background()
		if err := s.Configure(ctx, "q", map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigLockDurationMs: "1000"}); err != nil {
			t.Fatal(err)
		}
		take := func(member string) []shares.Acquired {
			got, err := s.Acquire(ctx, "q", shares.AcquireRequest{MemberID: member, Topic: "t", MaxRecords: 10})
			if err != nil {
				t.Fatalf("%s's acquisition: %v", member, err)
			}
			return got.Acquired
		}
		if got := take("a"); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 9 || got[0].DeliveryCount != 1 {
			t.Fatalf("a acquired %+v; want offsets 0-9 at delivery 1", got)
		}
		<-time.After(999 * time.Millisecond) // on the bubble's clock
		if got := take("b"); len(got) != 0 {
			t.Fatalf("b acquired %+v while a's lock holds", got)
		}
		<-time.After(time.Millisecond)
		if got := take("b"); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 9 || got[0].DeliveryCount != 2 {
			t.Fatalf("b acquired %+v once a's lock expired; want offsets 0-9 at delivery 2", got)
		}
	})
}

// BenchmarkDeadLetterScanIdle is the dead-letter writer's tick over 20
// share groups without a dead-letter topic, each holding 8,000 records
// under lock: a group without a topic is passed over without scanning its
// records (before, every tick scanned every record of every group).
func BenchmarkDeadLetterScanIdle(b *testing.B) {
	co, _ := startCo(b, coordtest.Topics{"t": 4})
	s := New(co, fixedBounds(1_000_000), &deadLetterLog{})
	ctx := context.Background()
	for g := range 20 {
		name := fmt.Sprintf("g%d", g)
		if err := s.Configure(ctx, name, map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigMaxRecordLocks: "2000",
			shares.ConfigMaxFetchRecords: "2000"}); err != nil {
			b.Fatal(err)
		}
		for m := range 4 {
			if _, err := s.Acquire(ctx, name, shares.AcquireRequest{MemberID: fmt.Sprint(m), Topic: "t"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
		s.writeDeadLetters()
	}
}
