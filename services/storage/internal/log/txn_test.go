package log

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

// txnBatch builds a transactional producer's batch: n records from sequence
// seq, keyed k0, k1, ... and valued "<prefix>-<i>".
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, prefix string) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	b.SetProducer(pid, epoch, seq)
	b.SetTransactional(true)
	for i := range n {
		b.Append(record.Record{Timestamp: 1_700_000_000_000, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

func appendTxn(t testing.TB, l *Log, pid int64, epoch int16, seq int32, n int, prefix string) AppendInfo {
	t.Helper()
	info, err := l.Append(txnBatch(t, pid, epoch, seq, n, prefix), 7)
	if err != nil {
		t.Fatalf("transactional append of producer %d: %v", pid, err)
	}
	return info
}

func appendMarker(t testing.TB, l *Log, pid int64, epoch int16, typ record.ControlType) AppendInfo {
	t.Helper()
	info, err := l.AppendMarker(pid, epoch, record.Marker{Type: typ, CoordinatorEpoch: 1}, 7)
	if err != nil {
		t.Fatalf("%v marker of producer %d: %v", typ, pid, err)
	}
	return info
}

// TestTxnLastStableOffsetAndAborts: the LSO stops at the oldest open
// transaction and moves on when its marker comes; aborts are reported for
// the ranges they cover; markers are skipped by readers.
func TestTxnLastStableOffsetAndAborts(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, batch(t, 10, 1))      // offset 0, outside any transaction
	a1 := appendTxn(t, l, 1, 0, 0, 3, "a") // 1..3
	b1 := appendTxn(t, l, 2, 0, 0, 2, "b") // 4..5
	appendProducer(t, l, 3, 0, 0, 1)       // 6: idempotent, not transactional
	appendTxn(t, l, 1, 0, 3, 2, "a")       // 7..8
	l.SetHighWatermark(l.EndOffset())
	if got := l.LastStableOffset(); got != a1.BaseOffset {
		t.Fatalf("LSO %d with producer 1's transaction open from %d", got, a1.BaseOffset)
	}
	if got := l.OpenTxns(); !maps.Equal(got, map[int64]int64{1: a1.BaseOffset, 2: b1.BaseOffset}) {
		t.Fatalf("open transactions %v", got)
	}
	c := appendMarker(t, l, 1, 0, record.ControlCommit) // 9
	l.SetHighWatermark(l.EndOffset())
	if got := l.LastStableOffset(); got != b1.BaseOffset {
		t.Fatalf("LSO %d after producer 1 committed, want producer 2's first offset %d", got, b1.BaseOffset)
	}
	ab := appendMarker(t, l, 2, 0, record.ControlAbort) // 10
	if got, hw := l.LastStableOffset(), l.HighWatermark(); got != hw {
		t.Fatalf("LSO %d with no open transaction, want the high watermark %d", got, hw)
	}
	l.SetHighWatermark(l.EndOffset())
	if got := l.LastStableOffset(); got != l.EndOffset() {
		t.Fatalf("LSO %d, want %d", got, l.EndOffset())
	}
	want := []AbortedTxn{{ProducerID: 2, FirstOffset: b1.BaseOffset, LastOffset: ab.BaseOffset}}
	for _, r := range []struct{ from, to int64 }{{0, 100}, {5, 5}, {0, 4}, {10, 10}} {
		if got := l.AbortedTxns(r.from, r.to); !slices.Equal(got, want) {
			t.Errorf("AbortedTxns(%d, %d) = %v, want %v", r.from, r.to, got, want)
		}
	}
	for _, r := range []struct{ from, to int64 }{{0, 3}, {11, 20}} {
		if got := l.AbortedTxns(r.from, r.to); len(got) != 0 {
			t.Errorf("AbortedTxns(%d, %d) = %v, want none", r.from, r.to, got)
		}
	}
	// Readers skip the markers: 1 + 3 + 2 + 1 + 2 records.
	if recs := readRecords(t, l, 0); len(recs) != 9 || recs[len(recs)-1].Offset != c.BaseOffset-1 {
		t.Fatalf("read %d records, last %+v", len(recs), recs[len(recs)-1])
	}
}

// TestTxnLeaderChecks: what the leader refuses, writing nothing.
func TestTxnLeaderChecks(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	marker, err := record.BuildMarker(1, 0, record.Marker{Type: record.ControlCommit}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Append(marker, 7)
	wantErr(t, err, ErrControlBatch)

	noPID := record.NewBuilder(record.CodecNone)
	noPID.SetTransactional(true)
	noPID.Append(record.Record{Value: []byte("v")})
	b, _ := noPID.Build()
	_, err = l.Append(bytes.Clone(b), 7)
	wantErr(t, err, ErrInvalidProducerBatch)

	appendTxn(t, l, 1, 2, 0, 1, "a")
	_, err = l.Append(producerBatch(t, 1, 2, 1, 1), 7)
	wantErr(t, err, ErrInvalidTxnState)
	// A transactional batch and a plain one of the same producer in one
	// append: the second is outside the transaction the first opened.
	_, err = l.Append(append(txnBatch(t, 5, 0, 0, 1, "x"), producerBatch(t, 5, 0, 1, 1)...), 7)
	wantErr(t, err, ErrInvalidTxnState)

	_, err = l.AppendMarker(1, 1, record.Marker{Type: record.ControlCommit}, 7)
	wantErr(t, err, ErrInvalidProducerEpoch)
	_, err = l.AppendMarker(-1, 0, record.Marker{Type: record.ControlCommit}, 7)
	wantErr(t, err, ErrInvalidProducerBatch)
	_, err = l.AppendMarker(1, 2, record.Marker{Type: record.ControlCommit}, 6)
	wantErr(t, err, ErrStaleEpoch)
	if end := l.EndOffset(); end != 1 {
		t.Fatalf("log end offset %d after refusals, want 1", end)
	}
	appendMarker(t, l, 1, 2, record.ControlCommit)
	appendProducer(t, l, 1, 2, 1, 1) // the transaction ended: plain batches again
	// A marker for a producer with no open transaction changes nothing.
	appendMarker(t, l, 9, 0, record.ControlAbort)
	if got := l.AbortedTxns(0, 100); len(got) != 0 {
		t.Fatalf("aborted %v after a marker with no transaction", got)
	}
}

// txnEvent is one append of txnWorkload: a transactional batch from first
// on, or a marker (typ) at first.
type txnEvent struct {
	pid    int64
	first  int64
	marker bool
	typ    record.ControlType
}

// txnWorkload writes open, committed and aborted transactions across
// several segments and returns what it appended.
func txnWorkload(t *testing.T, l *Log) []txnEvent {
	t.Helper()
	var events []txnEvent
	seqs := map[int64]int32{}
	for round := range 12 {
		for pid := int64(1); pid <= 3; pid++ {
			info := appendTxn(t, l, pid, 0, seqs[pid], 4, fmt.Sprintf("r%d-p%d", round, pid))
			seqs[pid] += 4
			events = append(events, txnEvent{pid: pid, first: info.BaseOffset})
			if (round+int(pid))%3 == 0 {
				typ := record.ControlCommit
				if pid == 2 {
					typ = record.ControlAbort
				}
				m := appendMarker(t, l, pid, 0, typ)
				events = append(events, txnEvent{pid: pid, first: m.BaseOffset, marker: true, typ: typ})
			}
		}
		mustAppend(t, l, batch(t, 50, 1))
	}
	return events
}

// txnModel is the transaction state of the events below end.
func txnModel(events []txnEvent, end int64) (open map[int64]int64, aborted []AbortedTxn) {
	open = map[int64]int64{}
	for _, e := range events {
		if e.first >= end {
			break
		}
		first, isOpen := open[e.pid]
		switch {
		case !e.marker && !isOpen:
			open[e.pid] = e.first
		case e.marker && isOpen:
			if e.typ == record.ControlAbort {
				aborted = append(aborted, AbortedTxn{e.pid, first, e.first})
			}
			delete(open, e.pid)
		}
	}
	return open, aborted
}

func checkTxnState(t *testing.T, l *Log, open map[int64]int64, aborted []AbortedTxn) {
	t.Helper()
	if got := l.OpenTxns(); !maps.Equal(got, open) && !(len(got) == 0 && len(open) == 0) {
		t.Fatalf("open transactions %v, want %v", got, open)
	}
	if got := l.AbortedTxns(0, l.EndOffset()); !slices.Equal(got, aborted) {
		t.Fatalf("aborted transactions %v, want %v", got, aborted)
	}
}

// TestTxnStateRecovers: the transaction state comes back the same after a
// clean close (snapshot), without any snapshot (scan of every header and
// marker), from an old-format snapshot, on a follower, and after a
// truncation below a marker (the transaction is open again).
func TestTxnStateRecovers(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	l := openLog(t, dir, cfg)
	events := txnWorkload(t, l)
	open, aborted := txnModel(events, l.EndOffset())
	if len(aborted) < 3 || len(open) == 0 || l.Segments() < 4 {
		t.Fatalf("workload too small: %d aborted, %d open, %d segments", len(aborted), len(open), l.Segments())
	}
	checkTxnState(t, l, open, aborted)

	follower := openLog(t, t.TempDir(), cfg)
	copyToFollower(t, l, follower)
	checkTxnState(t, follower, open, aborted)

	must(t, l.Close())
	l = openLog(t, dir, cfg)
	checkTxnState(t, l, open, aborted)

	must(t, l.Close())
	snaps, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
	for _, s := range snaps {
		must(t, os.Remove(s))
	}
	l = openLog(t, dir, cfg)
	checkTxnState(t, l, open, aborted)

	// Truncate just below the last abort marker, then below a marker in an
	// older segment (from a snapshot again): the transactions those markers
	// ended are open again.
	for _, cut := range []int64{aborted[len(aborted)-1].LastOffset, aborted[1].LastOffset} {
		must(t, l.TruncateTo(cut))
		open, aborted := txnModel(events, cut)
		checkTxnState(t, l, open, aborted)
		must(t, l.Close())
		l = openLog(t, dir, cfg)
		checkTxnState(t, l, open, aborted)
	}
}

// TestTxnRetentionForgetsAborts: an aborted transaction whose marker
// retention deleted is no longer reported.
func TestTxnRetentionForgetsAborts(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	l := openLog(t, dir, cfg)
	_, aborted := txnModel(txnWorkload(t, l), l.EndOffset())
	l.SetHighWatermark(l.EndOffset())
	cut := aborted[1].LastOffset + 1
	if _, err := l.RaiseStartOffset(cut); err != nil {
		t.Fatal(err)
	}
	got := l.AbortedTxns(0, l.EndOffset())
	if len(got) == 0 || got[0].LastOffset < cut || !slices.Equal(got, aborted[len(aborted)-len(got):]) {
		t.Fatalf("aborted after start offset %d: %v (all: %v)", cut, got, aborted)
	}
}

// TestCleanDropsAbortedRecords: a compacting pass removes the records of
// aborted transactions, so an aborted update never hides the committed
// value of its key, keeps the markers, and stops at the last stable
// offset: an open transaction's update does not remove the committed value
// either, since the transaction may still abort.
func TestCleanDropsAbortedRecords(t *testing.T) {
	cfg := testConfig()
	cfg.Compact = true
	cfg.SegmentBytes = 150 // a batch a segment
	l := openLog(t, t.TempDir(), cfg)
	appendTxn(t, l, 1, 0, 0, 3, "committed")
	appendMarker(t, l, 1, 0, record.ControlCommit)
	appendTxn(t, l, 1, 0, 3, 3, "aborted")
	appendMarker(t, l, 1, 0, record.ControlAbort)
	open := appendTxn(t, l, 2, 0, 0, 3, "open")
	filler := func(prefix string) {
		for i := range 6 {
			mustAppend(t, l, keyedBatch(t, record.CodecNone, fmt.Appendf(nil, "%s%d", prefix, i)))
		}
		l.SetHighWatermark(l.EndOffset())
	}
	// committed reports k0's value below the open transaction, and checks
	// that no aborted record is left.
	committed := func() string {
		t.Helper()
		k0 := ""
		for _, r := range readRecords(t, l, 0) {
			if bytes.HasPrefix(r.Value, []byte("aborted")) {
				t.Fatalf("aborted record at offset %d survived the pass", r.Offset)
			}
			if string(r.Key) == "k0" && r.Offset < open.BaseOffset {
				k0 = string(r.Value)
			}
		}
		return k0
	}
	filler("other")
	if _, err := l.Clean(CleanOptions{Now: cfg.now()}); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != "committed-0" {
		t.Fatalf("k0 below the open transaction is %q after the pass, want committed-0", got)
	}
	if got := l.AbortedTxns(0, l.EndOffset()); len(got) != 1 {
		t.Fatalf("aborted transactions after the pass: %v", got)
	}
	// The open transaction aborts: after the next pass k0 still has its
	// committed value and nothing of either aborted transaction is left.
	appendMarker(t, l, 2, 0, record.ControlAbort)
	filler("more")
	if _, err := l.Clean(CleanOptions{Now: cfg.now()}); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != "committed-0" {
		t.Fatalf("k0 is %q after the second pass, want committed-0", got)
	}
	for _, r := range readRecords(t, l, open.BaseOffset) {
		if bytes.HasPrefix(r.Value, []byte("open")) {
			t.Fatalf("record %q of the aborted transaction survived", r.Value)
		}
	}
}

// TestSliceNextOffset: a read's next offset is the base offset of the batch
// after it, or its segment's end offset.
func TestSliceNextOffset(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := openLog(t, t.TempDir(), cfg)
	var infos []AppendInfo
	for range 5 {
		infos = append(infos, mustAppend(t, l, nBatch(t, 3, 10, 1)))
	}
	for _, c := range []struct {
		offset   int64
		maxBytes int
		want     int64
	}{
		{0, 1, infos[1].BaseOffset},             // one batch
		{4, 1, infos[2].BaseOffset},             // inside the second batch
		{0, 1 << 20, l.EndOffset()},             // the whole segment
		{infos[4].BaseOffset, 1, l.EndOffset()}, // the last batch
	} {
		sl, err := l.Read(c.offset, c.maxBytes, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		got, err := sl.NextOffset()
		sl.Release()
		if err != nil || got != c.want {
			t.Errorf("read at %d of %d bytes: next offset %d, %v; want %d", c.offset, c.maxBytes, got, err, c.want)
		}
	}
}

// TestTxnMarkerBumpsEpoch: a marker carrying the producer's next epoch
// (KIP-890's transaction version 2) fences the ended transaction's epoch at
// once: a late batch of it is refused, the next transaction starts at
// sequence 0 of the new epoch, and a marker of an older epoch is refused.
// The bump survives a reopen from a snapshot and a rebuild by scan, and on
// a follower.
func TestTxnMarkerBumpsEpoch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := openLog(t, dir, cfg)
	appendTxn(t, l, 1, 0, 0, 2, "first")
	appendMarker(t, l, 1, 1, record.ControlCommit) // ends it, bumping to epoch 1
	check := func(l *Log) {
		t.Helper()
		if e, ok := l.Producer(1); !ok || e.Epoch != 1 || len(e.Batches) != 0 {
			t.Fatalf("producer 1: %+v, %v; want epoch 1 and no batches", e, ok)
		}
		end := l.EndOffset()
		_, err := l.Append(txnBatch(t, 1, 0, 2, 1, "late"), 7)
		wantErr(t, err, ErrInvalidProducerEpoch)
		_, err = l.Append(txnBatch(t, 1, 1, 3, 1, "gap"), 7)
		wantErr(t, err, ErrOutOfOrderSequence)
		_, err = l.AppendMarker(1, 0, record.Marker{Type: record.ControlAbort}, 7)
		wantErr(t, err, ErrInvalidProducerEpoch)
		if l.EndOffset() != end {
			t.Fatal("a refused append changed the log")
		}
	}
	check(l)
	follower := openLog(t, t.TempDir(), cfg)
	copyToFollower(t, l, follower)
	check(follower)
	must(t, l.Close())
	l = openLog(t, dir, cfg)
	check(l)
	must(t, l.Close())
	snaps, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
	for _, s := range snaps {
		must(t, os.Remove(s))
	}
	l = openLog(t, dir, cfg)
	check(l)
	appendTxn(t, l, 1, 1, 0, 1, "second") // the new epoch from sequence 0
	// A marker for a producer the log never saw fences its older epochs.
	appendMarker(t, l, 8, 3, record.ControlAbort)
	_, err := l.Append(producerBatch(t, 8, 2, 0, 1), 7)
	wantErr(t, err, ErrInvalidProducerEpoch)
}
