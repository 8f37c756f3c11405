package log

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

// producerBatch builds the batch an idempotent producer sends: n records
// from sequence seq, with values naming producer, epoch and sequence.
func producerBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	b.SetProducer(pid, epoch, seq)
	for i := range n {
		b.Append(record.Record{Timestamp: 1_700_000_000_000 + int64(i),
			Value: fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, int64(seq)+int64(i))})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

// entry builds a producerEntry holding batches (oldest first).
func entry(epoch int16, batches ...ProducerBatch) *producerEntry {
	e := &producerEntry{}
	for _, b := range batches {
		e.apply(epoch, b)
	}
	return e
}

func TestCheckBatch(t *testing.T) {
	const max = math.MaxInt32
	// Five batches of 10 records: sequences 0..49, offsets 100..149.
	full := entry(2)
	for i := range int32(ProducerWindow) {
		full.apply(2, ProducerBatch{i * 10, i*10 + 9, 100 + int64(i)*10, 109 + int64(i)*10})
	}
	// Three batches after a full window rolled once: sequences 10..59.
	rolled := entry(2)
	for i := range int32(ProducerWindow + 1) {
		rolled.apply(2, ProducerBatch{i * 10, i*10 + 9, int64(i) * 10, int64(i)*10 + 9})
	}
	atWrap := entry(0, ProducerBatch{max - 9, max, 0, 9})
	for _, tc := range []struct {
		name        string
		e           *producerEntry
		epoch       int16
		first, last int32
		wantDup     *ProducerBatch
		wantErr     error
	}{
		{"unknown producer, sequence 0", nil, 0, 0, 4, nil, nil},
		{"unknown producer, any sequence", nil, 3, 1234, 1240, nil, nil},
		{"next batch", full, 2, 50, 59, nil, nil},
		{"next batch of one record", full, 2, 50, 50, nil, nil},
		{"duplicate of the newest", full, 2, 40, 49, &ProducerBatch{40, 49, 140, 149}, nil},
		{"duplicate of the oldest remembered", full, 2, 0, 9, &ProducerBatch{0, 9, 100, 109}, nil},
		{"duplicate in the middle", full, 2, 20, 29, &ProducerBatch{20, 29, 120, 129}, nil},
		{"older than the window", rolled, 2, 0, 9, nil, ErrDuplicateSequence},
		{"gap", full, 2, 51, 60, nil, ErrOutOfOrderSequence},
		{"far ahead", full, 2, 5000, 5001, nil, ErrOutOfOrderSequence},
		{"overlaps the window but matches no batch", full, 2, 40, 44, nil, ErrOutOfOrderSequence},
		{"overlaps the newest batch", full, 2, 45, 54, nil, ErrOutOfOrderSequence},
		{"stale epoch", full, 1, 50, 59, nil, ErrInvalidProducerEpoch},
		{"stale epoch duplicate", full, 1, 40, 49, nil, ErrInvalidProducerEpoch},
		{"new epoch from 0", full, 3, 0, 9, nil, nil},
		{"new epoch not from 0", full, 3, 50, 59, nil, ErrOutOfOrderSequence},
		{"sequence wraps to 0", atWrap, 0, 0, 9, nil, nil},
		{"across the wrap is a gap", atWrap, 0, 1, 9, nil, ErrOutOfOrderSequence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig, dup, err := checkBatch(tc.e, tc.epoch, tc.first, tc.last)
			switch {
			case tc.wantErr != nil:
				wantErr(t, err, tc.wantErr)
			case err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantDup == nil && dup:
				t.Fatalf("taken for a duplicate of %+v", orig)
			case tc.wantDup != nil && (!dup || orig != *tc.wantDup):
				t.Fatalf("duplicate %v of %+v, want %+v", dup, orig, *tc.wantDup)
			}
		})
	}
}

func TestSeqBefore(t *testing.T) {
	const max = math.MaxInt32
	for _, tc := range []struct {
		a, b int32
		want bool
	}{
		{0, 1, true}, {1, 0, false}, {5, 5, false},
		{max, 0, true}, {max - 5, 3, true}, {3, max - 5, false},
		{0, 1 << 29, true}, {0, 1<<30 + 1, false},
	} {
		if got := seqBefore(tc.a, tc.b); got != tc.want {
			t.Errorf("seqBefore(%d, %d) = %v", tc.a, tc.b, got)
		}
	}
}

