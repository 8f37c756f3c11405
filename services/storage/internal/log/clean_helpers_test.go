package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// modelRec is what the model remembers of an appended record.
type modelRec struct {
	key   string
	keyed bool
	tomb  bool
	value string
	ts    int64
}

// cleanModel drives a log with random keyed batches and checks it against
// what was appended.
type cleanModel struct {
	t       testing.TB
	rng     *rand.Rand
	l       *Log
	clock   *fakeClock
	recs    map[int64]modelRec // every record ever appended, by offset
	seqs    map[int64]int32    // producer id -> next sequence
	horizon int64              // tombstones at or before this may be gone
	keys    int
}

func newCleanModel(t testing.TB, seed uint64, dir string, cfg Config) *cleanModel {
	clock := newClock()
	cfg.Now = clock.Now
	m := &cleanModel{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e37)), clock: clock,
		recs: map[int64]modelRec{}, seqs: map[int64]int32{}, horizon: -1 << 62, keys: 2 + int(seed%20)}
	m.l = openLog(t, dir, cfg)
	return m
}

// appendBatch appends one random batch: 1-5 records, mostly keyed, some
// tombstones and keyless records, some from idempotent producers, some
// compressed.
func (m *cleanModel) appendBatch() {
	m.t.Helper()
	codec := record.CodecNone
	if m.rng.IntN(5) == 0 {
		codec = record.CodecSnappy
	}
	b := record.NewBuilder(codec)
	n := 1 + m.rng.IntN(5)
	var pid int64 = -1
	if m.rng.IntN(3) == 0 {
		pid = int64(1 + m.rng.IntN(3))
		b.SetProducer(pid, 0, m.seqs[pid])
	}
	var recs []modelRec
	for range n {
		m.clock.Advance(time.Duration(m.rng.IntN(1000)) * time.Millisecond)
		r := modelRec{ts: m.clock.Now().UnixMilli(), keyed: m.rng.IntN(20) != 0}
		rec := record.Record{Timestamp: r.ts}
		if r.keyed {
			r.key = fmt.Sprintf("k%d", m.rng.IntN(m.keys))
			rec.Key = []byte(r.key)
		}
		if r.keyed && m.rng.IntN(8) == 0 {
			r.tomb = true
		} else {
			r.value = fmt.Sprintf("v%d-%s", m.rng.Uint32(), bytes.Repeat([]byte{'x'}, m.rng.IntN(40)))
			rec.Value = []byte(r.value)
		}
		b.Append(rec)
		recs = append(recs, r)
	}
	out, err := b.Build()
	if err != nil {
		m.t.Fatal(err)
	}
	info := mustAppend(m.t, m.l, bytes.Clone(out))
	for i, r := range recs {
		m.recs[info.BaseOffset+int64(i)] = r
	}
	if pid >= 0 {
		m.seqs[pid] += int32(n)
	}
}

// clean runs a pass and records its tombstone horizon.
func (m *cleanModel) clean(opts CleanOptions) (CleanStats, error) {
	m.t.Helper()
	opts.Now = m.clock.Now()
	m.noteHorizon(opts)
	return m.l.Clean(opts)
}

func (m *cleanModel) noteHorizon(opts CleanOptions) {
	m.horizon = max(m.horizon, opts.Now.Add(-opts.DeleteRetention).UnixMilli())
}

// protectedFrom returns the offset from which a pass may change nothing: the
// active segment's base or the high watermark, whichever is lower.
func protectedFrom(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return min(l.segs[len(l.segs)-1].base, l.hw.Load())
}

// check reads the whole log and checks it against the model: every record
// read is the one appended at its offset, offsets strictly increase, and
// every missing record was legitimately removed (a later record of its key
// exists, or it is a tombstone past the horizon) and lies below protected.
func (m *cleanModel) check(l *Log, protected int64) {
	m.t.Helper()
	got := readRecords(m.t, l, l.StartOffset())
	present := map[int64]bool{}
	prev := int64(-1)
	for _, r := range got {
		if r.Offset <= prev {
			m.t.Fatalf("offset %d after %d", r.Offset, prev)
		}
		prev = r.Offset
		want, ok := m.recs[r.Offset]
		if !ok || string(r.Key) != want.key || (r.Key != nil) != want.keyed || (r.Value == nil) != want.tomb ||
			string(r.Value) != want.value || r.Timestamp != want.ts {
			m.t.Fatalf("offset %d: read key %q value %q ts %d, appended %+v", r.Offset, r.Key, r.Value, r.Timestamp, want)
		}
		present[r.Offset] = true
	}
	latest := map[string]int64{}
	for off, r := range m.recs {
		if r.keyed && off >= latest[r.key] {
			latest[r.key] = off
		}
	}
	end := l.EndOffset()
	for off := l.StartOffset(); off < end; off++ {
		r := m.recs[off]
		if present[off] {
			continue
		}
		switch {
		case off >= protected:
			m.t.Fatalf("offset %d at or above %d (active segment or high watermark) was removed", off, protected)
		case !r.keyed:
			m.t.Fatalf("keyless record %d was removed", off)
		case latest[r.key] > off:
			// superseded
		case r.tomb && r.ts <= m.horizon:
			// an expired tombstone
		default:
			m.t.Fatalf("offset %d (key %q, latest) was removed: %+v", off, r.key, r)
		}
	}
	m.checkReadsAcrossGaps(l, got)
}

// checkReadsAcrossGaps checks that a Read at sampled offsets (removed ones
// included) returns the first present record at or above it.
func (m *cleanModel) checkReadsAcrossGaps(l *Log, got []record.Record) {
	m.t.Helper()
	start, end := l.StartOffset(), l.EndOffset()
	for range 10 {
		if end <= start {
			return
		}
		off := start + m.rng.Int64N(end-start)
		var want int64 = -1
		for _, r := range got {
			if r.Offset >= off {
				want = r.Offset
				break
			}
		}
		s, err := l.Read(off, 1, end)
		if err != nil {
			m.t.Fatalf("Read(%d): %v", off, err)
		}
		b, err := s.ReadAll()
		s.Release()
		if err != nil {
			m.t.Fatal(err)
		}
		it := record.NewIterator(b)
		it.SetStartOffset(off)
		first := int64(-1)
		for first < 0 && it.Next() {
			first = it.Record().Offset
		}
		if first < 0 && want >= 0 {
			// The first batch may be an empty one: read on from it.
			rest := readRecords(m.t, l, off)
			if len(rest) > 0 {
				first = rest[0].Offset
			}
		}
		if first != want {
			m.t.Fatalf("Read(%d): first record %d, want %d", off, first, want)
		}
	}
}

// copyDir copies the regular files of src into a new temporary directory:
// what a kill -9 would leave on disk (the page cache survives it).
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile (the flusher drops old producer snapshots)
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		_ = in.Close()
		_ = out.Close()
	}
	return dst
}

func sameProducers(t testing.TB, got, want map[int64]ProducerEntry) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("producer state changed:\n got %+v\nwant %+v", got, want)
	}
}

// mapBytesFor is the smallest CleanOptions.MapBytes whose map holds keys
// keys (offsets of a pass's span): the inverse of mapBudget.
func mapBytesFor(keys int64) int64 {
	table := mapSlotsFor(keys) * mapSlotBytes
	if table >= 3*cleanReserve {
		return table + cleanReserve
	}
	return table * 4 / 3 // exact: a slot is 24 bytes
}
