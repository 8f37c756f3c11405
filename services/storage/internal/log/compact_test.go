package log

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

func keyedBatch(t testing.TB, codec record.Codec, keys ...[]byte) []byte {
	t.Helper()
	b := record.NewBuilder(codec)
	for i, k := range keys {
		b.Append(record.Record{Timestamp: int64(i), Key: k, Value: []byte("v")})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

// TestCompactRefusesKeylessRecords: a leader append to a compacted log
// holding a record without a key is refused whole, compressed or not; a
// delete-only log and a follower append take it.
func TestCompactRefusesKeylessRecords(t *testing.T) {
	cfg := testConfig()
	cfg.Compact = true
	l := openLog(t, t.TempDir(), cfg)
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecZstd} {
		_, err := l.Append(keyedBatch(t, codec, []byte("a"), nil, []byte("c")), 7)
		if !errors.Is(err, ErrKeylessRecord) {
			t.Fatalf("%v: keyless record appended: %v", codec, err)
		}
		if want := "record 1 of the batch has no key"; err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Fatalf("%v: error %q does not say %q", codec, err, want)
		}
		mustAppend(t, l, keyedBatch(t, codec, []byte("a"), []byte{}, []byte("c"))) // an empty key is a key
	}
	if l.EndOffset() != 9 {
		t.Fatalf("log end %d after three keyed batches, want 9", l.EndOffset())
	}
	mustAppend(t, l, batch(t, 1, 1)) // batch() keys its records

	plain := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, plain, keyedBatch(t, record.CodecNone, nil))

	follower := openLog(t, t.TempDir(), cfg)
	b := keyedBatch(t, record.CodecNone, nil, nil)
	if _, err := follower.AppendReplica(b); err != nil {
		t.Fatalf("follower append of the leader's batch: %v", err)
	}
}

// TestCompactFollowerCatchesUpAcrossGaps: a follower replicating a cleaned
// leader log from 0 (a new replica, as after a reassignment) gets the same
// records at the same offsets, skipping the removed ones; a delete-only log
// still refuses a gap.
func TestCompactFollowerCatchesUpAcrossGaps(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.Compact, cfg.Now = true, clock.Now
	leader := openLog(t, t.TempDir(), cfg)
	now := clock.Now().UnixMilli()
	for i := range 600 {
		appendKV(t, leader, now, fmt.Sprintf("k%d", i%13), fmt.Sprintf("value-%d-%s", i, bytes.Repeat([]byte("x"), 40)))
	}
	leader.SetHighWatermark(leader.EndOffset())
	st, err := leader.Clean(CleanOptions{Now: clock.Now(), DeleteRetention: time.Hour})
	if err != nil || st.RecordsRemoved == 0 {
		t.Fatalf("clean: %+v %v", st, err)
	}
	want := readRecords(t, leader, 0)

	follower := openLog(t, t.TempDir(), cfg)
	plainCfg := cfg
	plainCfg.Compact = false
	plain := openLog(t, t.TempDir(), plainCfg)
	gapRefused := false
	for follower.EndOffset() < leader.EndOffset() {
		s, err := leader.Read(follower.EndOffset(), 2048, leader.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.ReadAll()
		s.Release()
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", follower.EndOffset(), len(b), err)
		}
		h, _ := record.ParseHeader(b)
		if h.BaseOffset > follower.EndOffset() && !gapRefused {
			// plain is empty (end 0) and the batch starts above 0.
			if _, err := plain.AppendReplica(bytes.Clone(b)); !errors.Is(err, ErrOffsetMismatch) {
				t.Fatalf("a delete-only log took a batch at %d with its end at %d: %v", h.BaseOffset, plain.EndOffset(), err)
			}
			gapRefused = true
		}
		if _, err := follower.AppendReplica(b); err != nil {
			t.Fatalf("append at %d: %v", follower.EndOffset(), err)
		}
	}
	if !gapRefused {
		t.Fatal("the cleaned log had no gap for the follower to cross")
	}
	got := readRecords(t, follower, 0)
	if len(got) != len(want) {
		t.Fatalf("follower holds %d records, the leader %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("record %d: follower %d %q, leader %d %q", i, got[i].Offset, got[i].Key, want[i].Offset, want[i].Key)
		}
	}
	// A read inside a gap returns the next record on both.
	for i := 1; i < len(want); i++ {
		if want[i].Offset > want[i-1].Offset+1 {
			in := want[i-1].Offset + 1
			if r := readRecords(t, follower, in); len(r) == 0 || r[0].Offset != want[i].Offset {
				t.Fatalf("follower read at %d in a gap: %v", in, r)
			}
			break
		}
	}
}

// TestRollIfDue: a quiet active segment with records rolls once segment.ms
// has passed since its first append; an empty one never does.
func TestRollIfDue(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.Now, cfg.SegmentMs = clock.Now, 1000
	l := openLog(t, t.TempDir(), cfg)
	if rolled, err := l.RollIfDue(clock.Now().Add(time.Hour)); rolled || err != nil {
		t.Fatalf("empty segment rolled: %v %v", rolled, err)
	}
	mustAppend(t, l, batch(t, 10, 1))
	if rolled, err := l.RollIfDue(clock.Now().Add(999 * time.Millisecond)); rolled || err != nil {
		t.Fatalf("rolled before segment.ms: %v %v", rolled, err)
	}
	if rolled, err := l.RollIfDue(clock.Now().Add(time.Second)); !rolled || err != nil || l.Segments() != 2 {
		t.Fatalf("not rolled at segment.ms: %v %v, %d segments", rolled, err, l.Segments())
	}
	if rolled, _ := l.RollIfDue(clock.Now().Add(time.Hour)); rolled {
		t.Fatal("the new empty segment rolled")
	}
}

