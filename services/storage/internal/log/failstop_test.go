package log

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/services/storage/internal/log/faultfs"
)

var _ FileSystem = (*faultfs.FS)(nil)

// failSite is one of the places where a failed write or fsync fails the log
// (a failLocked call): the fault that reaches it and the operation that
// meets the fault.
type failSite struct {
	name  string
	cfg   func(*Config)
	fault faultfs.Rule
	// hold keeps the flusher inside an fsync of the active segment while
	// the operation runs, so that a WaitFlushed waiter is blocked when the
	// failure comes and only the failure can release it. The flush site
	// goes without: its fault is that fsync.
	hold bool
	// run meets the fault. acked is the end of what was flushed before,
	// end the log end offset.
	run func(t *testing.T, ctx context.Context, l *Log, acked, end int64) error
	// flushed is the flushed offset the failure leaves, for good; nil
	// means acked. keep is the least log end offset a reopen must find;
	// nil means acked.
	flushed, keep func(acked, end int64) int64
}

// TestFailStop checks the fail-stop contract at every site that fails the
// log: the operation that meets a failed write, fsync, rename, truncation or
// removal returns ErrFailed; a WaitFlushed waiter blocked at that moment is
// released (with ErrFailed, unless the operation itself gave its records
// up); every later Append and flush returns ErrFailed; the flushed offset
// never moves again; and a reopen on the real file system recovers a
// consistent log holding every record flushed before the failure. Each case
// fails if its site's failLocked call is removed.
func TestFailStop(t *testing.T) {
	sites := []failSite{{
		name:  "append/segment write",
		fault: faultfs.Rule{Op: faultfs.Write, Name: "*.log", Torn: true},
		hold:  true,
		run: func(t *testing.T, _ context.Context, l *Log, _, end int64) error {
			_, err := l.Append(stampedBatch(t, end), 7)
			return err
		},
	}, {
		name:  "epochs/leader-epoch checkpoint",
		fault: faultfs.Rule{Op: faultfs.Rename, Name: EpochCheckpointFile + tmpSuffix},
		hold:  true,
		run: func(t *testing.T, _ context.Context, l *Log, _, end int64) error {
			_, err := l.Append(stampedBatch(t, end), 8) // a new leader epoch
			return err
		},
	}, {
		name:  "flush/segment fsync",
		fault: faultfs.Rule{Op: faultfs.Sync, Name: "*.log"},
		run: func(_ *testing.T, ctx context.Context, l *Log, _, end int64) error {
			return l.WaitFlushed(ctx, end)
		},
	}, {
		name:  "hwcheckpoint/high-watermark checkpoint",
		fault: faultfs.Rule{Op: faultfs.Write, Name: HighWatermarkFile + tmpSuffix},
		hold:  true,
		run: func(_ *testing.T, _ context.Context, l *Log, acked, _ int64) error {
			l.SetHighWatermark(acked)
			return l.saveHighWatermark() // what the flusher's tick runs; the flusher is held
		},
	}, {
		name:  "reset/segment removal",
		fault: faultfs.Rule{Op: faultfs.Remove, Name: "*.log"},
		hold:  true,
		run: func(_ *testing.T, _ context.Context, l *Log, _, end int64) error {
			return l.ResetTo(end + 100)
		},
		// ResetTo gives up every record and restarts the log at its
		// offset, flushed included, before it deletes the files: waiters
		// below it are done. The files it failed to delete come back on
		// reopen.
		flushed: func(_, end int64) int64 { return end + 100 },
	}, {
		name: "retention/leader-epoch checkpoint",
		cfg:  func(c *Config) { c.RetentionBytes = 1 },
		// Deleting the first segment moves the start past epoch 7's first
		// offset, so the checkpoint is rewritten.
		fault: faultfs.Rule{Op: faultfs.Open, Name: EpochCheckpointFile + tmpSuffix},
		hold:  true,
		run: func(t *testing.T, _ context.Context, l *Log, _, _ int64) error {
			n, err := l.EnforceRetention(time.Now())
			if n == 0 {
				t.Errorf("retention deleted no segment (start %d, %d segments)", l.StartOffset(), l.Segments())
			}
			return err
		},
	}, {
		name:  "retention/truncation",
		fault: faultfs.Rule{Op: faultfs.Truncate, Name: "*.log"},
		hold:  true,
		run: func(_ *testing.T, _ context.Context, l *Log, _, _ int64) error {
			return l.TruncateTo(30) // inside the first segment: the later ones go
		},
		flushed: func(int64, int64) int64 { return 30 },
		keep:    func(int64, int64) int64 { return 30 },
	}, {
		name:  "startoffset/log start offset checkpoint",
		fault: faultfs.Rule{Op: faultfs.Sync, Name: StartOffsetFile + tmpSuffix},
		hold:  true,
		run: func(_ *testing.T, _ context.Context, l *Log, _, _ int64) error {
			_, err := l.RaiseStartOffset(30)
			return err
		},
	}}
	for _, site := range sites {
		t.Run(site.name, func(t *testing.T) { testFailStop(t, site) })
	}
}

