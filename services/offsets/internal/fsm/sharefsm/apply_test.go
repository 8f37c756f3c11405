package sharefsm

import (
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// shareLog applies share operations to a state file one entry each, as
// package fsm applies a batch: in one bbolt transaction, through a Stage
// that Flush writes and Commit makes the committed state. No consumer
// group takes a name here (package fsm tests that rule with its groups).
type shareLog struct {
	t      *testing.T
	path   string
	db     *bolt.DB
	groups map[string]*Group // as committed
}

// answer is a share operation's answer, as fsm.Result carries it.
type answer struct {
	Err   error // the refusal
	Share *Result
}

// openShareLog opens a new state file.
func openShareLog(t *testing.T) *shareLog {
	l := &shareLog{t: t, path: filepath.Join(t.TempDir(), "state.db")}
	l.open()
	t.Cleanup(func() { l.db.Close() })
	return l
}

// open opens the state file and loads its share groups, as a replica
// starting does.
func (l *shareLog) open() {
	l.t.Helper()
	db, err := bolt.Open(l.path, 0o600, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	l.db = db
	if err := db.Update(func(tx *bolt.Tx) error { l.groups, err = Load(tx); return err }); err != nil {
		l.t.Fatal(err)
	}
}

// restart closes the state file and opens it again.
func (l *shareLog) restart() {
	l.t.Helper()
	if err := l.db.Close(); err != nil {
		l.t.Fatal(err)
	}
	l.open()
}

func (l *shareLog) do(op Command) answer {
	l.t.Helper()
	if op.Group == "" {
		op.Group = "q"
	}
	st := NewStage(l.groups, func(string) bool { return false })
	var res answer
	err := l.db.Update(func(tx *bolt.Tx) error {
		var err error
		if res.Share, res.Err, err = st.Apply(tx, &op); err != nil {
			return err
		}
		return st.Flush(tx)
	})
	if err != nil {
		l.t.Fatal(err)
	}
	st.Commit()
	return res
}

// group returns a share group's state as committed.
func (l *shareLog) group(name string) (*Group, bool) {
	g, ok := l.groups[name]
	return g, ok
}

func (l *shareLog) partition() *Partition {
	l.t.Helper()
	g, ok := l.group("q")
	if !ok {
		l.t.Fatal("no share group q")
	}
	return g.Partitions["t/0"]
}

func (l *shareLog) stored() string {
	l.t.Helper()
	b, err := EncodePartition(l.partition())
	if err != nil {
		l.t.Fatal(err)
	}
	return string(b)
}

func newShareLog(t *testing.T, cfg shares.Config) *shareLog {
	l := openShareLog(t)
	if res := l.do(Command{Config: &cfg}); res.Err != nil {
		t.Fatal(res.Err)
	}
	return l
}

func (l *shareLog) acquire(member string, max int32, hw, nowMs int64) []shares.Acquired {
	l.t.Helper()
	res := l.do(Command{NowMs: nowMs, Acquire: &Acquire{MemberID: member, Topic: "t", Max: max,
		Partitions: []Bounds{{Partition: 0, HighWatermark: hw}}}})
	if res.Err != nil {
		l.t.Fatalf("acquire: %v", res.Err)
	}
	return res.Share.Acquire.Acquired
}

// ack acknowledges one range and returns the partition's error (nil when applied).
func (l *shareLog) ack(member string, first, last int64, typ shares.AckType, nowMs int64) error {
	l.t.Helper()
	res := l.do(Command{NowMs: nowMs, Ack: &shares.AckRequest{MemberID: member,
		Acks: []shares.Ack{{Topic: "t", FirstOffset: first, LastOffset: last, Type: typ}}}})
	if res.Err != nil {
		l.t.Fatalf("ack: %v", res.Err)
	}
	r := res.Share.Acks[0]
	if r.ErrorCode == 0 {
		return nil
	}
	return protocol.Code(r.ErrorCode).Err("%s", r.Error)
}

func earliest() shares.Config {
	c := shares.DefaultConfig()
	c.AutoOffsetReset = "earliest"
	c.LockDurationMs = 1000
	c.DeliveryLimit = 3
	c.MaxRecordLocks = 100
	c.MaxFetchRecords = 100
	return c
}

func TestShareAcquireAndAccept(t *testing.T) {
	l := newShareLog(t, earliest())
	got := l.acquire("a", 10, 25, 0)
	want := []shares.Acquired{{Topic: "t", FirstOffset: 0, LastOffset: 9, DeliveryCount: 1}}
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("acquired %+v, want %+v", got, want)
	}
	got = l.acquire("b", 100, 25, 0)
	if len(got) != 1 || got[0].FirstOffset != 10 || got[0].LastOffset != 24 {
		t.Fatalf("second consumer acquired %+v, want 10-24 (stopping at the high watermark)", got)
	}
	if more := l.acquire("c", 100, 25, 0); len(more) != 0 {
		t.Fatalf("acquired %+v with every record under lock", more)
	}
	if err := l.ack("a", 0, 9, shares.AckAccept, 10); err != nil {
		t.Fatal(err)
	}
	p := l.partition()
	if p.Start != 10 || p.End() != 25 || p.Accepted != 10 || p.Deliveries != 25 {
		t.Fatalf("after accepting 0-9: start %d end %d accepted %d deliveries %d", p.Start, p.End(), p.Accepted, p.Deliveries)
	}
}

func TestShareAckErrorsLeaveTheStateAlone(t *testing.T) {
	l := newShareLog(t, earliest())
	l.acquire("a", 5, 10, 0) // 0-4 to a
	l.acquire("b", 3, 10, 0) // 5-7 to b
	if err := l.ack("a", 0, 0, shares.AckAccept, 1); err != nil {
		t.Fatal(err)
	}
	before := l.stored()
	for _, c := range []struct {
		name        string
		member      string
		first, last int64
		nowMs       int64
		code        protocol.Code
	}{
		{"never acquired", "a", 8, 9, 1, protocol.InvalidRecordState},
		{"beyond the log", "a", 3, 1 << 40, 1, protocol.InvalidRecordState},
		{"already accepted", "a", 0, 1, 1, protocol.InvalidRecordState},
		{"another consumer's", "a", 4, 5, 1, protocol.InvalidRecordState},
		{"lock expired", "a", 1, 2, 1000, protocol.InvalidRecordState},
		{"empty range", "a", 2, 1, 1, protocol.InvalidRequest},
	} {
		err := l.ack(c.member, c.first, c.last, shares.AckAccept, c.nowMs)
		if protocol.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
		if after := l.stored(); after != before {
			t.Fatalf("%s changed the state:\n%s\n%s", c.name, before, after)
		}
	}
	// Twice in one request: refused as a whole.
	res := l.do(Command{NowMs: 1, Ack: &shares.AckRequest{MemberID: "a", Acks: []shares.Ack{
		{Topic: "t", FirstOffset: 1, LastOffset: 2, Type: shares.AckAccept}, {Topic: "t", FirstOffset: 2, LastOffset: 2, Type: shares.AckReject}}}})
	if protocol.Code(res.Share.Acks[0].ErrorCode) != protocol.InvalidRequest || l.stored() != before {
		t.Fatalf("an offset acknowledged twice in one request: %+v", res.Share.Acks)
	}
	// A partition the group never read.
	res = l.do(Command{NowMs: 1, Ack: &shares.AckRequest{MemberID: "a", Acks: []shares.Ack{{Topic: "u", FirstOffset: 0, LastOffset: 0, Type: shares.AckAccept}}}})
	if protocol.Code(res.Share.Acks[0].ErrorCode) != protocol.InvalidRecordState {
		t.Fatalf("acknowledging a partition not in flight: %+v", res.Share.Acks)
	}
	// A group that does not exist.
	if res := l.do(Command{Group: "nope", Ack: &shares.AckRequest{MemberID: "a"}}); protocol.CodeOf(res.Err) != protocol.GroupIDNotFound {
		t.Fatalf("acknowledging in a missing group: %v", res.Err)
	}
}

func TestShareReleaseRedeliversAndTheLimitArchives(t *testing.T) {
	l := newShareLog(t, earliest()) // delivery limit 3
	for delivery := int16(1); delivery <= 3; delivery++ {
		got := l.acquire("a", 1, 1, 0)
		if len(got) != 1 || got[0].DeliveryCount != delivery {
			t.Fatalf("delivery %d: acquired %+v", delivery, got)
		}
		if err := l.ack("a", 0, 0, shares.AckRelease, 0); err != nil {
			t.Fatal(err)
		}
	}
	p := l.partition()
	if p.Start != 1 || p.Archived != 1 || p.Accepted != 0 {
		t.Fatalf("after 3 deliveries released: start %d archived %d accepted %d; want the record archived", p.Start, p.Archived, p.Accepted)
	}
	if got := l.acquire("a", 1, 1, 0); len(got) != 0 {
		t.Fatalf("an archived record was delivered again: %+v", got)
	}
}

func TestShareExpiredLockGoesToAnotherConsumer(t *testing.T) {
	l := newShareLog(t, earliest()) // lock 1 s
	l.acquire("a", 5, 5, 0)
	if got := l.acquire("b", 5, 5, 999); len(got) != 0 {
		t.Fatalf("records under a live lock went to another consumer: %+v", got)
	}
	got := l.acquire("b", 5, 5, 1000)
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 4 || got[0].DeliveryCount != 2 {
		t.Fatalf("after the lock expired b acquired %+v, want 0-4 at delivery 2", got)
	}
	if err := l.ack("a", 0, 4, shares.AckAccept, 1001); protocol.CodeOf(err) != protocol.InvalidRecordState {
		t.Fatalf("the first consumer acknowledged records it lost: %v", err)
	}
	if err := l.ack("b", 0, 4, shares.AckAccept, 1001); err != nil {
		t.Fatal(err)
	}
	// A lock that expires at the delivery limit archives the record.
	l.acquire("a", 1, 6, 2000) // 5, delivery 1
	l.acquire("a", 1, 6, 3000) // 5, delivery 2
	l.acquire("a", 1, 6, 4000) // 5, delivery 3
	if got := l.acquire("a", 1, 6, 5000); len(got) != 0 {
		t.Fatalf("a record past its delivery limit was delivered: %+v", got)
	}
	if p := l.partition(); p.Archived != 1 || p.Start != 6 {
		t.Fatalf("archived %d, start %d; want 1 and 6", p.Archived, p.Start)
	}
}

func TestShareLeaveWindowAndReset(t *testing.T) {
	l := newShareLog(t, earliest()) // 100 record locks
	got := l.acquire("a", 500, 1000, 0)
	if len(got) != 1 || got[0].LastOffset != 99 {
		t.Fatalf("acquired %+v, want 0-99 (the in-flight window)", got)
	}
	if got := l.acquire("b", 10, 1000, 0); len(got) != 0 {
		t.Fatalf("acquired %+v past the in-flight window", got)
	}
	if res := l.do(Command{NowMs: 0, Reset: &Reset{Topic: "t", Partitions: []shares.PartitionReset{{Offset: 500}}}}); protocol.CodeOf(res.Err) != protocol.NonEmptyGroup {
		t.Fatalf("reset with records under lock: %v", res.Err)
	}
	if res := l.do(Command{Delete: true}); protocol.CodeOf(res.Err) != protocol.NonEmptyGroup {
		t.Fatalf("delete with records under lock: %v", res.Err)
	}
	if res := l.do(Command{Leave: "a"}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := l.acquire("b", 10, 1000, 0); len(got) != 1 || got[0].FirstOffset != 0 || got[0].DeliveryCount != 2 {
		t.Fatalf("after a left, b acquired %+v; want its records from 0 at delivery 2", got)
	}
	l.do(Command{Leave: "b"})
	if res := l.do(Command{Reset: &Reset{Topic: "t", Partitions: []shares.PartitionReset{{Offset: 500}}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := l.acquire("b", 1, 1000, 0); len(got) != 1 || got[0].FirstOffset != 500 || got[0].DeliveryCount != 1 {
		t.Fatalf("after a reset to 500 b acquired %+v", got)
	}
	// Retention deleted records up to 700: they are skipped.
	l.do(Command{Leave: "b"})
	res := l.do(Command{Acquire: &Acquire{MemberID: "c", Topic: "t", Max: 1, Partitions: []Bounds{{LogStart: 700, HighWatermark: 1000}}}})
	if got := res.Share.Acquire.Acquired; len(got) != 1 || got[0].FirstOffset != 700 {
		t.Fatalf("with the log starting at 700: acquired %+v", got)
	}
	l.do(Command{Leave: "c"})
	if res := l.do(Command{Delete: true}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, ok := l.group("q"); ok {
		t.Fatal("the deleted group is still there")
	}
}

// TestShareResetDropsATopic: a reset with Drop removes the group's state of
// the topic's partitions, in memory and in the state file (the other
// topics' stay), refused while records of the topic are under lock; the
// next acquisition starts the partition again from the auto offset reset.
func TestShareResetDropsATopic(t *testing.T) {
	l := openShareLog(t)
	cfg := earliest()
	l.do(Command{Config: &cfg})
	l.acquire("a", 10, 50, 0)
	if err := l.ack("a", 0, 9, shares.AckAccept, 1); err != nil {
		t.Fatal(err)
	}
	other := l.do(Command{NowMs: 1, Acquire: &Acquire{MemberID: "a", Topic: "u", Max: 5, Partitions: []Bounds{{Partition: 2, HighWatermark: 9}}}})
	if other.Err != nil || len(other.Share.Acquire.Acquired) != 1 {
		t.Fatalf("acquire on u: %+v", other)
	}
	if res := l.do(Command{NowMs: 1, Reset: &Reset{Topic: "u", Drop: true}}); protocol.CodeOf(res.Err) != protocol.NonEmptyGroup {
		t.Fatalf("dropping u with records under lock: %v", res.Err)
	}
	if res := l.do(Command{NowMs: 1, Reset: &Reset{Topic: "t", Drop: true, Partitions: []shares.PartitionReset{{Offset: 3}}}}); protocol.CodeOf(res.Err) != protocol.InvalidRequest {
		t.Fatalf("a drop with offsets: %v", res.Err)
	}
	if res := l.do(Command{NowMs: 1, Reset: &Reset{Topic: "t", Drop: true}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	check := func(when string) {
		t.Helper()
		g, _ := l.group("q")
		if g.Partitions["t/0"] != nil || g.Partitions["u/2"] == nil {
			t.Fatalf("%s: partitions %v, want u-2 alone", when, slices.Collect(maps.Keys(g.Partitions)))
		}
	}
	check("after the drop")
	l.restart()
	check("after a restart")
	if got := l.acquire("b", 100, 50, 2); len(got) != 1 || got[0].FirstOffset != 0 || got[0].DeliveryCount != 1 {
		t.Fatalf("after the drop b acquired %+v; want t-0 again from 0 (earliest), first delivery", got)
	}
}

func TestShareDeadLetters(t *testing.T) {
	cfg := earliest()
	cfg.DeadLetterTopic = "dlt"
	l := newShareLog(t, cfg) // delivery limit 3
	l.acquire("a", 4, 4, 0)
	res := l.do(Command{NowMs: 1, Ack: &shares.AckRequest{MemberID: "a", Acks: []shares.Ack{
		{Topic: "t", FirstOffset: 0, LastOffset: 0, Type: shares.AckReject, Reason: "bad json"},
		{Topic: "t", FirstOffset: 1, LastOffset: 1, Type: shares.AckAccept},
		{Topic: "t", FirstOffset: 2, LastOffset: 3, Type: shares.AckReject}}}})
	if res.Share.Acks[0].ErrorCode != 0 {
		t.Fatal(res.Share.Acks[0])
	}
	p := l.partition()
	if p.Start != 0 || p.Archived != 0 || p.Records[0].State != Archiving || p.ReasonOf(0) != "bad json" || p.ReasonOf(2) != "rejected by the consumer" {
		t.Fatalf("rejected records with a dead-letter topic: start %d archived %d records %+v", p.Start, p.Archived, p.Records)
	}
	if st := p.State(4, 1); st.DeadLetterPending != 3 || st.Lag != 3 {
		t.Fatalf("state %+v: want 3 records waiting for the dead-letter topic", st)
	}
	if res := l.do(Command{NowMs: 1, Delete: true}); protocol.CodeOf(res.Err) != protocol.NonEmptyGroup {
		t.Fatalf("delete with records waiting for the dead-letter topic: %v", res.Err)
	}
	begin := func(max int32) *DeadLetterBatch {
		t.Helper()
		res := l.do(Command{DeadLetterBegin: &DeadLetterBegin{Topic: "t", ProducerID: 77, Target: 1, Max: max}})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res.Share.DeadLetter
	}
	b := begin(2)
	if b == nil || b.Topic != "dlt" || b.Partition != 1 || b.Seq != 0 || len(b.Offsets) != 2 || b.Offsets[0] != 0 || b.Offsets[1] != 2 {
		t.Fatalf("first batch %+v", b)
	}
	if again := begin(5); again == nil || again.Seq != 0 || len(again.Offsets) != 2 {
		t.Fatalf("a second begin while a batch is pending fixed %+v; want the pending batch again", again)
	}
	if res := l.do(Command{DeadLetterDone: &DeadLetterDone{Topic: "t", Seq: 9}}); res.Err == nil {
		t.Fatal("a done of a batch that is not pending was accepted")
	}
	if res := l.do(Command{DeadLetterDone: &DeadLetterDone{Topic: "t", Seq: 0}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	p = l.partition()
	if p.Start != 3 || p.Archived != 2 || p.DeadLetters.ProducerID != 77 || p.DeadLetters.NextSeq != 2 {
		t.Fatalf("after the first batch: start %d archived %d writer %+v", p.Start, p.Archived, p.DeadLetters)
	}
	if b := begin(5); b == nil || b.Seq != 2 || len(b.Offsets) != 1 || b.Offsets[0] != 3 {
		t.Fatalf("second batch %+v", b)
	}
	l.do(Command{DeadLetterDone: &DeadLetterDone{Topic: "t", Seq: 2}})
	if p := l.partition(); p.Start != 4 || p.Archived != 3 {
		t.Fatalf("after the second batch: start %d archived %d", p.Start, p.Archived)
	}
	if b := begin(5); b != nil {
		t.Fatalf("a batch %+v with nothing to write", b)
	}
	// The delivery limit archives through the dead-letter topic too, and
	// a group that drops its dead-letter topic archives what waited for it.
	for i := range 3 {
		l.acquire("a", 1, 5, int64(10_000*i))
		l.ack("a", 4, 4, shares.AckRelease, int64(10_000*i))
	}
	if p := l.partition(); p.Records[0].State != Archiving || p.ReasonOf(p.Start) != "delivery count limit 3 reached" {
		t.Fatalf("a record past the limit: %+v, reason %q", p.Records[0], p.ReasonOf(p.Start))
	}
	cfg.DeadLetterTopic = ""
	l.do(Command{Config: &cfg})
	if p := l.partition(); p.Start != 5 || p.Archived != 4 {
		t.Fatalf("after the dead-letter topic was dropped: start %d archived %d", p.Start, p.Archived)
	}
}

func TestShareDeferredRecordsWaitWithoutCounting(t *testing.T) {
	l := newShareLog(t, earliest())
	l.acquire("a", 3, 3, 0) // 0-2 at delivery 1
	res := l.do(Command{NowMs: 10, Ack: &shares.AckRequest{MemberID: "a", Acks: []shares.Ack{
		{Topic: "t", FirstOffset: 0, LastOffset: 1, Type: shares.AckDefer, NotBeforeMs: 900}}}})
	if res.Share.Acks[0].ErrorCode != 0 {
		t.Fatal(res.Share.Acks[0])
	}
	if st := l.partition().State(5, 10); st.Delayed != 2 || st.Available != 0 || st.Acquired != 1 || st.Deliveries != 1 {
		t.Fatalf("after deferring 0-1: %+v", st)
	}
	// Before their time the delayed records are passed over, not waited for.
	got := l.acquire("b", 10, 5, 500)
	if len(got) != 1 || got[0].FirstOffset != 3 || got[0].LastOffset != 4 {
		t.Fatalf("before the delivery time b acquired %+v, want 3-4 only", got)
	}
	got = l.acquire("b", 10, 5, 900)
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 1 || got[0].DeliveryCount != 1 {
		t.Fatalf("at the delivery time b acquired %+v, want 0-1 at delivery 1", got)
	}
}

func TestShareRenewExtendsTheLock(t *testing.T) {
	l := newShareLog(t, earliest()) // lock 1 s
	l.acquire("a", 2, 2, 0)
	if err := l.ack("a", 0, 0, shares.AckRenew, 900); err != nil {
		t.Fatal(err)
	}
	if got := l.acquire("b", 2, 2, 1500); len(got) != 1 || got[0].FirstOffset != 1 {
		t.Fatalf("at 1.5 s b acquired %+v: want only offset 1, whose lock was not renewed", got)
	}
	if err := l.ack("a", 0, 0, shares.AckAccept, 1800); err != nil {
		t.Fatalf("accepting the renewed record within its new lock: %v", err)
	}
	if err := l.ack("a", 1, 1, shares.AckRenew, 1800); protocol.CodeOf(err) != protocol.InvalidRecordState {
		t.Fatalf("renewing a record another consumer took: %v", err)
	}
}

// TestShareExpiredLockAtTheLimitGoesToTheDeadLetterTopic: a lock that
// expires at the delivery limit, in a group with a dead-letter topic,
// makes the next acquisition (which takes nothing else) set the record
// aside for the topic, and that change is kept: the record does not stay
// acquired-and-expired for ever, holding the start offset back.
func TestShareExpiredLockAtTheLimitGoesToTheDeadLetterTopic(t *testing.T) {
	cfg := earliest() // delivery limit 3, lock 1 s
	cfg.DeadLetterTopic = "dlt"
	l := newShareLog(t, cfg)
	for i := range int64(3) {
		if got := l.acquire("a", 1, 1, i*1000); len(got) != 1 || got[0].DeliveryCount != int16(i+1) {
			t.Fatalf("delivery %d: %+v", i+1, got)
		}
	}
	if got := l.acquire("b", 1, 1, 3000); len(got) != 0 {
		t.Fatalf("a record past its delivery limit was delivered: %+v", got)
	}
	p := l.partition()
	if st := p.State(1, 3000); p.Records[0].State != Archiving || st.DeadLetterPending != 1 || st.Available != 0 {
		t.Fatalf("after the last lock expired: record %+v, state %+v; want it waiting for the dead-letter topic", p.Records[0], st)
	}
}

// TestShareMemberNamesStayBounded: a partition read by many members in
// turn keeps a bounded table of their names; a member holding records
// keeps them across the table's pruning and across a restart, and only
// it can acknowledge them.
func TestShareMemberNamesStayBounded(t *testing.T) {
	cfg := earliest()
	cfg.MaxRecordLocks = 1000 // keeper's record holds the window's start
	l := newShareLog(t, cfg)
	if got := l.acquire("keeper", 1, 1000, 0); len(got) != 1 || got[0].FirstOffset != 0 {
		t.Fatalf("keeper's acquisition: %+v", got)
	}
	for i := range 300 {
		m := "passer-" + strconv.Itoa(i)
		got := l.acquire(m, 1, 1000, 0)
		if len(got) != 1 {
			t.Fatalf("%s's acquisition: %+v", m, got)
		}
		if err := l.ack(m, got[0].FirstOffset, got[0].LastOffset, shares.AckAccept, 0); err != nil {
			t.Fatalf("%s's acknowledgement: %v", m, err)
		}
	}
	p := l.partition()
	if len(p.Members) > maxMemberNames+1 {
		t.Fatalf("%d member names kept after 301 members, want at most %d", len(p.Members), maxMemberNames+1)
	}
	if p.MemberOf(p.Records[0]) != "keeper" || p.Start != 0 {
		t.Fatalf("offset 0 is held by %q (start %d), want keeper", p.MemberOf(p.Records[0]), p.Start)
	}
	l.restart()
	if err := l.ack("passer-0", 0, 0, shares.AckAccept, 0); !errors.Is(err, &protocol.Error{Code: protocol.InvalidRecordState}) {
		t.Fatalf("another member's acknowledgement of keeper's record after a restart: %v, want INVALID_RECORD_STATE", err)
	}
	if err := l.ack("keeper", 0, 0, shares.AckAccept, 0); err != nil {
		t.Fatalf("keeper's acknowledgement after a restart: %v", err)
	}
	if p := l.partition(); p.Start != 301 || p.Accepted != 301 {
		t.Fatalf("after keeper's acknowledgement: start %d, %d accepted; want 301, 301", p.Start, p.Accepted)
	}
}
