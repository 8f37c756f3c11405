package txncoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator/coordtest"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// markerLog records the markers the coordinator writes (the storage nodes
// cannot run inside this module's tests; the end-to-end tests write real
// ones). While failing is set every write fails, as with a partition whose
// leader is gone; while hold is set, writes wait for it to close.
type markerLog struct {
	mu      sync.Mutex
	markers []marker
	calls   int // WriteMarkers calls
	hold    chan struct{}
	failing atomic.Bool
}

type marker struct {
	tp     groups.TP
	pid    int64
	epoch  int16
	commit bool
}

func (m *markerLog) WriteMarkers(_ context.Context, ms []Marker) []error {
	errs := make([]error, len(ms))
	if m.failing.Load() {
		for i, w := range ms {
			errs[i] = protocol.NotLeaderOrFollower.Err("no leader for %s", w.TP)
		}
		return errs
	}
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil {
		<-hold
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	for _, w := range ms {
		m.markers = append(m.markers, marker{w.TP, w.ProducerID, w.Epoch, w.Commit})
	}
	return errs
}

func (m *markerLog) written() []marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.markers)
}

// counterIDs hands out producer ids 1000, 1001, ...
type counterIDs struct{ next atomic.Int64 }

func (c *counterIDs) NewProducerID(context.Context) (int64, error) {
	return 1000 + c.next.Add(1) - 1, nil
}

// startTxns runs a group coordinator (coordtest.Start) with a transaction
// coordinator over markers.
func startTxns(t *testing.T, dir string, markers *markerLog, ids *counterIDs) (*Coordinator, *fsm.FSM, func()) {
	t.Helper()
	c, f, stop := coordtest.Start(t, dir, func(f *fsm.FSM, n *raftgroup.Node, log *slog.Logger) *coordinator.Coordinator {
		return coordinator.New(f, n, coordtest.Topics{"t": 4}, coordinator.DefaultSettings(), log)
	})
	s := DefaultSettings()
	s.CheckInterval = 20 * time.Millisecond
	x := New(c, markers, ids, s)
	x.Start()
	var once sync.Once
	stopAll := func() { once.Do(func() { x.Stop(); stop() }) }
	t.Cleanup(stopAll)
	return x, f, stopAll
}

// waitState waits until id's transaction is in state.
func waitState(t *testing.T, f *fsm.FSM, id, state string) *fsm.Txn {
	t.Helper()
	var tx *fsm.Txn
	testkit.Eventually(t, 10*time.Second, func() error {
		var err error
		if tx, _, err = f.Txn(id); err != nil || tx == nil || tx.State != state {
			return fmt.Errorf("transaction %s: %+v, %v; want state %s", id, tx, err, state)
		}
		return nil
	})
	return tx
}

var bg = context.Background()

func isCode(err error, c protocol.Code) bool { return errors.Is(err, &protocol.Error{Code: c}) }

