package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/record"
)

// producersLog fills a log of several segments with three producers'
// batches (producer 2 changes epoch half way) between plain batches, and
// returns it open with the last batch of each producer. It waits for a flush
// after each round so that every roll's snapshot is written (a roll replaces
// a snapshot still waiting for the flusher).
func producersLog(t *testing.T, dir string, cfg Config) (*Log, map[int64]AppendInfo) {
	t.Helper()
	l, err := Open(dir, cfg, nil)
	must(t, err)
	last := map[int64]AppendInfo{}
	for i := range int32(12) {
		last[1] = appendProducer(t, l, 1, 0, i*2, 2)
		last[2] = appendProducer(t, l, 2, int16(i/6), (i%6)*3, 3)
		if i < 4 {
			last[3] = appendProducer(t, l, 3, 0, i, 1)
		}
		mustAppend(t, l, nBatch(t, 1, 30, 1))
		must(t, l.WaitFlushed(context.Background(), l.EndOffset()))
	}
	if l.Segments() < 4 {
		t.Fatalf("setup: %d segments", l.Segments())
	}
	return l, last
}

// smallSegments makes a producersLog roll every few batches.
func smallSegments() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 900
	cfg.IndexIntervalBytes = 200
	return cfg
}

// snapshotFiles lists the producer snapshot offsets in dir.
func snapshotFiles(t testing.TB, dir string) []int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, n := range names {
		off, ok := parseBase(filepath.Base(n), snapshotSuffix)
		if !ok {
			t.Fatalf("snapshot file %s", n)
		}
		offs = append(offs, off)
	}
	slices.Sort(offs)
	return offs
}

// waitSnapshot polls until the flusher wrote the snapshot at offset.
func waitSnapshot(t testing.TB, dir string, offset int64) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() error {
		if files := snapshotFiles(t, dir); !slices.Contains(files, offset) {
			return fmt.Errorf("no producer snapshot at %d; files %v", offset, files)
		}
		return nil
	})
}

