package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// TestCleanKeepsLatest: overwritten keys lose their old records, reads at
// removed offsets land on the next batch, the indexes of the cleaned
// segments pass recovery's checks, and the checkpoint survives a reopen.
func TestCleanKeepsLatest(t *testing.T) {
	dir := t.TempDir()
	m := newCleanModel(t, 1, dir, testConfig())
	for range 200 {
		m.appendBatch()
	}
	m.l.SetHighWatermark(m.l.EndOffset())
	before := m.l.Producers()
	st, err := m.clean(CleanOptions{DeleteRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if st.RecordsRemoved == 0 || st.SegmentsCleaned == 0 || st.BytesWritten >= st.BytesRead {
		t.Fatalf("stats %+v: expected records removed", st)
	}
	m.check(m.l, protectedFrom(m.l))
	sameProducers(t, m.l.Producers(), before)
	checkIndexFiles(t, m.l)
	if got := m.l.FirstDirtyOffset(); got != st.FirstDirty {
		t.Fatalf("first dirty %d, stats say %d", got, st.FirstDirty)
	}
	if err := m.l.Close(); err != nil {
		t.Fatal(err)
	}
	m.l = openLog(t, dir, testConfig())
	if m.l.RecoveryCut() {
		t.Fatal("recovery cut the cleaned log")
	}
	m.check(m.l, protectedFrom(m.l))
	sameProducers(t, m.l.Producers(), before)
	checkIndexFiles(t, m.l)
	if got := m.l.FirstDirtyOffset(); got != st.FirstDirty {
		t.Fatalf("reopened first dirty %d, want %d", got, st.FirstDirty)
	}
	// A second pass over a clean log removes nothing more.
	st2, err := m.clean(CleanOptions{DeleteRetention: time.Hour})
	if err != nil || st2.RecordsRemoved != 0 {
		t.Fatalf("second pass: %+v, %v", st2, err)
	}
}

// TestCleanModel is the model-based property test: random streams, segment
// sizes, high watermarks, budgets, retentions and passes interleaved with
// appends; after every pass the log matches the model, nothing at or above
// the active segment or high watermark changed, and the producer state is
// the same, also after a reopen.
func TestCleanModel(t *testing.T) {
	iterations := 200
	if testing.Short() {
		iterations = 30
	}
	var removed, dropped int64
	for seed := range uint64(iterations) {
		dir := t.TempDir()
		cfg := testConfig()
		m := newCleanModel(t, seed, dir, cfg)
		cfg.SegmentBytes = int64(300 + m.rng.IntN(3000))
		cfg.IndexIntervalBytes = m.rng.IntN(600)
		if err := m.l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		var protected int64
		for round := range 4 {
			for range 10 + m.rng.IntN(60) {
				m.appendBatch()
			}
			start, end := m.l.StartOffset(), m.l.EndOffset()
			m.l.SetHighWatermark(start + m.rng.Int64N(end-start+1))
			opts := CleanOptions{
				DeleteRetention: time.Duration(m.rng.IntN(3)) * 20 * time.Second,
				MapBytes:        mapBytesFor(10 + m.rng.Int64N(400)),
			}
			if m.rng.IntN(4) == 0 {
				opts.MinCompactionLag = time.Duration(m.rng.IntN(30)) * time.Second
			}
			protected = protectedFrom(m.l)
			before := m.l.Producers()
			st, err := m.clean(opts)
			if err != nil && !errors.Is(err, ErrCleanBudget) {
				t.Fatalf("seed %d round %d: Clean: %v", seed, round, err)
			}
			removed += st.RecordsRemoved
			dropped += st.BatchesRemoved
			m.check(m.l, protected)
			sameProducers(t, m.l.Producers(), before)
		}
		before := m.l.Producers()
		if err := m.l.Close(); err != nil {
			t.Fatal(err)
		}
		m.l = openLog(t, dir, cfg)
		if m.l.RecoveryCut() {
			t.Fatalf("seed %d: recovery cut the cleaned log", seed)
		}
		m.check(m.l, protected)
		sameProducers(t, m.l.Producers(), before)
		checkIndexFiles(t, m.l)
		_ = m.l.Close()
	}
	if removed == 0 || dropped == 0 {
		t.Fatalf("the passes removed %d records and %d batches: the test cleans nothing", removed, dropped)
	}
}

// checkIndexFiles checks that the index files of every closed segment on
// disk pass recovery's checks as they are (no rebuild needed).
func checkIndexFiles(t *testing.T, l *Log) {
	t.Helper()
	l.mu.RLock()
	segs := slices.Clone(l.segs[:len(l.segs)-1])
	l.mu.RUnlock()
	sc := newScanner(nil, 0, make([]byte, 4096))
	for _, s := range segs {
		c, err := openSegment(osFS{}, l.dir, s.base)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.readIndexes(c); err != nil {
			t.Fatalf("segment %d: %v", s.base, err)
		}
		next, err := l.checkTail(c, sc)
		if err != nil || next != s.next {
			t.Fatalf("segment %d: index check: next %d (want %d), %v", s.base, next, s.next, err)
		}
		c.release()
	}
}

// TestCleanTombstones: a tombstone stays while younger than DeleteRetention
// (by its record timestamp) and goes after, with every older value of its
// key.
func TestCleanTombstones(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.Now = clock.Now
	l := openLog(t, t.TempDir(), cfg)
	now := clock.Now().UnixMilli()
	appendKV(t, l, now, "a", "1")
	appendKV(t, l, now, "a", "")  // tombstone
	appendKV(t, l, now, "b", "2") // rolls nothing: force a roll with big batches
	for range 40 {
		appendKV(t, l, now, "c", string(make([]byte, 200)))
	}
	l.SetHighWatermark(l.EndOffset())
	if _, err := l.Clean(CleanOptions{Now: clock.Now(), DeleteRetention: time.Minute}); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, l, 0)
	if recs[0].Offset != 1 || recs[0].Value != nil {
		t.Fatalf("first record %+v, want the tombstone at 1", recs[0])
	}
	clock.Advance(2 * time.Minute)
	if _, err := l.Clean(CleanOptions{Now: clock.Now(), DeleteRetention: time.Minute}); err != nil {
		t.Fatal(err)
	}
	recs = readRecords(t, l, 0)
	if recs[0].Offset != 2 || string(recs[0].Key) != "b" {
		t.Fatalf("first record %+v, want b at 2", recs[0])
	}
}

func appendKV(t testing.TB, l *Log, ts int64, key, value string) {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	rec := record.Record{Timestamp: ts, Key: []byte(key)}
	if value != "" {
		rec.Value = []byte(value)
	}
	b.Append(rec)
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, append([]byte(nil), out...))
}

