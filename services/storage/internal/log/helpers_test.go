package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// batch builds an uncompressed producer batch with one record per timestamp;
// record i's value is valueSize bytes of the letter 'a'+i%26.
func batch(t testing.TB, valueSize int, timestamps ...int64) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	for i, ts := range timestamps {
		b.Append(record.Record{Timestamp: ts, Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

// nBatch builds a batch of n records with timestamps ts, ts+1, ...
func nBatch(t testing.TB, n, valueSize int, ts int64) []byte {
	t.Helper()
	tss := make([]int64, n)
	for i := range tss {
		tss[i] = ts + int64(i)
	}
	return batch(t, valueSize, tss...)
}

// fakeClock is an injectable Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testConfig is DefaultConfig with small segments and a dense index.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	return cfg
}

func openLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(b, 7)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return info
}

// readAll reads [offset, end) batch by batch through Read and decodes the
// records with the Iterator, checking batch boundaries on the way.
func readRecords(t testing.TB, l *Log, offset int64) []record.Record {
	t.Helper()
	var out []record.Record
	for {
		s, err := l.Read(offset, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", offset, err)
		}
		if s.Size() == 0 {
			return out
		}
		b, err := s.ReadAll()
		s.Release()
		if err != nil {
			t.Fatalf("ReadAll: %v", err)
		}
		it := record.NewIterator(b)
		it.SetStartOffset(offset)
		for it.Next() {
			r := *it.Record()
			r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
			out = append(out, r)
		}
		if it.Err() != nil || it.Partial() || it.Consumed() != len(b) {
			t.Fatalf("slice at %d: err %v, partial %v, consumed %d of %d", offset, it.Err(), it.Partial(), it.Consumed(), len(b))
		}
		offset = it.NextOffset()
	}
}

// sliceBatches returns the headers of the batches in a slice.
func sliceBatches(t testing.TB, s Slice) []record.Header {
	t.Helper()
	b, err := s.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var hs []record.Header
	for len(b) > 0 {
		h, err := record.Validate(b)
		if err != nil {
			t.Fatalf("slice holds a bad batch: %v", err)
		}
		hs = append(hs, h)
		b = b[h.Size():]
	}
	return hs
}

func segPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}
