package log

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

// fillLog appends n batches of 3 records (timestamps 10i..10i+2) and closes
// the log, returning the batches' sizes.
func fillLog(t *testing.T, dir string, cfg Config, n int) []int {
	t.Helper()
	l, err := Open(dir, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for i := range n {
		b := nBatch(t, 3, 40, int64(i)*10)
		sizes = append(sizes, len(b))
		mustAppend(t, l, b)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return sizes
}

// checkLog verifies a reopened log holds exactly batches 0..n-1 of fillLog,
// that look-ups work for every offset, and that it takes new appends.
func checkLog(t *testing.T, l *Log, n int) {
	t.Helper()
	if l.EndOffset() != int64(3*n) {
		t.Fatalf("end offset %d, want %d", l.EndOffset(), 3*n)
	}
	recs := readRecords(t, l, 0)
	if len(recs) != 3*n {
		t.Fatalf("%d records, want %d", len(recs), 3*n)
	}
	for off := range int64(3 * n) {
		s, err := l.Read(off, 1, l.EndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		hs := sliceBatches(t, s)
		s.Release()
		if len(hs) != 1 || hs[0].BaseOffset != off/3*3 {
			t.Fatalf("Read(%d) gave %+v", off, hs)
		}
		if got, ts, err := l.OffsetForTimestamp(off/3*10 + off%3); err != nil || got != off || ts != off/3*10+off%3 {
			t.Fatalf("OffsetForTimestamp for offset %d: %d, %d, %v", off, got, ts, err)
		}
	}
	info := mustAppend(t, l, nBatch(t, 3, 40, int64(n)*10))
	if info.BaseOffset != int64(3*n) {
		t.Fatalf("append after recovery at %d, want %d", info.BaseOffset, 3*n)
	}
	if got := readRecords(t, l, int64(3*n)); len(got) != 3 {
		t.Fatalf("read back %d records of the new append", len(got))
	}
}

func TestRecoverTornTail(t *testing.T) {
	const n = 8
	for _, c := range []struct {
		name  string
		keep  int // batches expected to survive
		wreck func(t *testing.T, path string, sizes []int)
	}{
		{"chop one byte", n - 1, func(t *testing.T, path string, _ []int) { chop(t, path, 1) }},
		{"chop into the header", n - 1, func(t *testing.T, path string, sizes []int) { chop(t, path, sizes[n-1]-20) }},
		{"chop half a batch", n - 1, func(t *testing.T, path string, sizes []int) { chop(t, path, sizes[n-1]/2) }},
		{"zeros appended", n, func(t *testing.T, path string, _ []int) { appendBytes(t, path, make([]byte, 4096)) }},
		{"a few zeros appended", n, func(t *testing.T, path string, _ []int) { appendBytes(t, path, make([]byte, 5)) }},
		{"last batch zeroed", n - 1, func(t *testing.T, path string, sizes []int) {
			patch(t, path, -int64(sizes[n-1]), make([]byte, sizes[n-1]))
		}},
		{"byte flipped in the last batch", n - 1, func(t *testing.T, path string, _ []int) { flip(t, path, -5) }},
		{"bad magic in the last batch", n - 1, func(t *testing.T, path string, sizes []int) { flip(t, path, -int64(sizes[n-1])+16) }},
		{"byte flipped in batch 5", 5, func(t *testing.T, path string, sizes []int) {
			flip(t, path, -int64(sizes[5]+sizes[6]+sizes[7])+70)
		}},
		{"garbage appended", n, func(t *testing.T, path string, _ []int) { appendBytes(t, path, []byte("garbage after the last batch")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.SegmentBytes = 1 << 20
			sizes := fillLog(t, dir, cfg, n)
			path := segPath(dir, 0, ".log")
			c.wreck(t, path, sizes)
			l := openLog(t, dir, cfg)
			valid := 0
			for _, s := range sizes[:c.keep] {
				valid += s
			}
			if got := fileSize(t, path); got != int64(valid) {
				t.Fatalf("segment is %d bytes after recovery, want the %d valid ones", got, valid)
			}
			checkLog(t, l, c.keep)
			// Recovery is stable: a second reopen changes nothing.
			end := l.EndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l2 := openLog(t, dir, cfg); l2.EndOffset() != end {
				t.Fatalf("second reopen: end %d, want %d", l2.EndOffset(), end)
			}
		})
	}
}

func TestRecoverIndexes(t *testing.T) {
	const n = 30
	cfg := testConfig()
	cfg.SegmentBytes = 1200 // several segments
	cfg.IndexIntervalBytes = 300
	for _, c := range []struct {
		name  string
		wreck func(t *testing.T, dir string, second int64)
	}{
		{"deleted", func(t *testing.T, dir string, second int64) {
			for _, base := range []int64{0, second} {
				must(t, os.Remove(segPath(dir, base, ".index")))
				must(t, os.Remove(segPath(dir, base, ".timeindex")))
			}
		}},
		{"garbage", func(t *testing.T, dir string, second int64) {
			garbage := make([]byte, 64)
			for i := range garbage {
				garbage[i] = byte(rand.IntN(256))
			}
			must(t, os.WriteFile(segPath(dir, 0, ".index"), garbage, 0o644))
			must(t, os.WriteFile(segPath(dir, second, ".timeindex"), garbage[:36], 0o644))
		}},
		{"wrong size", func(t *testing.T, dir string, second int64) {
			appendBytes(t, segPath(dir, 0, ".index"), []byte{1, 2, 3})
			appendBytes(t, segPath(dir, 0, ".timeindex"), []byte{1})
		}},
		{"last entries lost", func(t *testing.T, dir string, second int64) {
			chop(t, segPath(dir, 0, ".index"), indexEntrySize)
			chop(t, segPath(dir, second, ".timeindex"), 2*timeEntrySize)
		}},
		{"position past the segment", func(t *testing.T, dir string, second int64) {
			patch(t, segPath(dir, 0, ".index"), -4, []byte{0, 0, 0xff, 0xff})
		}},
		{"entry off a batch boundary", func(t *testing.T, dir string, second int64) {
			patch(t, segPath(dir, 0, ".index"), -1, []byte{7})
		}},
		{"zeroed", func(t *testing.T, dir string, second int64) {
			size := fileSize(t, segPath(dir, second, ".index"))
			must(t, os.WriteFile(segPath(dir, second, ".index"), make([]byte, size), 0o644))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fillLog(t, dir, cfg, n)
			before := readIndexFiles(t, dir)
			if len(before) < 6 {
				t.Fatalf("want at least 3 segments, have files %v", before)
			}
			c.wreck(t, dir, segBases(t, dir)[1])
			l := openLog(t, dir, cfg)
			// Older segments' rebuilt indexes equal what appends wrote.
			after := readIndexFiles(t, dir)
			for name, b := range before {
				if !bytes.Equal(after[name], b) && !isActive(l, name) {
					t.Errorf("%s not rebuilt to its original %d bytes (has %d)", name, len(b), len(after[name]))
				}
			}
			checkLog(t, l, n)
		})
	}
}

// TestRecoverTornOlderSegment: a segment before the last that does not end
// cleanly cuts the log there; the later segments go.
func TestRecoverTornOlderSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	sizes := fillLog(t, dir, cfg, 30)
	perSeg := 1200 / sizes[0] // batches per segment
	chop(t, segPath(dir, 0, ".log"), 10)
	l := openLog(t, dir, cfg)
	if l.Segments() != 1 {
		t.Fatalf("%d segments, want only the cut first one", l.Segments())
	}
	checkLog(t, l, perSeg-1)
	if _, err := os.Stat(segPath(dir, int64(3*perSeg), ".log")); !os.IsNotExist(err) {
		t.Fatalf("later segment still on disk: %v", err)
	}
}

// TestRecoverOlderSegmentCutOnABatchBoundary: an older segment that lost
// its last batches whole leaves a gap before the next segment; recovery
// cuts the log at the gap instead of serving a log with records missing.
func TestRecoverOlderSegmentCutOnABatchBoundary(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	sizes := fillLog(t, dir, cfg, 30)
	perSeg := 1200 / sizes[0]
	must(t, os.Truncate(segPath(dir, 0, ".log"), int64(2*sizes[0])))
	l := openLog(t, dir, cfg)
	if l.Segments() != 1 || !l.RecoveryCut() {
		t.Fatalf("%d segments, cut %v; want only the first one, cut", l.Segments(), l.RecoveryCut())
	}
	checkLog(t, l, 2)
	if _, err := os.Stat(segPath(dir, int64(3*perSeg), ".log")); !os.IsNotExist(err) {
		t.Fatalf("later segment still on disk: %v", err)
	}
}

func TestRecoverStrayFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	fillLog(t, dir, cfg, 3)
	for name, data := range map[string]string{
		"00000000000000000000.index.tmp":   "half-written",
		"00000000000000000042.log.deleted": "old",
		"00000000000000000999.index":       "orphan",
		"foo.log":                          "bad name",
		"123.log":                          "bad name",
		"notes.txt":                        "unknown",
	} {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	l := openLog(t, dir, cfg)
	checkLog(t, l, 3)
	for name, want := range map[string]bool{
		"00000000000000000000.index.tmp":   false,
		"00000000000000000042.log.deleted": false,
		"00000000000000000999.index":       false,
		"foo.log":                          true, // reported and skipped, left for an operator
		"123.log":                          true,
		"notes.txt":                        true,
	} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", name, err == nil, want)
		}
	}
}

func TestRecoverOverlappingSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	fillLog(t, dir, cfg, 30)
	// A stray copy of segment 0 named as if it started at offset 1: it
	// overlaps segment 0 and cuts the log after it.
	data, err := os.ReadFile(segPath(dir, 0, ".log"))
	must(t, err)
	must(t, os.WriteFile(segPath(dir, 1, ".log"), data, 0o644))
	l := openLog(t, dir, cfg)
	if l.Segments() != 1 || l.EndOffset() != int64(len(data)/len(nBatch(t, 3, 40, 0))*3) {
		t.Fatalf("%d segments, end %d", l.Segments(), l.EndOffset())
	}
}

