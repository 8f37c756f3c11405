package log

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// cleanBenchCases are the shapes the cleaner benchmarks run with: small
// segments show the per-segment file costs (three new files, their fsyncs
// and renames), larger ones the per-record cost, and 1 KiB values that
// cost spread over more bytes.
var cleanBenchCases = []struct {
	segBytes  int64
	valueSize int
}{{1 << 20, 100}, {16 << 20, 100}, {16 << 20, 1024}}

func cleanBenchName(segBytes int64, valueSize int) string {
	return fmt.Sprintf("segment=%dMiB/value=%dB", segBytes>>20, valueSize)
}

// cleanBenchDir writes a template log once: 8 MiB of valueSize-byte values
// over 2,000 keys (64 MiB with segments above 1 MiB) in segments of
// segBytes, every segment closed and below the high watermark. It returns
// the directory and the cleanable segment bytes.
func cleanBenchDir(b *testing.B, segBytes int64, valueSize int) (string, int64) {
	b.Helper()
	dir := b.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = segBytes
	total := int64(8 << 20)
	if segBytes > 1<<20 {
		total = 64 << 20
	}
	l, err := Open(dir, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	bld := record.NewBuilder(record.CodecNone)
	value := make([]byte, valueSize)
	for i := 0; l.Size() < total; i++ {
		bld.Reset()
		for j := range 10 {
			bld.Append(record.Record{Timestamp: 1, Key: fmt.Appendf(nil, "key-%d", (i*10+j)%2000), Value: value})
		}
		out, err := bld.Build()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(out, 0); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.Append(batch(b, 10, 1), 0); err != nil { // keep the last big segment closed
		b.Fatal(err)
	}
	l.SetHighWatermark(l.EndOffset())
	l.mu.RLock()
	var size int64
	for _, s := range l.segs[:len(l.segs)-1] {
		size += s.size
	}
	l.mu.RUnlock()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, size
}

// BenchmarkClean runs one pass over a fresh copy of the template log per
// iteration; MB/s is segment bytes read. Compare with
// BenchmarkSequentialCopy.
func BenchmarkClean(b *testing.B) {
	for _, c := range cleanBenchCases {
		b.Run(cleanBenchName(c.segBytes, c.valueSize), func(b *testing.B) { benchmarkClean(b, c.segBytes, c.valueSize) })
	}
}

func benchmarkClean(b *testing.B, segBytes int64, valueSize int) {
	tmpl, size := cleanBenchDir(b, segBytes, valueSize)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := copyDir(b, tmpl)
		l, err := Open(dir, DefaultConfig(), nil)
		if err != nil {
			b.Fatal(err)
		}
		l.SetHighWatermark(l.EndOffset())
		b.StartTimer()
		st, err := l.Clean(CleanOptions{Now: time.Now()})
		if err != nil || st.SegmentsCleaned == 0 {
			b.Fatalf("Clean: %+v, %v", st, err)
		}
		b.StopTimer()
		_ = l.Close()
		b.StartTimer()
	}
}

// BenchmarkSequentialCopy reads the same segment files and writes them raw
// to new files in 1 MiB chunks, fsyncing each: the I/O floor of a pass.
func BenchmarkSequentialCopy(b *testing.B) {
	for _, c := range cleanBenchCases {
		b.Run(cleanBenchName(c.segBytes, c.valueSize), func(b *testing.B) { benchmarkSequentialCopy(b, c.segBytes, c.valueSize) })
	}
}

func benchmarkSequentialCopy(b *testing.B, segBytes int64, valueSize int) {
	tmpl, size := cleanBenchDir(b, segBytes, valueSize)
	names, _ := filepath.Glob(filepath.Join(tmpl, "*"+logSuffix))
	names = names[:len(names)-1] // not the active segment
	buf := make([]byte, cleanChunk)
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		for _, name := range names {
			in, err := os.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			out, err := os.Create(fmt.Sprintf("%s.copy%d", name, i))
			if err != nil {
				b.Fatal(err)
			}
			for pos := int64(0); ; {
				n, _ := in.ReadAt(buf, pos)
				if n == 0 {
					break
				}
				if _, err := out.WriteAt(buf[:n], pos); err != nil {
					b.Fatal(err)
				}
				pos += int64(n)
			}
			if err := out.Sync(); err != nil {
				b.Fatal(err)
			}
			_ = in.Close()
			_ = out.Close()
			b.StopTimer()
			_ = os.Remove(out.Name())
			b.StartTimer()
		}
	}
}