func TestProducerEntryRing(t *testing.T) {
	e := &producerEntry{}
	for i := range int64(12) {
		e.apply(0, ProducerBatch{FirstSeq: int32(i), LastSeq: int32(i), FirstOffset: i, LastOffset: i})
		want := min(int(i)+1, ProducerWindow)
		got := e.export()
		if len(got.Batches) != want || got.Batches[want-1].FirstOffset != i || got.Batches[0].FirstOffset != i+1-int64(want) {
			t.Fatalf("after %d batches: %+v", i+1, got)
		}
	}
	e.apply(1, ProducerBatch{0, 0, 20, 20})
	if got := e.export(); got.Epoch != 1 || len(got.Batches) != 1 {
		t.Fatalf("a new epoch keeps %+v", got)
	}
	e.apply(0, ProducerBatch{13, 13, 21, 21})
	if got := e.export(); got.Epoch != 1 || len(got.Batches) != 1 {
		t.Fatalf("an older epoch's batch changed the entry: %+v", got)
	}
}

// appendProducer appends one producer batch as leader (of leader epoch 7,
// as mustAppend) and returns the info.
func appendProducer(t testing.TB, l *Log, pid int64, epoch int16, seq int32, n int) AppendInfo {
	t.Helper()
	info, err := l.Append(producerBatch(t, pid, epoch, seq, n), 7)
	if err != nil {
		t.Fatalf("Append of producer %d epoch %d sequence %d: %v", pid, epoch, seq, err)
	}
	return info
}

func TestDuplicateGetsOriginalOffsets(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, nBatch(t, 2, 10, 1)) // someone else's records first
	first := appendProducer(t, l, 7, 0, 0, 3)
	second := appendProducer(t, l, 7, 0, 3, 4)
	if first.Duplicate || second.Duplicate || first.BaseOffset != 2 || second.BaseOffset != 5 {
		t.Fatalf("appends %+v %+v", first, second)
	}
	end, size := l.EndOffset(), l.Size()
	for _, tc := range []struct {
		seq  int32
		n    int
		want AppendInfo
	}{{0, 3, first}, {3, 4, second}} {
		retry, err := l.Append(producerBatch(t, 7, 0, tc.seq, tc.n), 7)
		if err != nil {
			t.Fatal(err)
		}
		if !retry.Duplicate || retry.BaseOffset != tc.want.BaseOffset || retry.LastOffset != tc.want.LastOffset ||
			retry.Batches != 0 || retry.Bytes != 0 {
			t.Fatalf("retry of sequence %d: %+v, want the offsets of %+v", tc.seq, retry, tc.want)
		}
	}
	if l.EndOffset() != end || l.Size() != size {
		t.Fatalf("a duplicate was appended: end %d -> %d, size %d -> %d", end, l.EndOffset(), size, l.Size())
	}
	recs := readRecords(t, l, 0)
	if len(recs) != 9 || string(recs[8].Value) != "p7-e0-s6" {
		t.Fatalf("log holds %d records, last %q", len(recs), recs[len(recs)-1].Value)
	}
	// The producer goes on after its retries.
	if info := appendProducer(t, l, 7, 0, 7, 1); info.BaseOffset != end {
		t.Fatalf("next batch at %d, want %d", info.BaseOffset, end)
	}
}

