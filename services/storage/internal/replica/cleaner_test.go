package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/record"
)

func keyedBatch(t *testing.T, ts int64, key, value string) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	b.Append(record.Record{Timestamp: ts, Key: []byte(key), Value: []byte(value)})
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// cleanerFixture is a node leading a compacted topic "c" and a delete-only
// topic "d", each holding 400 updates of 10 keys in 4 KiB segments.
func cleanerFixture(t *testing.T, compactConfig map[string]string) (*Manager, *Replica, *Replica) {
	t.Helper()
	m, err := NewManager(t.TempDir(), 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	c, d := topic("c", []int32{1}), topic("d", []int32{1})
	c.Config["cleanup.policy"] = "compact"
	for k, v := range compactConfig {
		c.Config[k] = v
	}
	if err := m.Apply(snap(1, c, d), true); err != nil {
		t.Fatal(err)
	}
	rc, _ := m.Get("c", 0)
	rd, _ := m.Get("d", 0)
	old := time.Now().Add(-time.Hour).UnixMilli()
	for _, r := range []*Replica{rc, rd} {
		for i := range 400 {
			if _, err := r.Log.Append(keyedBatch(t, old, fmt.Sprintf("k%d", i%10), fmt.Sprintf("value-%03d-%060d", i, i)), r.State().LeaderEpoch); err != nil {
				t.Fatal(err)
			}
		}
		r.Log.SetHighWatermark(r.Log.EndOffset())
	}
	return m, rc, rd
}

// TestCleanerCleansCompactedReplicas: a round cleans the compacted replica
// whose dirty ratio reached min.cleanable.dirty.ratio, leaves the
// delete-only one alone, paces its I/O through the throttle and counts
// the pass and its bytes in the metrics.
func TestCleanerCleansCompactedReplicas(t *testing.T) {
	m, rc, rd := cleanerFixture(t, map[string]string{"min.cleanable.dirty.ratio": "0.5"})
	if cfg := rc.Log.Config(); !cfg.Compact || cfg.RetentionMs != -1 || cfg.RetentionBytes != -1 {
		t.Fatalf("compact-only log config %+v: want Compact and no retention", cfg)
	}
	sizeC, sizeD := rc.Log.Size(), rd.Log.Size()
	throttled := 0
	m.RunCleaner(context.Background(), time.Now(), CleanerConfig{}, func(n int) error { throttled += n; return nil })
	if _, dirty, _ := rc.Log.DirtyBytes(); dirty != 0 || rc.Log.Size() >= sizeC/2 {
		t.Fatalf("compacted replica after a round: %d dirty bytes, size %d (was %d)", dirty, rc.Log.Size(), sizeC)
	}
	if rd.Log.Size() != sizeD || rd.Log.FirstDirtyOffset() != 0 {
		t.Fatalf("delete-only replica changed: size %d (was %d), first dirty %d", rd.Log.Size(), sizeD, rd.Log.FirstDirtyOffset())
	}
	read, written := m.cleaner.bytesRead.Load(), m.cleaner.bytesWritten.Load()
	if m.cleaner.passes.Load() != 1 || read == 0 || written == 0 || int64(throttled) != read+written {
		t.Fatalf("passes %d, read %d, written %d, throttled %d", m.cleaner.passes.Load(), read, written, throttled)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(m))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string][]float64{}
	for _, f := range families {
		for _, mm := range f.GetMetric() {
			series[f.GetName()] = append(series[f.GetName()], mm.GetGauge().GetValue()+mm.GetCounter().GetValue())
		}
	}
	if v := series["sluice_storage_cleaner_dirty_ratio"]; len(v) != 1 || v[0] != 0 {
		t.Fatalf("dirty-ratio series %v, want one (the compacted partition) at 0", v)
	}
	if v := series["sluice_storage_cleaner_passes_total"]; len(v) != 1 || v[0] != 1 {
		t.Fatalf("passes metric %v", v)
	}
	if v := series["sluice_storage_cleaner_read_bytes_total"]; len(v) != 1 || v[0] != float64(read) {
		t.Fatalf("read-bytes metric %v, want %d", v, read)
	}
	// Nothing dirty: the next round passes nothing.
	m.RunCleaner(context.Background(), time.Now(), CleanerConfig{}, nil)
	if m.cleaner.passes.Load() != 1 {
		t.Fatalf("a round with nothing dirty ran a pass")
	}
}

