package log

import (
	"context"
	"errors"
	"testing"
	"time"

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

// TestStaleScrubberViewIsNotDamage: a follower's truncation (and re-fetch)
// while the scrubber waits with a view of an older segment is not damage; and
// a damage report from before a cut is refused rather than cut at positions
// that no longer describe the file.
func TestStaleScrubberViewIsNotDamage(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := openLog(t, dir, cfg)
	for i := 0; i < 20; i++ { // segment 0 and part of segment 1
		mustAppend(t, l, batch(t, 250, int64(1000+i)))
	}
	must(t, l.Close())
	l = openLog(t, dir, cfg) // segment 0 is older: not validated yet
	if l.Segments() < 2 {
		t.Fatalf("%d segments, want an older one", l.Segments())
	}
	l.mu.RLock()
	v := l.viewLocked(l.segs[0])
	l.mu.RUnlock()
	// A report made from this view, as a read that found damage would.
	stale := v.corruptAt(v.size-1, errors.New("seen before the cut")).(*CorruptError)

	// The follower cuts into segment 0 and fetches batches of another size.
	must(t, l.TruncateTo(4))
	// The report now points past the log's end: stale, not out of range.
	if stale.ValidEnd <= l.EndOffset() {
		t.Fatalf("the report's offset %d is not past the cut log's end %d", stale.ValidEnd, l.EndOffset())
	}
	if err := l.TruncateCorrupt(stale); !errors.Is(err, ErrStaleDamageReport) {
		t.Fatalf("TruncateCorrupt of a report past the cut log's end: %v, want ErrStaleDamageReport", err)
	}
	for l.EndOffset() < 9 {
		if _, err := l.Append(batch(t, 650, 2000), 8); err != nil {
			t.Fatal(err)
		}
	}
	sc := getVerifier()
	var read int64
	err := l.verifySegment(context.Background(), &v, sc, 0, time.Now(), &read)
	putVerifier(sc)
	v.seg.release()
	if err != nil {
		t.Fatalf("scrubbing a view the log was cut under: %v, want no damage", err)
	}
	// The follower fetched on past where the report says the damage is.
	for l.EndOffset() <= stale.ValidEnd+2 {
		if _, err := l.Append(batch(t, 650, 2000), 8); err != nil {
			t.Fatal(err)
		}
	}
	end := l.EndOffset()
	if err := l.TruncateCorrupt(stale); !errors.Is(err, ErrStaleDamageReport) {
		t.Fatalf("TruncateCorrupt of a report from before the cut: %v, want ErrStaleDamageReport", err)
	}
	if l.EndOffset() != end {
		t.Fatalf("log end %d after a refused cut, want %d", l.EndOffset(), end)
	}
	// Every offset below the end is still served, in order.
	for off := int64(0); off < l.EndOffset(); {
		s, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		hs := sliceBatches(t, s)
		s.Release()
		if hs[0].BaseOffset != off {
			t.Fatalf("read %d starts at %d", off, hs[0].BaseOffset)
		}
		off = hs[len(hs)-1].LastOffset() + 1
	}
	// The scrubber finds the log whole.
	if err := l.Verify(context.Background(), 0); err != nil {
		t.Fatalf("verify after the cut: %v", err)
	}
}