// TestTxnCommitWritesMarkersAndOffsets: a transaction's partitions get a
// commit marker each, and its offsets become the group's committed offsets
// only when it completes.
func TestTxnCommitWritesMarkersAndOffsets(t *testing.T) {
	markers := &markerLog{}
	x, f, _ := startTxns(t, t.TempDir(), markers, &counterIDs{})
	p, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil || p.ProducerID != 1000 || p.ProducerEpoch != 0 {
		t.Fatalf("init: %+v, %v", p, err)
	}
	parts := []groups.TP{{Topic: "out", Partition: 1}, {Topic: "out", Partition: 0}}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: parts[:1], VerifyOnly: true}); err != nil {
		t.Fatalf("verify of an added partition: %v", err)
	}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: []groups.TP{{Topic: "out", Partition: 3}}, VerifyOnly: true}); !isCode(err, protocol.InvalidTxnState) {
		t.Fatalf("verify of a partition not added: %v", err)
	}
	if err := x.CommitOffsets(bg, "tx", txns.CommitOffsetsRequest{Producer: p, Group: "g", Offsets: []groups.Offset{{Topic: "t", Partition: 2, Offset: 9}}}); !isCode(err, protocol.InvalidTxnState) {
		t.Fatalf("offsets of a group not added: %v", err)
	}
	if err := x.AddGroup(bg, "tx", txns.AddGroupRequest{Producer: p, Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if err := x.CommitOffsets(bg, "tx", txns.CommitOffsetsRequest{Producer: p, Group: "g", Offsets: []groups.Offset{{Topic: "t", Partition: 2, Offset: 9}}}); err != nil {
		t.Fatal(err)
	}
	if offs, _ := f.Offsets("g", "t"); len(offs) != 0 {
		t.Fatalf("offsets visible inside the transaction: %v", offs)
	}
	d, err := x.Describe("tx")
	if err != nil || d.State != fsm.TxnOngoing || len(d.Partitions) != 2 || d.StartMs <= 0 {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	end, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true})
	if err != nil || end != p {
		t.Fatalf("end: %+v, %v", end, err)
	}
	waitState(t, f, "tx", fsm.TxnCompleteCommit)
	got := markers.written()
	slices.SortFunc(got, func(a, b marker) int { return int(a.tp.Partition - b.tp.Partition) })
	want := []marker{{parts[1], 1000, 0, true}, {parts[0], 1000, 0, true}}
	if !slices.Equal(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	if offs, _ := f.Offsets("g", "t"); len(offs) != 1 || offs[0].Offset != 9 {
		t.Fatalf("offsets after the commit: %v", offs)
	}
	// A retried End of the completed commit is answered the same; an abort
	// of it is refused.
	if again, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true}); err != nil || again != p {
		t.Fatalf("retried end: %+v, %v", again, err)
	}
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: p}); !isCode(err, protocol.InvalidTxnState) {
		t.Fatalf("abort after the commit: %v", err)
	}
	// An aborted transaction's offsets are dropped.
	if err := x.AddGroup(bg, "tx", txns.AddGroupRequest{Producer: p, Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if err := x.CommitOffsets(bg, "tx", txns.CommitOffsetsRequest{Producer: p, Group: "g", Offsets: []groups.Offset{{Topic: "t", Partition: 2, Offset: 50}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: p}); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, "tx", fsm.TxnCompleteAbort)
	if offs, _ := f.Offsets("g", "t"); len(offs) != 1 || offs[0].Offset != 9 {
		t.Fatalf("offsets after the abort: %v", offs)
	}
}

// TestTxnSessionsFenceEachOther: a new session of the id bumps the epoch;
// the old session's requests are PRODUCER_FENCED; a transaction the old
// session left open is aborted with markers of the new epoch, and the new
// session's Init is CONCURRENT_TRANSACTIONS until that is done.
func TestTxnSessionsFenceEachOther(t *testing.T) {
	markers := &markerLog{}
	x, f, _ := startTxns(t, t.TempDir(), markers, &counterIDs{})
	init := txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1}
	old, err := x.Init(bg, "tx", init)
	if err != nil {
		t.Fatal(err)
	}
	tp := groups.TP{Topic: "out", Partition: 0}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: old, Partitions: []groups.TP{tp}}); err != nil {
		t.Fatal(err)
	}
	markers.failing.Store(true) // hold the abort in PrepareAbort
	if _, err := x.Init(bg, "tx", init); !isCode(err, protocol.ConcurrentTransactions) {
		t.Fatalf("init over an open transaction: %v", err)
	}
	waitState(t, f, "tx", fsm.TxnPrepareAbort)
	if _, err := x.Init(bg, "tx", init); !isCode(err, protocol.ConcurrentTransactions) {
		t.Fatalf("init while the abort completes: %v", err)
	}
	markers.failing.Store(false)
	waitState(t, f, "tx", fsm.TxnCompleteAbort)
	if got := markers.written(); !slices.Equal(got, []marker{{tp, old.ProducerID, old.ProducerEpoch + 1, false}}) {
		t.Fatalf("abort markers %v", got)
	}
	cur, err := x.Init(bg, "tx", init)
	if err != nil || cur.ProducerID != old.ProducerID || cur.ProducerEpoch != old.ProducerEpoch+2 {
		t.Fatalf("new session: %+v, %v", cur, err)
	}
	for name, err := range map[string]error{
		"add partitions": x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: old, Partitions: []groups.TP{tp}}),
		"add group":      x.AddGroup(bg, "tx", txns.AddGroupRequest{Producer: old, Group: "g"}),
	} {
		if !isCode(err, protocol.ProducerFenced) {
			t.Errorf("%s from the fenced session: %v", name, err)
		}
	}
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: old, Commit: true}); !isCode(err, protocol.ProducerFenced) {
		t.Errorf("end from the fenced session: %v", err)
	}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: txns.Producer{ProducerID: 77}, Partitions: []groups.TP{tp}}); !isCode(err, protocol.InvalidProducerIDMapping) {
		t.Errorf("another producer id: %v", err)
	}
	if _, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: old.ProducerID, ProducerEpoch: old.ProducerEpoch}); !isCode(err, protocol.ProducerFenced) {
		t.Errorf("KIP-360 init from the fenced session: %v", err)
	}
	if _, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: int32(time.Hour.Milliseconds()), ProducerID: -1, ProducerEpoch: -1}); !isCode(err, protocol.InvalidTransactionTimeout) {
		t.Errorf("timeout above the maximum: %v", err)
	}
	if _, err := x.Init(bg, "", init); !isCode(err, protocol.InvalidRequest) {
		t.Errorf("empty transactional id: %v", err)
	}
}