// copyFiles copies the regular files of an open log's directory, as a crash
// would leave them (what is in the page cache is on disk).
func copyFiles(t testing.TB, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if errors.Is(err, os.ErrNotExist) { // a temporary file renamed meanwhile
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// wantRetries checks that a retry of each producer's last batch is answered
// with its original offsets and appends nothing.
func wantRetries(t *testing.T, l *Log, last map[int64]AppendInfo) {
	t.Helper()
	end := l.EndOffset()
	retries := map[int64][]byte{
		1: producerBatch(t, 1, 0, 22, 2),
		2: producerBatch(t, 2, 1, 15, 3),
		3: producerBatch(t, 3, 0, 3, 1),
	}
	for pid, b := range retries {
		info, err := l.Append(b, 7)
		if err != nil || !info.Duplicate || info.BaseOffset != last[pid].BaseOffset || info.LastOffset != last[pid].LastOffset {
			t.Fatalf("retry of producer %d: %+v, %v; want the offsets of %+v", pid, info, err, last[pid])
		}
	}
	if l.EndOffset() != end {
		t.Fatal("a retry was appended")
	}
}

func TestProducerStateSurvivesReopen(t *testing.T) {
	cfg := smallSegments()
	const fullScan = "rebuilding the producer state from every batch header"
	for _, c := range []struct {
		name     string
		crash    bool // copy the files of the open log instead of closing it
		wreck    func(t *testing.T, dir string)
		fullScan bool
	}{
		{name: "clean close"},
		{name: "crash", crash: true},
		{name: "no snapshot", wreck: func(t *testing.T, dir string) {
			for _, off := range snapshotFiles(t, dir) {
				must(t, os.Remove(segPath(dir, off, snapshotSuffix)))
			}
		}, fullScan: true},
		{name: "corrupt newest snapshot", wreck: func(t *testing.T, dir string) {
			offs := snapshotFiles(t, dir)
			path := segPath(dir, offs[len(offs)-1], snapshotSuffix)
			b := mustRead(t, path)
			b[len(b)-1] ^= 1
			must(t, os.WriteFile(path, b, 0o644))
		}},
		{name: "empty snapshot", wreck: func(t *testing.T, dir string) {
			offs := snapshotFiles(t, dir)
			must(t, os.WriteFile(segPath(dir, offs[len(offs)-1], snapshotSuffix), nil, 0o644))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, last := producersLog(t, dir, cfg)
			want := l.Producers()
			end := l.EndOffset()
			if c.crash {
				must(t, l.WaitFlushed(context.Background(), end))
				l.mu.RLock()
				active := l.segs[len(l.segs)-1].base
				l.mu.RUnlock()
				waitSnapshot(t, dir, active)
				crashed := t.TempDir()
				copyFiles(t, dir, crashed)
				must(t, l.Close())
				dir = crashed
			} else {
				must(t, l.Close())
				if offs := snapshotFiles(t, dir); len(offs) == 0 || offs[len(offs)-1] != end {
					t.Fatalf("Close left snapshots %v, want one at the end offset %d", offs, end)
				}
			}
			if c.wreck != nil {
				c.wreck(t, dir)
			}
			var logs bytes.Buffer
			l, err := Open(dir, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			must(t, err)
			defer l.Close()
			wantProducers(t, l.Producers(), want)
			if got := strings.Contains(logs.String(), fullScan); got != c.fullScan {
				t.Errorf("full header scan %v, want %v; logs:\n%s", got, c.fullScan, logs.String())
			}
			if offs := snapshotFiles(t, dir); len(offs) > producerSnapshotsKept {
				t.Errorf("%d snapshot files kept: %v", len(offs), offs)
			}
			wantRetries(t, l, last)
		})
	}
}

// TestProducerSnapshotBeyondTornTail: a snapshot written for records that
// did not survive the crash is deleted, and the state is the recovered log's.
func TestProducerSnapshotBeyondTornTail(t *testing.T) {
	dir := t.TempDir()
	cfg := smallSegments()
	l, _ := producersLog(t, dir, cfg)
	want := l.Producers()
	b := producerBatch(t, 1, 0, 24, 2)
	appendProducer(t, l, 1, 0, 24, 2)
	end := l.EndOffset()
	must(t, l.Close())
	l.mu.RLock()
	active := l.segs[len(l.segs)-1].base
	l.mu.RUnlock()
	chop(t, segPath(dir, active, ".log"), len(b)) // the last batch is lost
	l = openLog(t, dir, cfg)
	if l.EndOffset() != end-2 {
		t.Fatalf("end offset %d, want %d", l.EndOffset(), end-2)
	}
	if slices.Contains(snapshotFiles(t, dir), end) {
		t.Fatalf("snapshot at %d kept beyond the log end %d", end, l.EndOffset())
	}
	wantProducers(t, l.Producers(), want)
	// The lost batch is not a duplicate: the producer's retry appends it.
	info, err := l.Append(b, 7)
	if err != nil || info.Duplicate || info.BaseOffset != end-2 {
		t.Fatalf("retry of the lost batch: %+v, %v", info, err)
	}
}

func TestProducerSnapshotsAtRoll(t *testing.T) {
	dir := t.TempDir()
	cfg := smallSegments()
	l, _ := producersLog(t, dir, cfg)
	defer l.Close()
	l.mu.RLock()
	active := l.segs[len(l.segs)-1].base
	l.mu.RUnlock()
	must(t, l.WaitFlushed(context.Background(), l.EndOffset()))
	waitSnapshot(t, dir, active)
	offs := snapshotFiles(t, dir)
	if len(offs) > producerSnapshotsKept {
		t.Fatalf("%d snapshot files kept: %v", len(offs), offs)
	}
	// Each holds the state of the batches below its offset, as a follower
	// that copied them would have it.
	for _, off := range offs {
		st, err := decodeProducers(mustRead(t, segPath(dir, off, snapshotSuffix)), off)
		must(t, err)
		ref := openLog(t, t.TempDir(), cfg)
		copyBelow(t, l, ref, off)
		if ref.EndOffset() != off {
			t.Fatalf("snapshot at %d is not at a batch boundary (%d)", off, ref.EndOffset())
		}
		wantProducers(t, exportState(&st), ref.Producers())
	}
}

func exportState(s *producerState) map[int64]ProducerEntry {
	out := map[int64]ProducerEntry{}
	for pid, e := range s.m {
		out[pid] = e.export()
	}
	return out
}

// TestTruncateRebuildsProducers: after TruncateTo the state is exactly that
// of the remaining log, so a retry of a cut batch is appended again (it is no
// longer in the log) while a retry of a kept batch is still a duplicate.
func TestTruncateRebuildsProducers(t *testing.T) {
	dir := t.TempDir()
	cfg := smallSegments()
	l, _ := producersLog(t, dir, cfg)
	l.mu.RLock()
	active := l.segs[len(l.segs)-1].base
	l.mu.RUnlock()
	must(t, l.WaitFlushed(context.Background(), l.EndOffset()))
	waitSnapshot(t, dir, active)
	offs := snapshotFiles(t, dir)
	if len(offs) < 2 {
		t.Fatalf("setup: snapshots %v", offs)
	}
	// Cut between the two newest snapshots, at producer 1's batch there.
	var cut AppendInfo
	for seq := int32(0); ; seq += 2 {
		if seq > 22 {
			t.Fatalf("no batch of producer 1 after offset %d", offs[len(offs)-2])
		}
		info, err := l.Append(producerBatch(t, 1, 0, seq, 2), 7)
		if errors.Is(err, ErrDuplicateSequence) {
			continue
		}
		must(t, err)
		if !info.Duplicate {
			t.Fatalf("setup: retry of sequence %d appended", seq)
		}
		if info.BaseOffset > offs[len(offs)-2] {
			cut = info
			break
		}
	}
	ref := openLog(t, t.TempDir(), cfg)
	copyBelow(t, l, ref, cut.BaseOffset)
	must(t, l.TruncateTo(cut.BaseOffset))
	wantProducers(t, l.Producers(), ref.Producers())
	if left := snapshotFiles(t, dir); !slices.Equal(left, offs[:len(offs)-1]) {
		t.Fatalf("snapshots %v after truncation to %d, want %v", left, cut.BaseOffset, offs[:len(offs)-1])
	}
	seq := l.Producers()[1].Batches[len(l.Producers()[1].Batches)-1].LastSeq + 1
	// Kept: still a duplicate. Cut: appended anew, at the new end.
	kept, err := l.Append(producerBatch(t, 1, 0, seq-2, 2), 7)
	if err != nil || !kept.Duplicate {
		t.Fatalf("retry of a kept batch: %+v, %v", kept, err)
	}
	again, err := l.Append(producerBatch(t, 1, 0, seq, 2), 7)
	if err != nil || again.Duplicate || again.BaseOffset != cut.BaseOffset {
		t.Fatalf("retry of a cut batch: %+v, %v", again, err)
	}
	want := l.Producers()
	must(t, l.Close())
	l = openLog(t, dir, cfg)
	wantProducers(t, l.Producers(), want)

	// Below every snapshot: they all go and the state comes from the headers
	// of the log that is left (producer 1's first batch).
	must(t, l.TruncateTo(2))
	if left := snapshotFiles(t, dir); len(left) != 0 {
		t.Fatalf("snapshots %v after truncation to 2", left)
	}
	wantProducers(t, l.Producers(), map[int64]ProducerEntry{1: {Epoch: 0, Batches: []ProducerBatch{{0, 1, 0, 1}}}})
	appendProducer(t, l, 1, 0, 2, 2)
}

// TestRetentionForgetsProducers: a producer whose batches retention deleted
// is forgotten (and then accepted from any sequence); the others stay.
func TestRetentionForgetsProducers(t *testing.T) {
	dir := t.TempDir()
	cfg := smallSegments()
	l, _ := producersLog(t, dir, cfg) // producer 3 wrote only its first 4 batches
	appendProducer(t, l, 1, 0, 24, 1) // 1 and 2 in the active segment
	appendProducer(t, l, 2, 1, 18, 1)
	l.mu.RLock()
	active := l.segs[len(l.segs)-1].base
	l.mu.RUnlock()
	must(t, l.WaitFlushed(context.Background(), l.EndOffset()))
	waitSnapshot(t, dir, active)
	p3, _ := l.Producer(3)
	cfg.RetentionMs = 0 // every segment but the active one is old
	must(t, l.SetConfig(cfg))
	l.SetHighWatermark(l.EndOffset())
	if n, err := l.EnforceRetention(time.Now()); n == 0 || err != nil {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	start := l.StartOffset()
	if p3.Batches[len(p3.Batches)-1].LastOffset >= start {
		t.Fatalf("setup: producer 3 ends at %d, start offset %d", p3.Batches[len(p3.Batches)-1].LastOffset, start)
	}
	got := l.Producers()
	if _, ok := got[3]; ok || len(got) != 2 {
		t.Fatalf("producers after retention: %v", got)
	}
	for _, off := range snapshotFiles(t, dir) {
		if off < start {
			t.Fatalf("snapshot at %d kept below the start offset %d", off, start)
		}
	}
	must(t, l.Close())
	l = openLog(t, dir, cfg)
	wantProducers(t, l.Producers(), got)
	// Unknown again: any sequence starts it.
	appendProducer(t, l, 3, 0, 77, 1)
}

func TestResetToForgetsProducers(t *testing.T) {
	dir := t.TempDir()
	l, _ := producersLog(t, dir, smallSegments())
	defer l.Close()
	end := l.EndOffset()
	must(t, l.ResetTo(end+10))
	if got := l.Producers(); len(got) != 0 {
		t.Fatalf("producers after reset: %v", got)
	}
	if offs := snapshotFiles(t, dir); len(offs) != 0 {
		t.Fatalf("snapshots after reset: %v", offs)
	}
	appendProducer(t, l, 1, 0, 500, 1) // unknown: accepted
	info := appendProducer(t, l, 1, 0, 501, 1)
	must(t, l.Close())
	l = openLog(t, dir, smallSegments())
	if e, ok := l.Producer(1); !ok || len(e.Batches) != 2 || e.Batches[1].FirstOffset != info.BaseOffset {
		t.Fatalf("producer 1 after reopen: %+v", e)
	}
}

// reCRC fixes a snapshot's CRC after a test edits it.
func reCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], snapshotCRC))
	return b
}

