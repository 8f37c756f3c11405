package log

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

func TestGroupCommit(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	ctx := context.Background()
	if err := l.WaitFlushed(ctx, 0); err != nil { // the start-up pass
		t.Fatal(err)
	}
	const writers, each = 16, 25
	before := l.Fsyncs()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				info, err := l.Append(nBatch(t, 2, 100, int64(w*1000+i)), 1)
				if err == nil {
					err = l.WaitFlushed(ctx, info.LastOffset+1)
				}
				if err == nil && l.FlushedOffset() <= info.LastOffset {
					err = errors.New("WaitFlushed returned before the flushed offset passed the append")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	appends := int64(writers * each)
	fsyncs := l.Fsyncs() - before
	t.Logf("%d appends with WaitFlushed, %d fsyncs (%d segments)", appends, fsyncs, l.Segments())
	if fsyncs >= appends {
		t.Fatalf("%d fsyncs for %d appends: no group commit", fsyncs, appends)
	}
	if l.FlushedOffset() != l.EndOffset() {
		t.Fatalf("flushed %d, end %d", l.FlushedOffset(), l.EndOffset())
	}
	if got := readRecords(t, l, 0); len(got) != 2*writers*each {
		t.Fatalf("%d records", len(got))
	}
}

func TestWaitFlushedEdges(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	info := mustAppend(t, l, nBatch(t, 2, 10, 1))
	ctx := context.Background()
	_, err := l.Append(nBatch(t, 1, 10, 2), 7) // mustAppend's epoch
	if err != nil {
		t.Fatal(err)
	}
	// Beyond the end: an error, not a wait forever.
	wantErr(t, l.WaitFlushed(ctx, 100), ErrOffsetOutOfRange)
	// Truncated away while unflushed or flushed: the flushed offset follows.
	if err := l.WaitFlushed(ctx, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(info.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	if l.FlushedOffset() != 2 {
		t.Fatalf("flushed %d after truncation to 2", l.FlushedOffset())
	}
	wantErr(t, l.WaitFlushed(ctx, 3), ErrOffsetOutOfRange)
	// A cancelled context stops the wait.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	mustAppend(t, l, nBatch(t, 1, 10, 3))
	if err := l.WaitFlushed(cctx, l.EndOffset()); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	// Close wakes waiters after its final flush.
	mustAppend(t, l, nBatch(t, 1, 10, 4))
	done := make(chan error, 1)
	go func() { done <- l.WaitFlushed(ctx, l.EndOffset()) }()
	must(t, l.Close())
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter woken by Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by Close")
	}
	wantErr(t, l.WaitFlushed(ctx, l.EndOffset()+1), ErrClosed)
}

// TestConcurrentUse runs appenders (with rising leader epochs, so some are
// fenced), readers, waiters, epoch and high-watermark users, retention and a
// truncation together; with -race it checks the locking.
func TestConcurrentUse(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.RetentionBytes = 20_000
	l := openLog(t, t.TempDir(), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopAll := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopAll() // also when the wait below fails the test
	for range 3 {
		wg.Go(func() {
			for i := range 150 {
				info, err := l.Append(nBatch(t, 3, 50, int64(i)), int32(i/50))
				if errors.Is(err, ErrStaleEpoch) {
					continue // another writer moved to a later epoch first
				}
				if err != nil {
					t.Error(err)
					return
				}
				l.SetHighWatermark(info.LastOffset + 1)
				if i%10 == 0 {
					if err := l.WaitFlushed(ctx, info.LastOffset+1); err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start, end := l.StartOffset(), l.EndOffset()
				s, err := l.Read(start+(end-start)/2, 4096, end)
				if err != nil {
					if errors.Is(err, ErrOffsetOutOfRange) {
						continue // retention moved the start meanwhile
					}
					t.Error(err)
					return
				}
				// The truncation below may cut the segment under a slice
				// read meanwhile: TruncateTo documents the short read.
				if _, err := s.ReadAll(); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Error(err)
				}
				s.Release()
				_, _, _ = l.OffsetForTimestamp(75)
				if hw := l.HighWatermark(); hw < start { // start only grows
					t.Errorf("high watermark %d below the start offset %d", hw, start)
				}
				_, _ = l.EndOffsetForEpoch(1)
				_ = l.Epochs()
				_ = l.LatestEpoch()
				select {
				case <-l.Changed():
				case <-stop:
					return
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			l.SetHighWatermark(l.EndOffset())
			if _, err := l.EnforceRetention(time.Now()); err != nil {
				t.Error(err)
			}
		}
	})
	// Truncate while everything runs, once the log has some data: the cut may
	// fall on a batch boundary or not.
	testkit.WaitFor(t, 30*time.Second, "300 records appended", func() bool { return l.EndOffset() >= 300 })
	end := l.EndOffset()
	if err := l.TruncateTo(end - end%3); err != nil && !errors.Is(err, ErrNotBatchBoundary) && !errors.Is(err, ErrOffsetOutOfRange) {
		t.Error(err)
	}
	stopAll()
	if err := l.WaitFlushed(ctx, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	checkEpochInvariants(t, l)
}

// TestObserveFlushes: every flush pass that synced an append is reported
// with its duration.
func TestObserveFlushes(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	var mu sync.Mutex
	var passes []time.Duration
	l.ObserveFlushes(func(d time.Duration) {
		mu.Lock()
		passes = append(passes, d)
		mu.Unlock()
	})
	for i := range 3 {
		mustAppend(t, l, nBatch(t, 3, 40, int64(i)*10))
		if err := l.WaitFlushed(context.Background(), l.EndOffset()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(passes) < 3 {
		t.Fatalf("%d flush passes observed for 3 waited appends", len(passes))
	}
	for _, d := range passes {
		if d <= 0 {
			t.Fatalf("a flush pass of %v", d)
		}
	}
}