// TestTxnVersion2BumpsEpoch: under transaction version 2 each End answers
// the next epoch and the markers carry it; a retry of the End with the
// previous epoch gets the same answer.
func TestTxnVersion2BumpsEpoch(t *testing.T) {
	markers := &markerLog{}
	x, f, _ := startTxns(t, t.TempDir(), markers, &counterIDs{})
	p, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	tp := groups.TP{Topic: "out", Partition: 2}
	for round := range 3 {
		if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: []groups.TP{tp}, V2: true}); err != nil {
			t.Fatal(err)
		}
		next, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true, V2: true})
		if err != nil || next.ProducerID != p.ProducerID || next.ProducerEpoch != p.ProducerEpoch+1 {
			t.Fatalf("round %d: end %+v, %v", round, next, err)
		}
		if again, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true, V2: true}); err != nil || again != next {
			t.Fatalf("round %d: retried end %+v, %v", round, again, err)
		}
		waitState(t, f, "tx", fsm.TxnCompleteCommit)
		if got := markers.written(); got[len(got)-1] != (marker{tp, p.ProducerID, next.ProducerEpoch, true}) {
			t.Fatalf("round %d: marker %v", round, got[len(got)-1])
		}
		p = next
	}
	// An abort of a transaction that wrote nothing succeeds and bumps the
	// epoch; a commit of one is refused.
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true, V2: true}); !isCode(err, protocol.InvalidTxnState) {
		t.Fatalf("commit of an empty transaction: %v", err)
	}
	next, err := x.End(bg, "tx", txns.EndRequest{Producer: p, V2: true})
	if err != nil || next.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("abort of an empty transaction: %+v, %v", next, err)
	}
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: p, V2: true}); err != nil {
		t.Fatalf("retried abort of an empty transaction: %v", err)
	}
}

// TestTxnNextTransactionCompletesPrevious: a request that begins the
// producer's next transaction while the previous one's markers are being
// written waits for them, and then one Raft entry completes the previous
// transaction (committing its offsets) and begins the next.
func TestTxnNextTransactionCompletesPrevious(t *testing.T) {
	x, f, markers, p := openTxn(t)
	tp, tp2 := groups.TP{Topic: "out", Partition: 0}, groups.TP{Topic: "out", Partition: 1}
	if err := x.AddGroup(bg, "tx", txns.AddGroupRequest{Producer: p, Group: "g", V2: true}); err != nil {
		t.Fatal(err)
	}
	if err := x.CommitOffsets(bg, "tx", txns.CommitOffsetsRequest{Producer: p, Group: "g", Offsets: []groups.Offset{{Topic: "in", Partition: 0, Offset: 5}}}); err != nil {
		t.Fatal(err)
	}
	next, added, release := endWithNextWaiting(t, x, markers, p)
	prepared := f.AppliedIndex()
	release()
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	tx, _, err := f.Txn("tx")
	if err != nil || tx.State != fsm.TxnOngoing || !slices.Equal(tx.Partitions, []groups.TP{tp2}) || tx.Epoch != next.ProducerEpoch || len(tx.Offsets) != 0 {
		t.Fatalf("after the next transaction began: %+v, %v", tx, err)
	}
	if n := f.AppliedIndex() - prepared; n != 1 {
		t.Fatalf("%d Raft entries after the Prepare entry, want 1 (completing and beginning together)", n)
	}
	if offs, _ := f.Offsets("g", "in"); len(offs) != 1 || offs[0].Offset != 5 {
		t.Fatalf("the previous transaction's offsets: %v", offs)
	}
	if got := markers.written(); len(got) != 1 || got[0] != (marker{tp, p.ProducerID, next.ProducerEpoch, true}) {
		t.Fatalf("markers %v", got)
	}
	if n := x.Counts().Committed.Load(); n != 1 {
		t.Fatalf("%d commits counted", n)
	}
	// Ended without a waiting request, a transaction completes by itself.
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: next, V2: true}); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, "tx", fsm.TxnCompleteAbort)
}