// snapshotSeeds are valid and broken snapshot files covering offset 1000.
func snapshotSeeds() map[string][]byte {
	st := newProducerState()
	for i := range int64(8) {
		st.apply(0, 0, ProducerBatch{int32(i), int32(i), i, i})
	}
	st.apply(1<<40, 3, ProducerBatch{math.MaxInt32 - 1, 0, 100, 101})
	st.apply(5, 2, ProducerBatch{0, 9, 500, 509})
	st.txns = txnState{open: map[int64]int64{5: 500, 7: 900}, aborted: []AbortedTxn{{5, 200, 300}, {7, 250, 301}}}
	st.applyMarker(&record.Header{ProducerID: 9, ProducerEpoch: 4, BaseOffset: 950}) // a producer known by a marker only
	empty := newProducerState()
	valid := encodeProducers(&st, 1000)
	// A version 1 file: no transaction lists.
	v1 := bytes.Clone(encodeProducers(&empty, 1000))
	v1 = v1[:len(v1)-8]
	binary.BigEndian.PutUint16(v1, snapshotVersionV1)
	return map[string][]byte{
		"valid":         valid,
		"empty":         encodeProducers(&empty, 1000),
		"v1":            reCRC(v1),
		"torn":          valid[:len(valid)-5],
		"trailing":      reCRC(append(bytes.Clone(valid), 0)),
		"count-too-big": reCRC(binary.BigEndian.AppendUint32(bytes.Clone(valid[:14]), 1<<31)),
		"bad-crc":       append(bytes.Clone(valid[:len(valid)-1]), valid[len(valid)-1]^1),
		"garbage":       []byte("not a snapshot at all"),
	}
}

