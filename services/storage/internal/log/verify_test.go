package log

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

// corruptLog fills a log of several segments, damages the second batch of
// the segment starting at batch segBatch with damage, and reopens it. The
// start-up checks read only each older segment's tail, so the damage is
// still there.
func corruptLog(t *testing.T, segBatch int, damage func(path string, at int64)) (*Log, []int) {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	sizes := fillLog(t, dir, cfg, 30)
	damage(segPath(dir, int64(3*segBatch), ".log"), int64(sizes[0]))
	return openLog(t, dir, cfg), sizes
}

func TestCorruptBatchIsNeverServed(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string, at int64){
		"bit flip":  func(t *testing.T, path string, at int64) { flip(t, path, at+40) },
		"zero fill": func(t *testing.T, path string, at int64) { patch(t, path, at+20, make([]byte, 60)) },
	} {
		t.Run(name, func(t *testing.T) {
			l, sizes := corruptLog(t, 0, func(path string, at int64) { damage(t, path, at) })
			// The first batch is good and served.
			if s, err := l.Read(0, sizes[0], l.EndOffset()); err != nil || s.Size() != int64(sizes[0]) {
				t.Fatalf("read of the good first batch: %d bytes, %v", s.Size(), err)
			} else {
				s.Release()
			}
			// A read that takes in the damaged batch fails with where it is.
			_, err := l.Read(0, 1<<20, l.EndOffset())
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptData) || ce.Segment != 0 || ce.Pos != int64(sizes[0]) || ce.ValidEnd != 3 {
				t.Fatalf("read over the damage: %v (%+v)", err, ce)
			}
			if _, err := l.Read(3, 1<<20, l.EndOffset()); !errors.As(err, &ce) || ce.ValidEnd != 3 {
				t.Fatalf("read from the damaged batch: %v", err)
			}
			// The scrubber finds the same place; cutting there leaves a valid
			// prefix that takes appends.
			var se *CorruptError
			if err := l.Verify(context.Background(), 0); !errors.As(err, &se) || se.Pos != ce.Pos || se.ValidEnd != ce.ValidEnd {
				t.Fatalf("Verify: %v", err)
			}
			if err := l.TruncateCorrupt(se); err != nil {
				t.Fatal(err)
			}
			if l.EndOffset() != 3 || l.Segments() != 1 {
				t.Fatalf("after the cut: end %d, %d segments", l.EndOffset(), l.Segments())
			}
			if err := l.Verify(context.Background(), 0); err != nil {
				t.Fatalf("Verify after the cut: %v", err)
			}
			checkLog(t, l, 1)
		})
	}
}

func TestVerifyFindsDamageInALaterSegment(t *testing.T) {
	l, sizes := corruptLog(t, 5, func(path string, at int64) { flip(t, path, at+50) })
	perSeg := 1200 / sizes[0]
	if perSeg != 5 {
		t.Skipf("segments hold %d batches, the test expects 5", perSeg)
	}
	// Everything before the damaged segment reads fine.
	if got := len(readRecordsTo(t, l, 0, 15)); got != 15 {
		t.Fatalf("%d records before the damaged segment", got)
	}
	err := l.Verify(context.Background(), 0)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != 15 || ce.ValidEnd != 18 {
		t.Fatalf("Verify: %v", err)
	}
	if err := l.TruncateCorrupt(ce); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 18 {
		t.Fatalf("end after the cut: %d", l.EndOffset())
	}
	checkLog(t, l, 6)
}

// readRecordsTo reads the offsets of the records from offset up to (not
// including) end, through Read with end as the high watermark.
func readRecordsTo(t *testing.T, l *Log, offset, end int64) []int64 {
	t.Helper()
	var out []int64
	for offset < end {
		s, err := l.Read(offset, 1<<20, end)
		if err != nil {
			t.Fatalf("Read(%d): %v", offset, err)
		}
		if s.Size() == 0 {
			break
		}
		b, err := s.ReadAll()
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewIterator(b)
		it.SetStartOffset(offset)
		for it.Next() {
			out = append(out, it.Record().Offset)
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		offset = it.NextOffset()
	}
	return out
}