// TestCleanCorruptBatch: a corrupt batch in the cleanable range stops the
// pass with a CorruptError naming the segment and position; no file changes.
func TestCleanCorruptBatch(t *testing.T) {
	dir := t.TempDir()
	m := newCleanModel(t, 7, dir, testConfig())
	for range 100 {
		m.appendBatch()
	}
	m.l.SetHighWatermark(m.l.EndOffset())
	m.l.mu.RLock()
	victim := m.l.segs[1]
	m.l.mu.RUnlock()
	f, err := os.OpenFile(victim.path(logSuffix), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xee}, 80); err != nil { // inside the first batch's records
		t.Fatal(err)
	}
	_ = f.Close()
	before := dirState(t, dir)
	_, err = m.clean(CleanOptions{})
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptData) || ce.Segment != victim.base || ce.Pos != 0 {
		t.Fatalf("Clean: %v, want a CorruptError at segment %d position 0", err, victim.base)
	}
	if after := dirState(t, dir); after != before {
		t.Fatalf("files changed:\n%s\n%s", before, after)
	}
}

// dirState lists the directory's segment files with their sizes; the
// checkpoints and producer snapshots, which the flusher and rolls write on
// their own schedule, are left out.
func dirState(t testing.TB, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := ""
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if ext != ".log" && ext != ".index" && ext != ".timeindex" && ext != cleanedSuffix && ext != swapSuffix {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		s += fmt.Sprintf("%s %d\n", e.Name(), info.Size())
	}
	return s
}