// TestTxnEpochRunsOut: a version 2 session whose epoch reaches the
// largest moves on to a new producer id at epoch 0; the markers of the
// transaction that spent the id carry the largest epoch, above every write
// of it.
func TestTxnEpochRunsOut(t *testing.T) {
	markers := &markerLog{}
	x, f, _ := startTxns(t, t.TempDir(), markers, &counterIDs{})
	p, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Two transactions before the end of the epochs.
	cur, _, _ := f.Txn("tx")
	n := cur.Clone()
	n.Epoch = math.MaxInt16 - 2
	unlock := x.lock("tx")
	err = x.put(bg, cur.Version, n, false)
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	p.ProducerEpoch = math.MaxInt16 - 2
	tp := groups.TP{Topic: "out", Partition: 0}
	for round, want := range []txns.Producer{{ProducerID: 1000, ProducerEpoch: math.MaxInt16 - 1}, {ProducerID: 1001, ProducerEpoch: 0}, {ProducerID: 1001, ProducerEpoch: 1}} {
		if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: []groups.TP{tp}, V2: true}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		next, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true, V2: true})
		if err != nil || next != want {
			t.Fatalf("round %d: end %+v, %v; want %+v", round, next, err, want)
		}
		waitState(t, f, "tx", fsm.TxnCompleteCommit)
		got := markers.written()
		wantEpoch := next.ProducerEpoch
		if next.ProducerID != p.ProducerID {
			wantEpoch = math.MaxInt16
		}
		if m := got[len(got)-1]; m.pid != p.ProducerID || m.epoch != wantEpoch {
			t.Fatalf("round %d: marker %+v, want producer %d epoch %d", round, m, p.ProducerID, wantEpoch)
		}
		p = next
	}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: txns.Producer{ProducerID: 1000, ProducerEpoch: math.MaxInt16 - 1}, Partitions: []groups.TP{tp}, V2: true}); !isCode(err, protocol.InvalidProducerIDMapping) {
		t.Fatalf("the spent producer id: %v", err)
	}
}

// TestTxnFencedProducerCannotRetryEnd: an End retried with the epoch
// before the last bump is answered again only when that bump was the
// producer's own End; after a new session aborted its transaction, the old
// producer is fenced.
func TestTxnFencedProducerCannotRetryEnd(t *testing.T) {
	markers := &markerLog{}
	x, f, _ := startTxns(t, t.TempDir(), markers, &counterIDs{})
	old, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	tp := groups.TP{Topic: "out", Partition: 0}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: old, Partitions: []groups.TP{tp}, V2: true}); err != nil {
		t.Fatal(err)
	}
	// A new session aborts the old one's transaction (epoch e -> e+1).
	if _, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1}); !isCode(err, protocol.ConcurrentTransactions) {
		t.Fatalf("init over an open transaction: %v", err)
	}
	waitState(t, f, "tx", fsm.TxnCompleteAbort)
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: old, V2: true}); !isCode(err, protocol.ProducerFenced) {
		t.Fatalf("the old producer's abort after the new session's: %v, want PRODUCER_FENCED", err)
	}
}

// TestTxnTimeoutAborts: a transaction open past its timeout is aborted
// with a bumped epoch, fencing its producer. It runs in a synctest bubble:
// the timeout and the check loop's ticks pass on the bubble's clock.
func TestTxnTimeoutAborts(t *testing.T) { synctest.Test(t, testTxnTimeoutAborts) }

func testTxnTimeoutAborts(t *testing.T) {
	markers := &markerLog{}
	x, f, _ := startTxns(t, t.TempDir(), markers, &counterIDs{})
	p, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 100, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	tp := groups.TP{Topic: "out", Partition: 0}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: []groups.TP{tp}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, "tx", fsm.TxnCompleteAbort)
	if got := markers.written(); !slices.Equal(got, []marker{{tp, p.ProducerID, p.ProducerEpoch + 1, false}}) {
		t.Fatalf("markers %v", got)
	}
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true}); !isCode(err, protocol.ProducerFenced) {
		t.Fatalf("commit after the timeout: %v", err)
	}
}

