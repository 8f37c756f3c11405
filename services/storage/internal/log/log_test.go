package log

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

func TestAppendReadRoundTrip(t *testing.T) {
	l := openLog(t, t.TempDir(), DefaultConfig())
	b1 := nBatch(t, 3, 10, 1000)
	info := mustAppend(t, l, b1)
	if info.BaseOffset != 0 || info.LastOffset != 2 || info.Batches != 1 || info.Bytes != len(b1) || info.MaxTimestamp != 1002 {
		t.Fatalf("first append: %+v", info)
	}
	if h, _ := record.ParseHeader(b1); h.BaseOffset != 0 || h.LeaderEpoch != 7 {
		t.Fatalf("batch not stamped in place: base %d epoch %d", h.BaseOffset, h.LeaderEpoch)
	}
	// Two batches in one append: one write, consecutive offsets.
	multi := append(nBatch(t, 2, 10, 2000), nBatch(t, 4, 10, 3000)...)
	info = mustAppend(t, l, multi)
	if info.BaseOffset != 3 || info.LastOffset != 8 || info.Batches != 2 || info.MaxTimestamp != 3003 {
		t.Fatalf("second append: %+v", info)
	}
	if h, _ := record.ParseHeader(multi[len(multi)-len(nBatch(t, 4, 10, 3000)):]); h.BaseOffset != 5 {
		t.Fatalf("second batch of the append stamped %d, want 5", h.BaseOffset)
	}
	if l.EndOffset() != 9 || l.StartOffset() != 0 {
		t.Fatalf("offsets [%d, %d)", l.StartOffset(), l.EndOffset())
	}
	recs := readRecords(t, l, 0)
	if len(recs) != 9 {
		t.Fatalf("read %d records, want 9", len(recs))
	}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
	if recs[4].Timestamp != 2001 || !bytes.Equal(recs[4].Value, bytes.Repeat([]byte("b"), 10)) {
		t.Fatalf("record 4: %+v", recs[4])
	}
	// Reading from the middle starts with the batch holding the offset.
	s, err := l.Read(6, 1<<20, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if hs := sliceBatches(t, s); len(hs) != 1 || hs[0].BaseOffset != 5 {
		t.Fatalf("Read(6) gave batches %+v", hs)
	}
	if s, err := l.Read(9, 1<<20, 100); err != nil || s.Size() != 0 {
		t.Fatalf("Read(end) = %d bytes, %v", s.Size(), err)
	}
	if l.Size() != int64(len(b1)+len(multi)) {
		t.Fatalf("Size %d", l.Size())
	}
}

func TestIndexLookupAcrossSegments(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 300
	l := openLog(t, t.TempDir(), cfg)
	for i := range 60 {
		mustAppend(t, l, nBatch(t, 1+i%5, 20, int64(i)*10))
	}
	if l.Segments() < 4 {
		t.Fatalf("%d segments, want several", l.Segments())
	}
	check := func(l *Log) {
		t.Helper()
		end := l.EndOffset()
		for off := int64(0); off < end; off++ {
			s, err := l.Read(off, 1, end)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			hs := sliceBatches(t, s)
			s.Release()
			if len(hs) != 1 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
				t.Fatalf("Read(%d, 1 byte) gave %d batches, first %d-%d", off, len(hs), hs[0].BaseOffset, hs[0].LastOffset())
			}
		}
	}
	check(l)
	// The indexes written through to disk give the same answers.
	dir := l.Dir()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check(openLog(t, dir, cfg))
}

func TestReadMaxBytesAndMaxOffset(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 150
	l := openLog(t, t.TempDir(), cfg)
	var sizes []int
	for i := range 10 {
		b := nBatch(t, 4, 30, int64(i))
		sizes = append(sizes, len(b))
		mustAppend(t, l, b) // batch i holds offsets 4i..4i+3
	}
	read := func(off int64, maxBytes int, maxOffset int64) []record.Header {
		t.Helper()
		s, err := l.Read(off, maxBytes, maxOffset)
		if err != nil {
			t.Fatalf("Read(%d, %d, %d): %v", off, maxBytes, maxOffset, err)
		}
		defer s.Release()
		return sliceBatches(t, s)
	}
	if hs := read(5, 0, 40); len(hs) != 1 || hs[0].BaseOffset != 4 {
		t.Fatalf("maxBytes 0 must still give one batch: %+v", hs)
	}
	if hs := read(5, sizes[1]+sizes[2]+sizes[3]/2, 40); len(hs) != 2 || hs[1].BaseOffset != 8 {
		t.Fatalf("2.5 batches of room gave %d batches", len(hs))
	}
	if hs := read(0, math.MaxInt, 40); len(hs) != 10 {
		t.Fatalf("everything: %d batches", len(hs))
	}
	if hs := read(0, 1<<20, 12); len(hs) != 3 || hs[2].BaseOffset != 8 {
		t.Fatalf("maxOffset 12: %d batches", len(hs))
	}
	if hs := read(0, 1<<20, 13); len(hs) != 4 {
		t.Fatalf("maxOffset 13 includes the batch starting at 12: %d batches", len(hs))
	}
	if hs := read(12, 1<<20, 12); len(hs) != 0 {
		t.Fatalf("offset == maxOffset: %d batches", len(hs))
	}
	if hs := read(20, 1<<20, 12); len(hs) != 0 {
		t.Fatalf("offset above maxOffset: %d batches", len(hs))
	}
}