func TestProducerSnapshotCodec(t *testing.T) {
	seeds := snapshotSeeds()
	st, err := decodeProducers(seeds["valid"], 1000)
	must(t, err)
	if got := exportState(&st); len(got) != 4 || got[9].Epoch != 4 || len(got[9].Batches) != 0 || st.m[9].bumpedAt != 950 || len(got[0].Batches) != ProducerWindow || got[0].Batches[0].FirstOffset != 3 ||
		got[1<<40].Epoch != 3 || got[1<<40].Batches[0].LastSeq != 0 {
		t.Fatalf("decoded %v", got)
	}
	if len(st.txns.open) != 2 || st.txns.open[7] != 900 || len(st.txns.aborted) != 2 || st.txns.aborted[1] != (AbortedTxn{7, 250, 301}) {
		t.Fatalf("decoded transactions %+v", st.txns)
	}
	if v1, err := decodeProducers(seeds["v1"], 1000); err != nil || len(v1.m) != 0 || len(v1.txns.open) != 0 || len(v1.txns.aborted) != 0 {
		t.Fatalf("version 1 snapshot: %+v, %v", v1, err)
	}
	if again := encodeProducers(&st, 1000); !bytes.Equal(again, seeds["valid"]) {
		t.Fatal("encoding is not canonical")
	}
	if _, err := decodeProducers(seeds["valid"], 999); !errors.Is(err, errBadCheckpoint) {
		t.Fatalf("snapshot for another offset: %v", err)
	}
	for name, b := range seeds {
		if name == "valid" || name == "empty" || name == "v1" {
			continue
		}
		if _, err := decodeProducers(b, 1000); !errors.Is(err, errBadCheckpoint) {
			t.Errorf("%s: %v", name, err)
		}
	}
	valid := seeds["valid"]
	for n := range len(valid) {
		if _, err := decodeProducers(valid[:n], 1000); err == nil {
			t.Fatalf("prefix of %d bytes decoded", n)
		}
	}
	// Fields the CRC cannot vouch for: a batch at or past the covered offset,
	// producers out of order, a window over five.
	for name, edit := range map[string]func(b []byte){
		"offset past the snapshot": func(b []byte) { binary.BigEndian.PutUint64(b[len(b)-8:], 1000) },
		"window of six":            func(b []byte) { b[snapshotHeaderSize+10] = 6 },
		"negative epoch":           func(b []byte) { binary.BigEndian.PutUint16(b[snapshotHeaderSize+8:], 0xffff) },
		"aborted out of order":     func(b []byte) { binary.BigEndian.PutUint64(b[len(b)-8:], 300) },
		"aborted before its start": func(b []byte) { binary.BigEndian.PutUint64(b[len(b)-16:], 301) },
		"open past the snapshot":   func(b []byte) { binary.BigEndian.PutUint64(b[len(b)-4-2*snapshotAbortSize-8:], 1000) },
	} {
		b := bytes.Clone(valid)
		edit(b)
		if _, err := decodeProducers(reCRC(b), 1000); !errors.Is(err, errBadCheckpoint) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDecodeProducerSnapshot: any bytes decode to an error or to a state
// whose encoding is exactly those bytes (a version 1 file: those bytes
// without the transaction lists).
func FuzzDecodeProducerSnapshot(f *testing.F) {
	for _, b := range snapshotSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeProducers(b, 1000)
		if err != nil {
			if !errors.Is(err, errBadCheckpoint) {
				t.Fatalf("error %v does not wrap errBadCheckpoint", err)
			}
			return
		}
		again := encodeProducers(&st, 1000)
		if binary.BigEndian.Uint16(b) == snapshotVersionV1 {
			again = again[:len(again)-8]
			binary.BigEndian.PutUint16(again, snapshotVersionV1)
			reCRC(again)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decoded and encoded again differs:\n%x\n%x", b, again)
		}
	})
}

