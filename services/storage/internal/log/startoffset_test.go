package log

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRaiseStartOffset deletes records inside the first segment: reads
// below the new start are out of range, the start survives a reopen, the
// high watermark bounds it, and retention deletes the segments wholly
// below it whatever the retention settings.
func TestRaiseStartOffset(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1 // nothing expires by time or size
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	for i := range 6 { // one 2-record batch per segment: offsets 0..11
		mustAppend(t, l, nBatch(t, 2, 150, int64(i)*1000))
	}
	if l.Segments() != 6 {
		t.Fatalf("%d segments, want 6", l.Segments())
	}
	l.SetHighWatermark(8)
	if _, err := l.RaiseStartOffset(9); err == nil {
		t.Fatal("records above the high watermark were deleted")
	}
	if got, err := l.RaiseStartOffset(5); err != nil || got != 5 {
		t.Fatalf("RaiseStartOffset(5) = %d, %v", got, err)
	}
	if got, err := l.RaiseStartOffset(3); err != nil || got != 5 {
		t.Fatalf("a lower offset moved the start back: %d, %v", got, err)
	}
	if l.StartOffset() != 5 {
		t.Fatalf("start offset %d, want 5", l.StartOffset())
	}
	_, err := l.Read(4, 1<<20, l.EndOffset())
	wantErr(t, err, ErrOffsetOutOfRange)
	// A read at the start returns the whole batch holding it (4..5).
	s, err := l.Read(5, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if hs := sliceBatches(t, s); len(hs) == 0 || hs[0].BaseOffset != 4 {
		t.Fatalf("read at the start gave batches %+v, want the one from offset 4", hs)
	}
	s.Release()

	// Retention with nothing expired still deletes the segments below the
	// start (0..1 and 2..3), not the one holding it.
	n, err := l.EnforceRetention(time.UnixMilli(0))
	if err != nil || n != 2 {
		t.Fatalf("retention deleted %d (%v), want the 2 segments below the start", n, err)
	}
	if l.StartOffset() != 5 {
		t.Fatalf("start offset %d after retention, want 5", l.StartOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, cfg)
	if l2.StartOffset() != 5 {
		t.Fatalf("start offset %d after reopening, want 5", l2.StartOffset())
	}
	_, err = l2.Read(4, 1<<20, l2.EndOffset())
	wantErr(t, err, ErrOffsetOutOfRange)
}

// TestStartOffsetCheckpointRecovery checks the checkpoint's edge cases: an
// unreadable file falls back to the first segment, a value past the log end
// is clamped to it, and a truncation below the start brings the start down.
func TestStartOffsetCheckpointRecovery(t *testing.T) {
	cfg := testConfig()
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	for i := range 3 {
		mustAppend(t, l, nBatch(t, 2, 10, int64(i)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, StartOffsetFile)
	for _, tc := range []struct {
		file string
		want int64
	}{{"garbage\n", 0}, {"4\n", 4}, {"99\n", 6}, {"-3\n", 0}} {
		if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, dir, cfg)
		if l.StartOffset() != tc.want {
			t.Fatalf("checkpoint %q: start offset %d, want %d", tc.file, l.StartOffset(), tc.want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 2 || l.EndOffset() != 2 {
		t.Fatalf("after truncating below the start: start %d end %d, want 2 and 2", l.StartOffset(), l.EndOffset())
	}
}
