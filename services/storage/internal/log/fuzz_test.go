package log

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

// recoverSeeds are the starting segment files of FuzzRecover.
func recoverSeeds(t testing.TB) map[string][]byte {
	var valid []byte
	for i := range 4 {
		b := nBatch(t, 1+i, 20, int64(i)*100)
		record.SetBaseOffset(b, int64(len(valid))) // any increasing offsets
		valid = append(valid, b...)
	}
	flipped := bytes.Clone(valid)
	flipped[len(flipped)-3] ^= 0x40
	backwards := append(bytes.Clone(valid), valid[:len(nBatch(t, 1, 20, 0))]...)
	return map[string][]byte{
		"empty":        nil,
		"valid":        valid,
		"torn":         valid[:len(valid)-7],
		"zero-tail":    append(bytes.Clone(valid), make([]byte, 100)...),
		"flipped":      flipped,
		"garbage":      []byte("this is not a segment file at all, not even close"),
		"header-only":  valid[:record.HeaderSize],
		"offsets-back": backwards,
	}
}

// FuzzRecover writes arbitrary bytes as the only segment file and opens the
// log: recovery must not panic or fail, must keep a prefix of whole valid
// batches, and the log must take appends and reopen to the same state.
//
// Each run opens, fsyncs and closes a log twice, so fuzz on tmpfs and keep
// minimization short, or progress stalls for a minute per new input:
//
//	TMPDIR=/dev/shm go test -run '^$' -fuzz 'FuzzRecover$' -fuzzminimizetime 3s ./internal/log/
func FuzzRecover(f *testing.F) {
	for _, seed := range recoverSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "00000000000000000000.log")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.IndexIntervalBytes = 64
		l, err := Open(dir, cfg, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		kept := fileSize(t, path)
		if kept > int64(len(data)) || !bytes.Equal(data[:kept], mustRead(t, path)) {
			t.Fatalf("recovery kept %d bytes that are not a prefix of the input", kept)
		}
		end := l.EndOffset()
		// Every offset of the log reads back as whole valid batches.
		for off := l.StartOffset(); off < end; {
			s, err := l.Read(off, 1<<20, end)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			hs := sliceBatches(t, s)
			s.Release()
			if len(hs) == 0 {
				t.Fatalf("Read(%d) empty below the end offset %d", off, end)
			}
			off = hs[len(hs)-1].LastOffset() + 1
		}
		// The recovered batches may carry any leader epoch: append at the
		// latest one (or 0), which is never stale.
		info, err := l.Append(nBatch(t, 2, 10, 1), max(l.LatestEpoch(), 0))
		if err != nil || info.BaseOffset != end {
			t.Fatalf("append after recovery: %+v, %v (end was %d)", info, err, end)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2, err := Open(dir, cfg, nil)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l2.Close()
		if l2.EndOffset() != end+2 {
			t.Fatalf("reopened at end %d, want %d", l2.EndOffset(), end+2)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteFuzzCorpus regenerates the seed corpus under testdata/fuzz when
// SLUICE_WRITE_FUZZ_CORPUS=1; otherwise it checks that the corpus is there.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRecover")
	if os.Getenv("SLUICE_WRITE_FUZZ_CORPUS") != "1" {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) < 5 {
			t.Fatalf("%s: %d seed files, %v (regenerate with SLUICE_WRITE_FUZZ_CORPUS=1)", dir, len(entries), err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range recoverSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzRecoverIndex replaces an older segment's offset index or time index
// with arbitrary bytes: Open must notice anything wrong, rebuild, and answer
// every look-up correctly.
func FuzzRecoverIndex(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 1, 0}, false)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, true)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 3}, true)
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	cfg.IndexIntervalBytes = 300
	f.Fuzz(func(t *testing.T, data []byte, timeIndex bool) {
		dir := t.TempDir()
		fillLog(t, dir, cfg, 12)
		suffix := ".index"
		if timeIndex {
			suffix = ".timeindex"
		}
		if err := os.WriteFile(segPath(dir, 0, suffix), data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, cfg, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		checkLog(t, l, 12)
	})
}
