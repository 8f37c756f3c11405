package log

import (
	"slices"
	"testing"
	"time"
)

// A tiered log's retention deletes only what the remote log holds: the
// rest is held back (counted) until SetUploaded moves past it.
func TestTieredRetentionWaitsForUploads(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	cfg.RetentionMs = 1000
	cfg.Tiered = true
	l := openLog(t, t.TempDir(), cfg)
	for i := range 6 { // one batch per segment, timestamps 0, 1000, ...
		mustAppend(t, l, nBatch(t, 1, 320, int64(i)*1000))
	}
	l.SetHighWatermark(l.EndOffset())
	if n, err := l.EnforceRetention(time.UnixMilli(1e9)); err != nil || n != 0 || l.HeldBack() != 5 {
		t.Fatalf("nothing uploaded: deleted %d (%v), held back %d; want 0 and 5", n, err, l.HeldBack())
	}
	l.SetUploaded(2)
	l.SetUploaded(1) // never backwards
	if n, err := l.EnforceRetention(time.UnixMilli(1e9)); err != nil || n != 2 || l.StartOffset() != 2 || l.HeldBack() != 3 {
		t.Fatalf("uploaded to 2: deleted %d (%v), start %d, held back %d; want 2, 2, 3", n, err, l.StartOffset(), l.HeldBack())
	}
	l.SetUploaded(5)
	if n, err := l.EnforceRetention(time.UnixMilli(1e9)); err != nil || n != 3 || l.HeldBack() != 0 {
		t.Fatalf("uploaded to 5: deleted %d (%v), held back %d; want 3, 0", n, err, l.HeldBack())
	}
}

// Closed hands out closed segments below the high watermark in order, and
// keeps a handed-out segment's file readable after retention deletes it.
func TestClosedSegmentsForUpload(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	cfg.RetentionMs = 1000
	l := openLog(t, t.TempDir(), cfg)
	for i := range 4 {
		mustAppend(t, l, nBatch(t, 1, 320, int64(i)*1000))
	}
	if _, ok := l.Closed(0); ok {
		t.Fatal("a segment above the high watermark was handed out")
	}
	l.SetHighWatermark(2)
	c, ok := l.Closed(0)
	if !ok || c.Base != 0 || c.Next != 1 || c.Size == 0 {
		t.Fatalf("Closed(0) = %+v, %v; want segment [0, 1)", c, ok)
	}
	if c2, ok := l.Closed(1); !ok || c2.Base != 1 || c2.Next != 2 {
		t.Fatalf("Closed(1) = %+v, %v; want segment [1, 2)", c2, ok)
	} else {
		c2.Release()
	}
	if _, ok := l.Closed(2); ok {
		t.Fatal("segment [2, 3) is not below the high watermark of 2")
	}
	l.SetHighWatermark(l.EndOffset())
	if _, ok := l.Closed(3); ok {
		t.Fatal("the active segment was handed out")
	}
	if n, err := l.EnforceRetention(time.UnixMilli(1e9)); err != nil || n != 3 {
		t.Fatalf("deleted %d (%v)", n, err)
	}
	b := make([]byte, c.Size)
	if _, err := c.ReaderAt().ReadAt(b, 0); err != nil {
		t.Fatalf("a held segment deleted by retention is no longer readable: %v", err)
	}
	c.Release()
}

// A tiered log keeps the epochs of the part retention deleted, and takes
// the remote log's older epochs in front of its own.
func TestTieredLogKeepsRemoteEpochs(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	cfg.RetentionMs = 0
	cfg.Tiered = true
	l := openLog(t, t.TempDir(), cfg)
	for i := range 4 {
		if _, err := l.Append(nBatch(t, 1, 320, int64(i)), 5); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.EndOffset())
	l.SetUploaded(3)
	if n, err := l.EnforceRetention(time.UnixMilli(1e9)); err != nil || n != 3 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if end, epoch := l.EndOffsetForEpoch(5); epoch != 5 || end != 4 || l.Epochs()[0].StartOffset != 0 {
		t.Fatalf("epoch 5 ends at %d (epoch %d), cache %v: the deleted part's epoch was dropped", end, epoch, l.Epochs())
	}
	if err := l.PrependEpochs([]EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 0}, {Epoch: 5, StartOffset: 0}}); err != nil {
		t.Fatal(err)
	}
	got := prependEpochs([]EpochEntry{{Epoch: 5, StartOffset: 3}, {Epoch: 6, StartOffset: 9}},
		[]EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 1}, {Epoch: 5, StartOffset: 2}})
	want := []EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 1}, {Epoch: 5, StartOffset: 2}, {Epoch: 6, StartOffset: 9}}
	if !slices.Equal(got, want) {
		t.Fatalf("prependEpochs = %v, want %v", got, want)
	}
	if end, epoch := endOffsetFor(got, 4, 20); end != 2 || epoch != 4 {
		t.Fatalf("epoch 4 ends at %d (%d), want 2", end, epoch)
	}
}