func TestReadOutOfRange(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, nBatch(t, 3, 10, 1))
	for _, off := range []int64{-1, 4, 100} {
		_, err := l.Read(off, 100, 100)
		wantErr(t, err, ErrOffsetOutOfRange)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	l := openLog(t, t.TempDir(), cfg)
	mustAppend(t, l, batch(t, 50, 100, 110, 120))      // 0-2
	mustAppend(t, l, batch(t, 50, 130, 125, 150))      // 3-5: out of order inside
	mustAppend(t, l, batch(t, 50, 90, 95))             // 6-7: older than before
	mustAppend(t, l, batch(t, 50, 200, 210, 220, 230)) // 8-11
	mustAppend(t, l, batch(t, 50, 300))                // 12
	if l.Segments() < 2 {
		t.Fatalf("want the batches over several segments, got %d", l.Segments())
	}
	for _, c := range []struct{ ts, off, got int64 }{
		{0, 0, 100},
		{100, 0, 100},
		{105, 1, 110},
		{121, 3, 130},
		{126, 3, 130},
		{131, 5, 150},
		{151, 8, 200},
		{215, 10, 220},
		{300, 12, 300},
		{301, -1, -1},
	} {
		off, ts, err := l.OffsetForTimestamp(c.ts)
		if err != nil || off != c.off || ts != c.got {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", c.ts, off, ts, err, c.off, c.got)
		}
	}
}

func TestRollBySizeAndTime(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	cfg.SegmentMs = 60_000
	cfg.Now = clock.Now
	l := openLog(t, t.TempDir(), cfg)
	b := nBatch(t, 1, 300, 1) // ~380 bytes: two fit in a segment, three do not
	mustAppend(t, l, bytes.Clone(b))
	mustAppend(t, l, bytes.Clone(b))
	if l.Segments() != 1 {
		t.Fatalf("%d segments after two batches", l.Segments())
	}
	mustAppend(t, l, bytes.Clone(b))
	if l.Segments() != 2 {
		t.Fatalf("%d segments after the third batch, want a roll by size", l.Segments())
	}
	if _, err := os.Stat(segPath(l.Dir(), 2, ".log")); err != nil {
		t.Fatalf("new segment not named by its base offset: %v", err)
	}
	clock.Advance(59 * time.Second)
	mustAppend(t, l, nBatch(t, 1, 10, 2))
	if l.Segments() != 2 {
		t.Fatalf("rolled before segment.ms")
	}
	clock.Advance(time.Second)
	mustAppend(t, l, nBatch(t, 1, 10, 3))
	if l.Segments() != 3 {
		t.Fatalf("%d segments, want a roll by time", l.Segments())
	}
	if got := readRecords(t, l, 0); len(got) != 5 {
		t.Fatalf("read %d records across rolls", len(got))
	}
}