// TestCleanProducerStateFromHeaders: after a pass, a producer state rebuilt
// from the batch headers alone (no snapshot) still has every producer's
// epoch and newest batch, which the pass kept (empty if need be).
func TestCleanProducerStateFromHeaders(t *testing.T) {
	dir := t.TempDir()
	m := newCleanModel(t, 11, dir, testConfig())
	for range 200 {
		m.appendBatch()
	}
	m.l.SetHighWatermark(m.l.EndOffset())
	before := m.l.Producers()
	if len(before) == 0 {
		t.Fatal("no idempotent producers in the stream")
	}
	if _, err := m.clean(CleanOptions{DeleteRetention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := m.l.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
	for _, s := range snaps {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	l := openLog(t, dir, testConfig())
	after := l.Producers()
	for pid, e := range before {
		a, ok := after[pid]
		if !ok || a.Epoch != e.Epoch || a.Batches[len(a.Batches)-1] != e.Batches[len(e.Batches)-1] {
			t.Fatalf("producer %d rebuilt as %+v, was %+v", pid, a, e)
		}
	}
}

// TestCleanConcurrent runs passes while appends and reads go on (run with
// -race): readers always see the model, appends are never refused.
func TestCleanConcurrent(t *testing.T) {
	dir := t.TempDir()
	m := newCleanModel(t, 5, dir, testConfig())
	for range 100 {
		m.appendBatch()
	}
	l := m.l
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := tryReadRecords(l, l.StartOffset()); err != nil {
				errc <- err
				return
			}
		}
	}()
	for range 20 {
		for range 10 {
			m.appendBatch() // the model is only touched here
		}
		l.SetHighWatermark(l.EndOffset() - 5)
		if _, err := m.clean(CleanOptions{DeleteRetention: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errc; err != nil {
		t.Fatalf("concurrent read: %v", err)
	}
	m.check(l, protectedFrom(l))
}

// TestCleanMapBudget: a pass maps whole dirty segments while their offset
// spans fit in MapBytes, allocates the slots that span needs (not the whole
// budget), and refuses with ErrCleanBudget when the first dirty segment
// alone does not fit; later passes finish the log.
func TestCleanMapBudget(t *testing.T) {
	m := newCleanModel(t, 3, t.TempDir(), testConfig())
	for range 150 {
		m.appendBatch()
	}
	m.l.SetHighWatermark(m.l.EndOffset())
	m.l.mu.RLock()
	base := m.l.segs[0].base
	first := m.l.segs[0].next - base
	two := m.l.segs[1].next - base
	m.l.mu.RUnlock()

	if _, err := m.clean(CleanOptions{MapBytes: mapBytesFor(first - 1)}); !errors.Is(err, ErrCleanBudget) {
		t.Fatalf("a budget below the first segment: %v, want ErrCleanBudget", err)
	}
	m.check(m.l, m.l.EndOffset())

	// A budget for two and a half segments maps two, in a map of their size.
	budget := mapBytesFor(two + first/2)
	plan, err := m.l.planClean(CleanOptions{Now: m.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var st CleanStats
	c := newCleaner(m.l, CleanOptions{MapBytes: budget}, plan, &st)
	n, err := c.buildMap()
	if slots := int64(len(c.offsets.slots)); err != nil || n != 2 || slots < mapSlotsFor(two) || slots >= 2*mapSlotsFor(two) {
		t.Fatalf("buildMap: %d segments, %d slots, %v; want 2, at least %d", n, slots, err, mapSlotsFor(two))
	}
	c.release()
	plan.release()

	st2, err := m.clean(CleanOptions{MapBytes: budget})
	if err != nil || st2.FirstDirty != base+two {
		t.Fatalf("pass: %+v, %v; want first dirty %d", st2, err, two)
	}
	for m.l.FirstDirtyOffset() < protectedFrom(m.l) {
		if _, err := m.clean(CleanOptions{MapBytes: budget}); err != nil {
			t.Fatal(err)
		}
	}
	m.check(m.l, protectedFrom(m.l))
}

// TestCleanThrottle: the throttle sees every byte the pass reads and
// writes (the stats' BytesRead plus BytesWritten); a throttle error at its
// first, middle or last call aborts the pass with ErrCleanAborted wrapping
// it, the files unchanged, and a later pass succeeds.
func TestCleanThrottle(t *testing.T) {
	setup := func(t *testing.T) (*cleanModel, string) {
		dir := t.TempDir()
		m := newCleanModel(t, 9, dir, testConfig())
		for range 200 {
			m.appendBatch()
		}
		m.l.SetHighWatermark(m.l.EndOffset())
		return m, dir
	}
	m, _ := setup(t)
	var calls int
	var total int64
	st, err := m.clean(CleanOptions{DeleteRetention: time.Hour, Throttle: func(n int) error {
		calls++
		total += int64(n)
		return nil
	}})
	if err != nil || st.SegmentsCleaned == 0 || total != st.BytesRead+st.BytesWritten {
		t.Fatalf("pass: %+v, %v; the throttle saw %d bytes", st, err, total)
	}
	m.check(m.l, protectedFrom(m.l))

	errSlow := errors.New("too fast")
	for _, failAt := range []int{1, calls / 2, calls} {
		t.Run(fmt.Sprint(failAt), func(t *testing.T) {
			m, dir := setup(t)
			before := dirState(t, dir)
			n := 0
			st, err := m.clean(CleanOptions{DeleteRetention: time.Hour, Throttle: func(int) error {
				if n++; n == failAt {
					return errSlow
				}
				return nil
			}})
			if !errors.Is(err, ErrCleanAborted) || !errors.Is(err, errSlow) {
				t.Fatalf("Clean with a failing throttle: %+v, %v", st, err)
			}
			if after := dirState(t, dir); after != before {
				t.Fatalf("files changed:\n%s\n%s", before, after)
			}
			m.check(m.l, m.l.EndOffset())
			if st, err := m.clean(CleanOptions{DeleteRetention: time.Hour}); err != nil || st.SegmentsCleaned == 0 {
				t.Fatalf("next pass: %+v, %v", st, err)
			}
			m.check(m.l, protectedFrom(m.l))
		})
	}
}