func TestProducerRefusals(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	appendProducer(t, l, 1, 5, 0, 2)
	appendProducer(t, l, 1, 5, 2, 2) // sequences 0..3 in epoch 5
	end := l.EndOffset()
	for _, tc := range []struct {
		name  string
		batch []byte
		want  error
	}{
		{"gap", producerBatch(t, 1, 5, 5, 1), ErrOutOfOrderSequence},
		{"restart at 0 in the same epoch", producerBatch(t, 1, 5, 0, 1), ErrOutOfOrderSequence},
		{"stale epoch", producerBatch(t, 1, 4, 4, 1), ErrInvalidProducerEpoch},
		{"new epoch not from 0", producerBatch(t, 1, 6, 4, 1), ErrOutOfOrderSequence},
		{"producer id without a sequence", producerBatch(t, 1, 5, record.NoSequence, 1), ErrInvalidProducerBatch},
		{"producer id without an epoch", producerBatch(t, 1, -1, 4, 1), ErrInvalidProducerBatch},
	} {
		_, err := l.Append(tc.batch, 7)
		wantErr(t, err, tc.want)
		if l.EndOffset() != end {
			t.Fatalf("%s: appended something (end %d -> %d)", tc.name, end, l.EndOffset())
		}
	}
	// A new epoch from 0 starts over; the old epoch is fenced from then on.
	appendProducer(t, l, 1, 6, 0, 1)
	_, err := l.Append(producerBatch(t, 1, 5, 4, 1), 7)
	wantErr(t, err, ErrInvalidProducerEpoch)
	if e, _ := l.Producer(1); e.Epoch != 6 || len(e.Batches) != 1 || e.Batches[0].FirstOffset != end {
		t.Fatalf("producer 1 after the new epoch: %+v", e)
	}
	// An unknown producer may start anywhere (its state may have gone with
	// retention), and is then held to its sequence.
	appendProducer(t, l, 2, 0, 1000, 3)
	_, err = l.Append(producerBatch(t, 2, 0, 1004, 1), 7)
	wantErr(t, err, ErrOutOfOrderSequence)
	appendProducer(t, l, 2, 0, 1003, 1)
}

// TestProducerWindow: the last five batches are recognized as duplicates;
// the one before them is DUPLICATE_SEQUENCE_NUMBER (appended before, its
// offsets no longer known).
func TestProducerWindow(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	var infos []AppendInfo
	for i := range int32(ProducerWindow + 1) {
		infos = append(infos, appendProducer(t, l, 9, 0, i*2, 2))
	}
	end := l.EndOffset()
	for i := 1; i < len(infos); i++ {
		retry, err := l.Append(producerBatch(t, 9, 0, int32(i)*2, 2), 7)
		if err != nil || !retry.Duplicate || retry.BaseOffset != infos[i].BaseOffset || retry.LastOffset != infos[i].LastOffset {
			t.Fatalf("retry of batch %d: %+v, %v; want the offsets of %+v", i, retry, err, infos[i])
		}
	}
	_, err := l.Append(producerBatch(t, 9, 0, 0, 2), 7)
	wantErr(t, err, ErrDuplicateSequence)
	if l.EndOffset() != end {
		t.Fatal("a retry was appended")
	}
}

func TestNonIdempotentBatchesAreNotChecked(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	b := nBatch(t, 3, 10, 1)
	for range 3 {
		if info := mustAppend(t, l, bytes.Clone(b)); info.Duplicate {
			t.Fatal("a batch without producer id taken for a duplicate")
		}
	}
	if l.EndOffset() != 9 || len(l.Producers()) != 0 {
		t.Fatalf("end %d, producers %v", l.EndOffset(), l.Producers())
	}
}

func TestMultiBatchAppend(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	two := append(producerBatch(t, 3, 0, 0, 2), producerBatch(t, 3, 0, 2, 3)...)
	info, err := l.Append(two, 7)
	if err != nil || info.BaseOffset != 0 || info.LastOffset != 4 {
		t.Fatalf("append of two batches: %+v, %v", info, err)
	}
	end := l.EndOffset()
	// The whole request retried: a duplicate over both batches.
	retry, err := l.Append(append(producerBatch(t, 3, 0, 0, 2), producerBatch(t, 3, 0, 2, 3)...), 7)
	if err != nil || !retry.Duplicate || retry.BaseOffset != 0 || retry.LastOffset != 4 {
		t.Fatalf("retry of two batches: %+v, %v", retry, err)
	}
	for name, tc := range map[string]struct {
		payload []byte
		want    error
	}{
		"duplicate and new":        {append(producerBatch(t, 3, 0, 2, 3), producerBatch(t, 3, 0, 5, 1)...), ErrMixedDuplicates},
		"duplicate and no id":      {append(producerBatch(t, 3, 0, 2, 3), nBatch(t, 1, 10, 1)...), ErrMixedDuplicates},
		"gap inside the append":    {append(producerBatch(t, 3, 0, 5, 1), producerBatch(t, 3, 0, 7, 1)...), ErrOutOfOrderSequence},
		"same batch twice":         {append(producerBatch(t, 3, 0, 5, 1), producerBatch(t, 3, 0, 5, 1)...), ErrMixedDuplicates},
		"new epoch then old epoch": {append(producerBatch(t, 3, 1, 0, 1), producerBatch(t, 3, 0, 5, 1)...), ErrInvalidProducerEpoch},
	} {
		_, err := l.Append(tc.payload, 7)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		wantErr(t, err, tc.want)
		if l.EndOffset() != end {
			t.Fatalf("%s: appended something", name)
		}
	}
	// Batches of several producers, each following on from the earlier ones.
	mixed := append(producerBatch(t, 3, 0, 5, 1), producerBatch(t, 4, 0, 0, 1)...)
	mixed = append(mixed, producerBatch(t, 3, 0, 6, 1)...)
	mixed = append(mixed, nBatch(t, 1, 10, 1)...)
	if _, err := l.Append(mixed, 7); err != nil {
		t.Fatal(err)
	}
	p3, _ := l.Producer(3)
	p4, _ := l.Producer(4)
	if n := len(p3.Batches); n != 4 || p3.Batches[n-1] != (ProducerBatch{6, 6, 7, 7}) || len(p4.Batches) != 1 || p4.Batches[0] != (ProducerBatch{0, 0, 6, 6}) {
		t.Fatalf("producer 3 %+v, producer 4 %+v", p3, p4)
	}
}