func TestRetention(t *testing.T) {
	t.Run("time", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 500
		cfg.RetentionMs = 1000
		l := openLog(t, t.TempDir(), cfg)
		for i := range 6 { // one ~400-byte batch per segment, timestamps 0, 1000, ...
			mustAppend(t, l, nBatch(t, 1, 320, int64(i)*1000))
		}
		if l.Segments() != 6 {
			t.Fatalf("%d segments", l.Segments())
		}
		// At 3500 segments with timestamp < 2500 are past retention.
		l.SetHighWatermark(l.EndOffset())
		n, err := l.EnforceRetention(time.UnixMilli(3500))
		if err != nil || n != 3 {
			t.Fatalf("deleted %d, %v; want 3", n, err)
		}
		if l.StartOffset() != 3 {
			t.Fatalf("start offset %d, want 3", l.StartOffset())
		}
		_, err = l.Read(2, 100, 100)
		wantErr(t, err, ErrOffsetOutOfRange)
		if _, err := os.Stat(segPath(l.Dir(), 2, ".log")); !os.IsNotExist(err) {
			t.Fatalf("segment file still there: %v", err)
		}
		// The active segment stays even when expired.
		l.SetHighWatermark(l.EndOffset())
		if n, _ := l.EnforceRetention(time.UnixMilli(1e9)); n != 2 || l.Segments() != 1 {
			t.Fatalf("deleted %d, %d segments left", n, l.Segments())
		}
	})
	t.Run("never above the high watermark", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 500
		cfg.RetentionMs = 1000
		l := openLog(t, t.TempDir(), cfg)
		for i := range 6 {
			mustAppend(t, l, nBatch(t, 1, 320, int64(i)*1000))
		}
		// Only offsets 0 and 1 are replicated: everything from offset 2 on
		// stays, however old.
		l.SetHighWatermark(2)
		if n, err := l.EnforceRetention(time.UnixMilli(1e9)); err != nil || n != 2 || l.StartOffset() != 2 {
			t.Fatalf("deleted %d (%v), start offset %d; want 2 segments and start 2", n, err, l.StartOffset())
		}
	})
	t.Run("size", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 500
		cfg.RetentionBytes = 1000
		l := openLog(t, t.TempDir(), cfg)
		for i := range 6 {
			mustAppend(t, l, nBatch(t, 1, 320, time.Now().UnixMilli()+int64(i)))
		}
		seg := l.Size() / 6
		l.SetHighWatermark(l.EndOffset())
		n, err := l.EnforceRetention(time.Now())
		if err != nil || l.Size() < cfg.RetentionBytes || l.Size()-seg >= cfg.RetentionBytes {
			t.Fatalf("deleted %d (%v): %d bytes left for a limit of %d", n, err, l.Size(), cfg.RetentionBytes)
		}
		if l.StartOffset() != int64(n) {
			t.Fatalf("start offset %d after deleting %d segments", l.StartOffset(), n)
		}
	})
}

func TestSliceSurvivesRetention(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	cfg.RetentionMs = 0
	l := openLog(t, t.TempDir(), cfg)
	for i := range 3 {
		mustAppend(t, l, nBatch(t, 1, 320, int64(i)))
	}
	// Let the flusher sync and let go of the rolled segments first, so the
	// Slice holds the only reference besides the log's.
	if err := l.WaitFlushed(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	s, err := l.Read(0, 1<<20, 10)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.EndOffset())
	if n, err := l.EnforceRetention(time.UnixMilli(1e9)); err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	got, err := s.ReadAll()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("slice of a deleted segment: %v", err)
	}
	s.Release()
	s.Release() // idempotent
	if _, err := s.ReadAll(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("after Release the file must be closed, got %v", err)
	}
}

func TestTruncateTo(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	for i := range 10 { // batches of 3 records, about 3 per segment
		mustAppend(t, l, nBatch(t, 3, 60, int64(i)*10))
	}
	segs := l.Segments()
	if segs < 3 {
		t.Fatalf("%d segments", segs)
	}
	wantErr(t, l.TruncateTo(28), ErrNotBatchBoundary)
	wantErr(t, l.TruncateTo(31), ErrOffsetOutOfRange)
	// Mid-segment.
	if err := l.TruncateTo(27); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 27 {
		t.Fatalf("end %d", l.EndOffset())
	}
	// Across segments: back to offset 6, inside the first or second segment.
	if err := l.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 6 || l.Segments() > 2 {
		t.Fatalf("end %d, %d segments", l.EndOffset(), l.Segments())
	}
	if _, _, err := l.OffsetForTimestamp(25); err != nil {
		t.Fatal(err)
	}
	if off, _, _ := l.OffsetForTimestamp(50); off != -1 {
		t.Fatalf("time index still names truncated batches: %d", off)
	}
	info := mustAppend(t, l, nBatch(t, 2, 60, 500))
	if info.BaseOffset != 6 {
		t.Fatalf("append after truncate at %d", info.BaseOffset)
	}
	recs := readRecords(t, l, 0)
	if len(recs) != 8 || recs[6].Timestamp != 500 {
		t.Fatalf("%d records after truncate+append", len(recs))
	}
	// Everything, down to the start.
	if err := l.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 0 || l.Size() != 0 || l.Segments() != 1 {
		t.Fatalf("end %d size %d segments %d", l.EndOffset(), l.Size(), l.Segments())
	}
	mustAppend(t, l, nBatch(t, 2, 60, 600))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, cfg)
	if l2.EndOffset() != 2 || len(readRecords(t, l2, 0)) != 2 {
		t.Fatalf("reopened after truncations: end %d", l2.EndOffset())
	}
}