// TestDirtyBytes: the dirty share of the closed segments below the high
// watermark falls to zero after a pass and grows with new segments.
func TestDirtyBytes(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.Compact, cfg.Now = true, clock.Now
	l := openLog(t, t.TempDir(), cfg)
	now := clock.Now().UnixMilli() - 1000
	for i := range 300 {
		appendKV(t, l, now+int64(i), fmt.Sprintf("k%d", i%7), string(bytes.Repeat([]byte("y"), 50)))
	}
	if closed, dirty, _ := l.DirtyBytes(); closed != 0 || dirty != 0 {
		t.Fatalf("before the high watermark moved: closed %d dirty %d", closed, dirty)
	}
	l.SetHighWatermark(l.EndOffset())
	closed, dirty, oldest := l.DirtyBytes()
	if closed == 0 || dirty != closed || oldest != now {
		t.Fatalf("all dirty: closed %d dirty %d oldest %d (want %d)", closed, dirty, oldest, now)
	}
	if st, err := l.Clean(CleanOptions{Now: clock.Now(), DeleteRetention: time.Hour}); err != nil || st.SegmentsCleaned == 0 {
		t.Fatalf("clean: %+v %v", st, err)
	}
	closed2, dirty2, oldest2 := l.DirtyBytes()
	if closed2 == 0 || closed2 >= closed || dirty2 != 0 || oldest2 != -1 {
		t.Fatalf("after a pass: closed %d (was %d) dirty %d oldest %d", closed2, closed, dirty2, oldest2)
	}
}

// TestCleanRewritesCompressedBatches: a compressed batch that loses some of
// its records is compressed again with its codec, keeping the others at
// their offsets and timestamps, so a superseded value or a deleted key in
// it stops being readable.
func TestCleanRewritesCompressedBatches(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		clock := newClock()
		cfg := testConfig()
		cfg.Compact, cfg.Now = true, clock.Now
		l := openLog(t, t.TempDir(), cfg)
		old := clock.Now().Add(-time.Hour).UnixMilli()
		b := record.NewBuilder(codec)
		for i, k := range []string{"a", "b", "c", "d"} {
			b.Append(record.Record{Timestamp: old + int64(i), Key: []byte(k), Value: []byte(k + "1")})
		}
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, bytes.Clone(out))                  // offsets 0-3
		appendKV(t, l, old+10, "a", "a2")                   // 4: supersedes a1
		appendKV(t, l, old+11, "c", "")                     // 5: deletes c (expired)
		mustAppend(t, l, keyedBatch(t, codec, []byte("e"))) // 6, so the segment below can close
		if _, err := l.RollIfDue(clock.Now().Add(8 * 24 * time.Hour)); err != nil {
			t.Fatal(err)
		}
		l.SetHighWatermark(l.EndOffset())
		if _, err := l.Clean(CleanOptions{Now: clock.Now(), DeleteRetention: time.Minute}); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		got := map[int64]string{}
		for _, r := range readRecords(t, l, 0) {
			got[r.Offset] = string(r.Key) + "=" + string(r.Value)
		}
		want := map[int64]string{1: "b=b1", 3: "d=d1", 4: "a=a2", 6: "e=v"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v: after cleaning %v, want %v", codec, got, want)
		}
		s, err := l.Read(0, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		hs := sliceBatches(t, s)
		s.Release()
		if hs[0].Compression() != codec || hs[0].RecordCount != 2 || hs[0].BaseOffset != 0 || hs[0].LastOffsetDelta != 3 {
			t.Fatalf("%v: the rewritten batch is %+v", codec, hs[0])
		}
	}
}

// TestCleanStopsWhenLogCloses: a pass whose log is closed under it (its
// topic deleted) stops at its next chunk instead of reading on.
func TestCleanStopsWhenLogCloses(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.Compact, cfg.Now = true, clock.Now
	l := openLog(t, t.TempDir(), cfg)
	old := clock.Now().Add(-time.Hour).UnixMilli()
	for i := range 2000 {
		appendKV(t, l, old, fmt.Sprintf("k%d", i%50), fmt.Sprintf("value-%d", i))
	}
	l.SetHighWatermark(l.EndOffset())
	chunks := 0
	st, err := l.Clean(CleanOptions{Now: clock.Now(), Throttle: func(int) error {
		if chunks++; chunks == 1 {
			if err := l.Close(); err != nil {
				t.Error(err)
			}
		}
		return nil
	}})
	if !errors.Is(err, ErrCleanAborted) || !errors.Is(err, ErrClosed) || chunks > 2 {
		t.Fatalf("pass on a closed log: %v after %d chunks (%+v)", err, chunks, st)
	}
}

// TestCleanIgnoresFutureTimestampsWithoutLag: records stamped ahead of the
// node's clock are cleaned when no min.compaction.lag.ms is set, and held
// back when one is.
func TestCleanIgnoresFutureTimestampsWithoutLag(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.Compact, cfg.Now = true, clock.Now
	l := openLog(t, t.TempDir(), cfg)
	future := clock.Now().Add(time.Hour).UnixMilli()
	for i := range 300 {
		appendKV(t, l, future, fmt.Sprintf("k%d", i%7), string(bytes.Repeat([]byte("z"), 50)))
	}
	l.SetHighWatermark(l.EndOffset())
	if st, err := l.Clean(CleanOptions{Now: clock.Now(), MinCompactionLag: time.Minute}); err != nil || st.SegmentsCleaned != 0 {
		t.Fatalf("with a lag, records from the future were cleaned: %+v %v", st, err)
	}
	if st, err := l.Clean(CleanOptions{Now: clock.Now()}); err != nil || st.SegmentsCleaned == 0 {
		t.Fatalf("without a lag, records from the future were not cleaned: %+v %v", st, err)
	}
}