// copyToFollower appends, as a follower, what the leader holds beyond the
// follower's end, reading it as a follower's fetch would.
func copyToFollower(t testing.TB, leader, follower *Log) {
	t.Helper()
	copyBelow(t, leader, follower, leader.EndOffset())
}

// copyBelow is copyToFollower for the batches whose base offset is below
// upTo.
func copyBelow(t testing.TB, leader, follower *Log, upTo int64) {
	t.Helper()
	for {
		s, err := leader.Read(follower.EndOffset(), 1<<20, upTo)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.ReadAll()
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return
		}
		if _, err := follower.AppendReplica(b); err != nil {
			t.Fatal(err)
		}
	}
}

func wantProducers(t testing.TB, got, want map[int64]ProducerEntry) {
	t.Helper()
	eq := func(a, b ProducerEntry) bool {
		return a.Epoch == b.Epoch && fmt.Sprint(a.Batches) == fmt.Sprint(b.Batches)
	}
	if !maps.EqualFunc(got, want, eq) {
		t.Fatalf("producer state\n%v\nwant\n%v", got, want)
	}
}

// TestFollowerStateMatchesLeader: a follower builds the leader's producer
// state from the batches it replicates, so after a leadership change a retry
// of a batch the old leader appended is still answered as a duplicate.
func TestFollowerStateMatchesLeader(t *testing.T) {
	cfg := testConfig()
	leader := openLog(t, t.TempDir(), cfg)
	follower := openLog(t, t.TempDir(), cfg)
	for i := range int32(8) {
		appendProducer(t, leader, 1, 0, i*3, 3)
		appendProducer(t, leader, 2, int16(i/4), (i%4)*2, 2) // epoch 1 from the fifth batch
		mustAppend(t, leader, nBatch(t, 1, 10, 1))
	}
	last := appendProducer(t, leader, 1, 0, 24, 3)
	copyToFollower(t, leader, follower)
	wantProducers(t, follower.Producers(), leader.Producers())

	// The follower becomes leader (epoch 8); the producer retries its last
	// batch because the old leader's answer was lost.
	follower.Fence(8)
	retry, err := follower.Append(producerBatch(t, 1, 0, 24, 3), 8)
	if err != nil || !retry.Duplicate || retry.BaseOffset != last.BaseOffset || retry.LastOffset != last.LastOffset {
		t.Fatalf("retry on the new leader: %+v, %v; want the offsets of %+v", retry, err, last)
	}
	// And it holds the producers to the same rules the old leader did.
	_, err = follower.Append(producerBatch(t, 1, 0, 28, 1), 8)
	wantErr(t, err, ErrOutOfOrderSequence)
	_, err = follower.Append(producerBatch(t, 2, 0, 8, 1), 8)
	wantErr(t, err, ErrInvalidProducerEpoch)
	if info, err := follower.Append(producerBatch(t, 1, 0, 27, 1), 8); err != nil || info.BaseOffset != leader.EndOffset() {
		t.Fatalf("next batch on the new leader: %+v, %v; want it at %d", info, err, leader.EndOffset())
	}
}