func segBases(t *testing.T, dir string) []int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	must(t, err)
	var bases []int64
	for _, name := range names {
		if base, ok := parseBase(filepath.Base(name), ".log"); ok {
			bases = append(bases, base)
		}
	}
	return bases
}

func readIndexFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, pattern := range []string{"*.index", "*.timeindex"} {
		names, err := filepath.Glob(filepath.Join(dir, pattern))
		must(t, err)
		for _, name := range names {
			b, err := os.ReadFile(name)
			must(t, err)
			out[filepath.Base(name)] = b
		}
	}
	return out
}

// isActive reports whether an index file belongs to the last segment, whose
// files the reopened log has written to already.
func isActive(l *Log, name string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	base, _ := parseBase(name[:20]+".log", ".log")
	return base == l.segs[len(l.segs)-1].base
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func chop(t *testing.T, path string, n int) {
	t.Helper()
	must(t, os.Truncate(path, fileSize(t, path)-int64(n)))
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write(b)
	must(t, err)
	must(t, f.Close())
}

// patch overwrites bytes at off (negative: from the end).
func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	if off < 0 {
		off += fileSize(t, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(b, off)
	must(t, err)
	must(t, f.Close())
}

// flip inverts the byte at off (negative: from the end).
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	if off < 0 {
		off += int64(len(data))
	}
	data[off] ^= 0xff
	must(t, os.WriteFile(path, data, 0o644))
}

// TestWrongIndexEntryIsReported: an entry in the middle of an older
// segment's index that is monotonic but names the wrong offset passes the
// start-up checks (which read the tail only); reads through it must report
// corruption instead of returning the wrong batch.
func TestWrongIndexEntryIsReported(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	cfg.IndexIntervalBytes = 0 // an entry per batch: (0,0), (3,p1), (6,p2) ...
	fillLog(t, dir, cfg, 12)
	path := segPath(dir, 0, ".index")
	idx, err := decodeIndex(mustRead(t, path), fileSize(t, segPath(dir, 0, ".log")))
	must(t, err)
	if len(idx) < 4 {
		t.Fatalf("index has %d entries", len(idx))
	}
	patch(t, path, indexEntrySize, appendIndexBytes(nil, []indexEntry{{rel: idx[1].rel - 1, pos: idx[1].pos}}))
	l := openLog(t, dir, cfg)
	_, err = l.Read(int64(idx[1].rel-1), 100, l.EndOffset())
	wantErr(t, err, record.ErrCorrupt)
}