// TestCleanerWaitsForDirtyRatioOrMaxLag: below min.cleanable.dirty.ratio
// nothing is cleaned, unless the oldest dirty record is older than
// max.compaction.lag.ms.
func TestCleanerWaitsForDirtyRatioOrMaxLag(t *testing.T) {
	m, rc, _ := cleanerFixture(t, map[string]string{"min.cleanable.dirty.ratio": "0.99"})
	m.RunCleaner(context.Background(), time.Now(), CleanerConfig{}, nil)
	first := rc.Log.FirstDirtyOffset()
	// New updates: most of the closed bytes, but below 0.99.
	for i := range 200 {
		if _, err := rc.Log.Append(keyedBatch(t, time.Now().Add(-time.Minute).UnixMilli(), fmt.Sprintf("k%d", i%10), fmt.Sprintf("new-%060d", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	rc.Log.SetHighWatermark(rc.Log.EndOffset())
	closed, dirty, _ := rc.Log.DirtyBytes()
	if dirty == 0 || float64(dirty)/float64(closed) >= 0.99 {
		t.Fatalf("fixture: %d of %d bytes dirty", dirty, closed)
	}
	m.RunCleaner(context.Background(), time.Now(), CleanerConfig{}, nil)
	if rc.Log.FirstDirtyOffset() != first {
		t.Fatalf("cleaned below min.cleanable.dirty.ratio: first dirty %d, was %d", rc.Log.FirstDirtyOffset(), first)
	}
	c := topic("c", []int32{1})
	c.Config["cleanup.policy"], c.Config["max.compaction.lag.ms"] = "compact", "1000"
	c.Config["min.cleanable.dirty.ratio"] = "0.99"
	d := topic("d", []int32{1})
	if err := m.Apply(snap(2, c, d), true); err != nil {
		t.Fatal(err)
	}
	m.RunCleaner(context.Background(), time.Now(), CleanerConfig{}, nil)
	if rc.Log.FirstDirtyOffset() <= first {
		t.Fatalf("an overdue dirty record was not cleaned: first dirty %d", rc.Log.FirstDirtyOffset())
	}
}

// keysIn reads a log from its start and returns each key's latest record:
// its value, or "" for a tombstone.
func keysIn(t *testing.T, r *Replica) map[string]string {
	t.Helper()
	out := map[string]string{}
	for off := r.Log.StartOffset(); off < r.Log.EndOffset(); {
		s, err := r.Log.Read(off, 1<<20, r.Log.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.ReadAll()
		s.Release()
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, len(b), err)
		}
		it := record.NewIterator(b)
		it.SetStartOffset(off)
		for it.Next() {
			out[string(it.Record().Key)] = string(it.Record().Value)
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		off = it.NextOffset()
	}
	return out
}

// TestCleanerFollowUpRemovesTombstones: the pass that cleans a tombstone's
// segment keeps it (younger than delete.retention.ms); with nothing new
// written, the follow-up pass a delete retention later removes it, and no
// pass runs after that.
func TestCleanerFollowUpRemovesTombstones(t *testing.T) {
	m, rc, _ := cleanerFixture(t, map[string]string{"min.cleanable.dirty.ratio": "0.01", "segment.ms": "1000", "delete.retention.ms": "60000"})
	t0 := time.Now()
	for i := range 5 {
		b := record.NewBuilder(record.CodecNone)
		b.Append(record.Record{Timestamp: t0.UnixMilli(), Key: []byte(fmt.Sprintf("k%d", i))}) // a tombstone
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rc.Log.Append(append([]byte(nil), out...), 0); err != nil {
			t.Fatal(err)
		}
	}
	rc.Log.SetHighWatermark(rc.Log.EndOffset())
	round := func(at time.Duration) { m.RunCleaner(context.Background(), t0.Add(at), CleanerConfig{}, nil) }
	round(2 * time.Second) // rolls the tombstones' segment and cleans it
	passes := m.cleaner.passes.Load()
	if m.cleaner.rolls.Load() != 1 {
		t.Fatalf("%d quiet segments rolled, want the tombstones' one", m.cleaner.rolls.Load())
	}
	if _, dirty, _ := rc.Log.DirtyBytes(); dirty != 0 || passes == 0 {
		t.Fatalf("after the first round: %d dirty bytes, %d passes", dirty, passes)
	}
	keys := keysIn(t, rc)
	if v, ok := keys["k0"]; !ok || v != "" || len(keys) != 10 {
		t.Fatalf("young tombstones: %v", keys)
	}
	round(30 * time.Second)
	if m.cleaner.passes.Load() != passes {
		t.Fatal("a pass ran with nothing dirty before the follow-up was due")
	}
	round(63 * time.Second)
	if m.cleaner.passes.Load() != passes+1 {
		t.Fatalf("the follow-up pass did not run: %d passes", m.cleaner.passes.Load())
	}
	keys = keysIn(t, rc)
	if _, ok := keys["k0"]; ok || len(keys) != 5 {
		t.Fatalf("expired tombstones kept: %v", keys)
	}
	round(300 * time.Second)
	if m.cleaner.passes.Load() != passes+1 {
		t.Fatal("a second follow-up pass ran")
	}
}

// TestCleanerPassOnDeletedReplica: a pass whose replica is deleted under it
// (its topic deleted) is not counted as a failure.
func TestCleanerPassOnDeletedReplica(t *testing.T) {
	m, rc, _ := cleanerFixture(t, nil)
	d := topic("d", []int32{1})
	if err := m.Apply(snap(2, d), true); err != nil { // topic c deleted: its log closes
		t.Fatal(err)
	}
	if m.cleanOne(rc, time.Now(), CleanerConfig{}, nil) {
		t.Fatal("a pass on a closed log completed")
	}
	if n := m.cleaner.failures.Load(); n != 0 {
		t.Fatalf("%d failures counted for a deleted replica", n)
	}
}

// TestLogConfigCleanupPolicy: delete keeps retention, compact turns it off
// and compacts, compact,delete does both.
func TestLogConfigCleanupPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy             string
		compact, retention bool
	}{{"delete", false, true}, {"compact", true, false}, {"compact,delete", true, true}} {
		cfg, err := cluster.ParseTopicConfig(map[string]string{"cleanup.policy": tc.policy, "retention.ms": "1000", "retention.bytes": "4096"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		lc := LogConfig(cfg)
		if lc.Compact != tc.compact || (lc.RetentionMs == 1000 && lc.RetentionBytes == 4096) != tc.retention {
			t.Errorf("%s: log config compact %v, retention %d ms / %d bytes", tc.policy, lc.Compact, lc.RetentionMs, lc.RetentionBytes)
		}
		if !tc.retention && (lc.RetentionMs != -1 || lc.RetentionBytes != -1) {
			t.Errorf("%s: retention %d ms / %d bytes, want none", tc.policy, lc.RetentionMs, lc.RetentionBytes)
		}
	}
}

// TestLowerThreadPriority: the cleaner's thread gets the nice value asked
// for, and only that thread does.
func TestLowerThreadPriority(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread priorities are set on Linux only")
	}
	before, err := threadNice()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := lowerThreadPriority(before + 5); err != nil {
			done <- err
			return
		}
		got, err := threadNice()
		if err == nil && got != before+5 {
			err = fmt.Errorf("thread nice %d after setting %d", got, before+5)
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if now, _ := threadNice(); now != before {
		t.Fatalf("another thread's nice changed to %d (was %d)", now, before)
	}
}