func testFailStop(t *testing.T, site failSite) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	ffs := faultfs.New()
	cfg := testConfig()
	if site.cfg != nil {
		site.cfg(&cfg)
	}
	cfg.FS = ffs
	l := openLog(t, dir, cfg)
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the log's Close, which waits for the flusher

	// 90 acknowledged records over two segments.
	for range 30 {
		mustAppend(t, l, stampedBatch(t, l.EndOffset()))
	}
	acked := l.EndOffset()
	if err := l.WaitFlushed(ctx, acked); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(acked - 1)
	if l.Segments() < 2 {
		t.Fatalf("setup: %d segment", l.Segments())
	}

	// One more append, not yet flushed, and a waiter for it.
	if site.hold {
		ffs.Add(faultfs.Rule{Op: faultfs.Sync, Name: "*.log", Hold: gate})
	} else {
		ffs.Add(site.fault)
	}
	end := mustAppend(t, l, stampedBatch(t, l.EndOffset())).LastOffset + 1
	waited := make(chan error, 1)
	go func() { waited <- l.WaitFlushed(ctx, end) }()
	if site.hold {
		testkit.WaitFor(t, 10*time.Second, "the flusher to reach the fsync of the new append", func() bool { return ffs.Holding() > 0 })
		ffs.Add(site.fault)
	}

	err := site.run(t, ctx, l, acked, end)
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("the operation that met the fault returned %v, want ErrFailed", err)
	}
	if ffs.Injected() == 0 {
		t.Fatal("the fault was never met")
	}
	wantFlushed, keep := acked, acked
	if site.flushed != nil {
		wantFlushed = site.flushed(acked, end)
	}
	if site.keep != nil {
		keep = site.keep(acked, end)
	}
	// The waiter is released while the flusher is still held: by the
	// failure itself, not by a flush pass ending.
	err = <-waited
	switch {
	case wantFlushed >= end && err != nil:
		t.Fatalf("waiter for offsets the operation gave up: %v, want nil", err)
	case wantFlushed < end && !errors.Is(err, ErrFailed):
		t.Fatalf("waiter blocked when the log failed: %v, want ErrFailed", err)
	}
	if _, err := l.Append(stampedBatch(t, l.EndOffset()), 9); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failure: %v, want ErrFailed", err)
	}
	if err := l.WaitFlushed(ctx, l.FlushedOffset()+1); !errors.Is(err, ErrFailed) {
		t.Fatalf("flush after the failure: %v, want ErrFailed", err)
	}
	release() // the held pass ends, and must publish nothing
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("close of a failed log: %v, want ErrFailed", err)
	}
	if got := l.FlushedOffset(); got != wantFlushed {
		t.Fatalf("flushed offset %d after the failure, want %d (acknowledged before it: %d)", got, wantFlushed, acked)
	}
	if hw := l.HighWatermark(); hw > wantFlushed {
		t.Fatalf("high watermark %d past the flushed offset %d", hw, wantFlushed)
	}

	// A reopen on the real file system recovers from what the disk holds.
	l = openLog(t, dir, testConfig())
	if l.EndOffset() < keep {
		t.Fatalf("reopened log ends at %d, below the %d records flushed before the failure", l.EndOffset(), keep)
	}
	checkStamped(t, l)
	info := mustAppend(t, l, stampedBatch(t, l.EndOffset()))
	if err := l.WaitFlushed(ctx, info.LastOffset+1); err != nil {
		t.Fatalf("reopened log does not flush: %v", err)
	}
}

// stampedBatch is a batch of three records whose timestamps are the offsets
// they get when appended at off: a reader checks any record against its
// offset.
func stampedBatch(t testing.TB, off int64) []byte {
	return batch(t, 40, off, off+1, off+2)
}

// checkStamped checks that the log holds, from its start to its end, exactly
// the stamped records appended at those offsets.
func checkStamped(t testing.TB, l *Log) {
	t.Helper()
	start, end := l.StartOffset(), l.EndOffset()
	recs := readRecords(t, l, start)
	if int64(len(recs)) != end-start {
		t.Fatalf("%d records in [%d, %d)", len(recs), start, end)
	}
	for i, r := range recs {
		if off := start + int64(i); r.Offset != off || r.Timestamp != off {
			t.Fatalf("record %d: offset %d, timestamp %d; want both %d", i, r.Offset, r.Timestamp, off)
		}
	}
}