func TestAppendValidation(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBatchBytes = 500
	l := openLog(t, t.TempDir(), cfg)
	good := nBatch(t, 2, 10, 1)
	bad := nBatch(t, 2, 10, 1)
	bad[len(bad)-1] ^= 0xff
	// A bad second batch rejects the whole append: nothing is written.
	_, err := l.Append(append(bytes.Clone(good), bad...), 0)
	wantErr(t, err, record.ErrCorrupt)
	_, err = l.Append(good[:len(good)-3], 0)
	wantErr(t, err, record.ErrShortBatch)
	_, err = l.Append(nil, 0)
	wantErr(t, err, record.ErrShortBatch)
	_, err = l.Append(nBatch(t, 1, 600, 1), 0)
	wantErr(t, err, ErrBatchTooLarge)
	if l.EndOffset() != 0 || l.Size() != 0 || fileSize(t, segPath(l.Dir(), 0, ".log")) != 0 {
		t.Fatalf("a rejected append wrote something: end %d", l.EndOffset())
	}
}

func TestAppendReplica(t *testing.T) {
	leader := openLog(t, t.TempDir(), testConfig())
	follower := openLog(t, t.TempDir(), testConfig())
	for i := range 5 {
		mustAppend(t, leader, nBatch(t, 2, 10, int64(i)))
	}
	s, err := leader.Read(4, 1<<20, leader.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	fetched, _ := s.ReadAll()
	s.Release()
	_, err = follower.AppendReplica(bytes.Clone(fetched))
	wantErr(t, err, ErrOffsetMismatch) // the follower is empty: must start at 0
	s, _ = leader.Read(0, 1<<20, leader.EndOffset())
	all, _ := s.ReadAll()
	s.Release()
	info, err := follower.AppendReplica(bytes.Clone(all))
	if err != nil || info.BaseOffset != 0 || info.LastOffset != 9 || follower.EndOffset() != 10 {
		t.Fatalf("AppendReplica: %+v, %v", info, err)
	}
	s, _ = follower.Read(0, 1<<20, 10)
	copied, _ := s.ReadAll()
	s.Release()
	if !bytes.Equal(copied, all) {
		t.Fatal("the follower's bytes differ from the leader's (epochs and offsets must be kept)")
	}
}

func TestChangedAndClose(t *testing.T) {
	l, err := Open(t.TempDir(), testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := l.Changed()
	select {
	case <-ch:
		t.Fatal("changed before any append")
	default:
	}
	mustAppend(t, l, nBatch(t, 1, 10, 1))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed by an append")
	}
	next := l.Changed()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	<-next
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = l.Append(nBatch(t, 1, 10, 1), 0)
	wantErr(t, err, ErrClosed)
	_, err = l.Read(0, 10, 10)
	wantErr(t, err, ErrClosed)
	if l.FlushedOffset() != 1 {
		t.Fatalf("Close did not flush: flushed %d", l.FlushedOffset())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"tiny segment", func(c *Config) { c.SegmentBytes = 10 }, false},
		{"huge segment", func(c *Config) { c.SegmentBytes = 1 << 32 }, false},
		{"zero segment.ms", func(c *Config) { c.SegmentMs = 0 }, false},
		{"retention forever", func(c *Config) { c.RetentionMs, c.RetentionBytes = -1, -1 }, true},
		{"retention -2", func(c *Config) { c.RetentionMs = -2 }, false},
		{"retention bytes -2", func(c *Config) { c.RetentionBytes = -2 }, false},
		{"index every batch", func(c *Config) { c.IndexIntervalBytes = 0 }, true},
		{"negative index interval", func(c *Config) { c.IndexIntervalBytes = -1 }, false},
		{"batch below a header", func(c *Config) { c.MaxBatchBytes = 10 }, false},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg)
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v", c.name, err)
		} else if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", c.name, err)
		}
	}
}

func TestSetConfigAndDelete(t *testing.T) {
	clock := newClock()
	cfg := testConfig()
	cfg.Now = clock.Now
	l, err := Open(t.TempDir(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, l.SetConfig(Config{}), ErrInvalidConfig)
	next := cfg
	next.Now = nil // keeps the injected clock
	next.SegmentMs = 1000
	must(t, l.SetConfig(next))
	mustAppend(t, l, nBatch(t, 1, 10, 1))
	clock.Advance(time.Second)
	mustAppend(t, l, nBatch(t, 1, 10, 2))
	if l.Segments() != 2 || l.Config().SegmentMs != 1000 {
		t.Fatalf("new segment.ms not applied with the kept clock: %d segments", l.Segments())
	}
	must(t, l.Delete())
	if _, err := os.Stat(l.Dir()); !os.IsNotExist(err) {
		t.Fatalf("directory still there: %v", err)
	}
}