// TestWriteProducerSnapshotCorpus regenerates the seed corpus of
// FuzzDecodeProducerSnapshot under testdata/fuzz when
// SLUICE_WRITE_FUZZ_CORPUS=1; otherwise it checks that the corpus is there.
func TestWriteProducerSnapshotCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeProducerSnapshot")
	if os.Getenv("SLUICE_WRITE_FUZZ_CORPUS") != "1" {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) < len(snapshotSeeds()) {
			t.Fatalf("%s: %d seed files, %v (regenerate with SLUICE_WRITE_FUZZ_CORPUS=1)", dir, len(entries), err)
		}
		return
	}
	must(t, os.MkdirAll(dir, 0o755))
	for name, data := range snapshotSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		must(t, os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644))
	}
}

// TestDamagedOlderSegmentWithoutSnapshotStillOpens: with no producer snapshot
// the producer state is rebuilt from every batch header; a damaged header in
// the middle of an older segment must not keep the log from opening (the
// scrubber and the repair need it open), and the damage is still found.
func TestDamagedOlderSegmentWithoutSnapshotStillOpens(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	sizes := fillLog(t, dir, cfg, 30)
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snapshot"))
	for _, s := range snaps {
		must(t, os.Remove(s))
	}
	patch(t, segPath(dir, 0, ".log"), int64(sizes[0])+16, []byte{7}) // the second batch's magic byte
	l, err := Open(dir, cfg, nil)
	if err != nil {
		t.Fatalf("open with a damaged older segment and no producer snapshot: %v", err)
	}
	defer l.Close()
	var ce *CorruptError
	if err := l.Verify(context.Background(), 0); !errors.As(err, &ce) || ce.Segment != 0 {
		t.Fatalf("verify: %v, want the damage in segment 0", err)
	}
}