// TestTxnPreparedCommitSurvivesRestart: a coordinator that stops after the
// commit decision but before any marker is written leaves the transaction
// in PrepareCommit; the next one to lead commits it, offsets included.
func TestTxnPreparedCommitSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	markers := &markerLog{}
	markers.failing.Store(true)
	x, f, stop := startTxns(t, dir, markers, &counterIDs{})
	p, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	tp := groups.TP{Topic: "out", Partition: 0}
	for _, err := range []error{
		x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: []groups.TP{tp}}),
		x.AddGroup(bg, "tx", txns.AddGroupRequest{Producer: p, Group: "g"}),
		x.CommitOffsets(bg, "tx", txns.CommitOffsetsRequest{Producer: p, Group: "g", Offsets: []groups.Offset{{Topic: "t", Partition: 1, Offset: 5}}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true}); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, "tx", fsm.TxnPrepareCommit)
	stop()
	if len(markers.written()) != 0 {
		t.Fatal("a marker was written while failing")
	}
	markers.failing.Store(false)
	_, f2, _ := startTxns(t, dir, markers, &counterIDs{})
	waitState(t, f2, "tx", fsm.TxnCompleteCommit)
	if got := markers.written(); !slices.Equal(got, []marker{{tp, p.ProducerID, p.ProducerEpoch, true}}) {
		t.Fatalf("markers after the restart %v", got)
	}
	if offs, _ := f2.Offsets("g", "t"); len(offs) != 1 || offs[0].Offset != 5 {
		t.Fatalf("offsets after the restart: %v", offs)
	}
}

// TestTxnHandedMarkersAreNotWrittenAgain: markers written and left to the
// request that begins the next transaction are not written again by the
// check loop while that request waits for the id: a marker written again
// after the next transaction's records would end them with the previous
// transaction.
func TestTxnHandedMarkersAreNotWrittenAgain(t *testing.T) {
	x, f, markers, p := openTxn(t)
	_, added, release := endWithNextWaiting(t, x, markers, p)
	prepared, _, err := f.Txn("tx")
	if err != nil {
		t.Fatal(err)
	}
	unlock := x.lock("tx") // the request, woken by the hand-over, waits for the id
	release()
	testkit.WaitFor(t, 10*time.Second, "the markers to be handed over", func() bool { return x.isHanded("tx", prepared.Version) })
	x.check()
	x.mu.Lock()
	_, again := x.completing["tx"]
	x.mu.Unlock()
	unlock()
	if again {
		t.Fatal("the check loop started writing the handed-over markers again")
	}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	if got := markers.written(); len(got) != 1 {
		t.Fatalf("markers %v, want one", got)
	}
	if x.isHanded("tx", prepared.Version) {
		t.Fatal("the hand-over is still recorded after the request completed the transaction")
	}
}

// openTxn starts a transaction coordinator and a transaction of "tx" on
// out-0, of transaction version 2.
func openTxn(t *testing.T) (*Coordinator, *fsm.FSM, *markerLog, txns.Producer) {
	t.Helper()
	markers := &markerLog{}
	x, f, _ := startTxns(t, t.TempDir(), markers, &counterIDs{})
	p, err := x.Init(bg, "tx", txns.InitRequest{TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: p, Partitions: []groups.TP{{Topic: "out", Partition: 0}}, V2: true}); err != nil {
		t.Fatal(err)
	}
	return x, f, markers, p
}

// endWithNextWaiting commits p's transaction with its markers held, and
// returns once the next transaction's AddPartitions (of out-1), whose
// answer comes on added, waits for them; release lets the markers through.
func endWithNextWaiting(t *testing.T, x *Coordinator, markers *markerLog, p txns.Producer) (next txns.Producer, added chan error, release func()) {
	t.Helper()
	hold := make(chan struct{})
	markers.mu.Lock()
	markers.hold = hold
	markers.mu.Unlock()
	next, err := x.End(bg, "tx", txns.EndRequest{Producer: p, Commit: true, V2: true})
	if err != nil {
		t.Fatal(err)
	}
	added = make(chan error, 1)
	go func() {
		added <- x.AddPartitions(bg, "tx", txns.AddPartitionsRequest{Producer: next, Partitions: []groups.TP{{Topic: "out", Partition: 1}}, V2: true})
	}()
	testkit.WaitFor(t, 10*time.Second, "the next transaction's request to wait for the markers", func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		c := x.completing["tx"]
		return c != nil && c.waiters > 0
	})
	return next, added, func() {
		markers.mu.Lock()
		markers.hold = nil
		markers.mu.Unlock()
		close(hold)
	}
}
