package log

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

func hwFile(dir string) string { return filepath.Join(dir, HighWatermarkFile) }

func wantHW(t testing.TB, l *Log, want int64) {
	t.Helper()
	if got := l.HighWatermark(); got != want {
		t.Fatalf("high watermark %d, want %d", got, want)
	}
}

func TestHighWatermarkSetAndReopen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testConfig(), nil)
	must(t, err)
	wantHW(t, l, 0)
	appendEpochs(t, l, 1, 1, 1) // end 9
	l.SetHighWatermark(4)
	wantHW(t, l, 4)
	l.SetHighWatermark(2) // never backward
	wantHW(t, l, 4)
	l.SetHighWatermark(100) // clamped to the end
	wantHW(t, l, 9)
	l.SetHighWatermark(-5)
	wantHW(t, l, 9)
	must(t, l.Close()) // writes the checkpoint
	if b, err := os.ReadFile(hwFile(dir)); err != nil || string(b) != "9\n" {
		t.Fatalf("checkpoint %q, %v", b, err)
	}
	l = openLog(t, dir, testConfig())
	wantHW(t, l, 9)
}

// TestHighWatermarkCheckpointIsPeriodic runs on synctest's clock: the
// flusher's tick is the only thing that moves the checkpoint between
// SetHighWatermark and Close, and it does so within one interval.
func TestHighWatermarkCheckpointIsPeriodic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l := openLog(t, dir, testConfig())
		for range 10 {
			appendEpochs(t, l, 1)
		}
		// SetHighWatermark runs per fetch: it must not write a file each time.
		must(t, l.WaitFlushed(context.Background(), l.EndOffset())) // the start-up pass is done
		before := l.Fsyncs()
		for hw := range l.EndOffset() + 1 {
			l.SetHighWatermark(hw)
		}
		if n := l.Fsyncs() - before; n > 3 {
			t.Fatalf("%d fsyncs for %d SetHighWatermark calls", n, l.EndOffset()+1)
		}
		synctest.Wait()
		if b, _ := os.ReadFile(hwFile(dir)); string(b) == "30\n" {
			t.Fatal("the checkpoint was written before the flusher's tick")
		}
		// The flusher writes it at its next tick, without Close: the
		// bubble's clock moves one interval once everything else waits.
		<-time.After(hwCheckpointInterval)
		synctest.Wait()
		if b, err := os.ReadFile(hwFile(dir)); err != nil || string(b) != "30\n" {
			t.Fatalf("checkpoint %q (%v) one interval later, want 30", b, err)
		}
	})
}

func TestHighWatermarkAfterTruncation(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testConfig(), nil)
	must(t, err)
	appendEpochs(t, l, 1, 1, 1, 1) // end 12
	l.SetHighWatermark(12)
	must(t, l.TruncateTo(6))
	wantHW(t, l, 6)
	must(t, l.TruncateTo(3))
	wantHW(t, l, 3)
	appendEpochs(t, l, 1)
	wantHW(t, l, 3)
	l.SetHighWatermark(5)
	must(t, l.TruncateTo(3)) // the batch boundary below 5
	wantHW(t, l, 3)
	must(t, l.Close())
	l = openLog(t, dir, testConfig())
	wantHW(t, l, 3)
}

func TestHighWatermarkRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	for _, c := range []struct {
		name  string
		wreck func(t *testing.T, dir string)
		want  func(start, end int64) int64
	}{
		{"intact", func(*testing.T, string) {}, func(_, end int64) int64 { return end - 3 }},
		{"missing", func(t *testing.T, dir string) { must(t, os.Remove(hwFile(dir))) },
			func(start, _ int64) int64 { return start }},
		{"garbage", func(t *testing.T, dir string) { must(t, os.WriteFile(hwFile(dir), []byte("12x\n"), 0o644)) },
			func(start, _ int64) int64 { return start }},
		{"negative", func(t *testing.T, dir string) { must(t, os.WriteFile(hwFile(dir), []byte("-4\n"), 0o644)) },
			func(start, _ int64) int64 { return start }},
		{"below the start", func(t *testing.T, dir string) { must(t, os.WriteFile(hwFile(dir), []byte("1\n"), 0o644)) },
			func(start, _ int64) int64 { return start }},
		{"past a torn tail", func(t *testing.T, dir string) {
			must(t, os.WriteFile(hwFile(dir), []byte("1000\n"), 0o644))
			bases := segBases(t, dir)
			chop(t, segPath(dir, bases[len(bases)-1], ".log"), 5)
		}, func(_, end int64) int64 { return end }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			dir := t.TempDir()
			l, err := Open(dir, cfg, nil)
			must(t, err)
			for range 20 {
				appendEpochs(t, l, 1)
			}
			cfg.RetentionBytes = l.Size() / 2
			must(t, l.SetConfig(cfg))
			l.SetHighWatermark(l.EndOffset() - 3)
			if _, err := l.EnforceRetention(cfg.now()); err != nil || l.StartOffset() == 0 {
				t.Fatalf("setup: retention %v, start %d", err, l.StartOffset())
			}
			must(t, l.Close())
			c.wreck(t, dir)
			l = openLog(t, dir, cfg)
			wantHW(t, l, c.want(l.StartOffset(), l.EndOffset()))
		})
	}
}
