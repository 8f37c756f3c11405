package log

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// TestCleanMemoryFigure measures the heap of cleaning passes over 10
// million distinct keys with the default key map budget: 16-byte keys and
// values in 64 MiB segments, the first 100,000 keys written again at the
// end, passes until the first dirty offset reaches the active segment. It
// reports the peak heap in use (sampled every 10 ms) above the heap before
// the passes, next to DefaultMapBytes, and fails when the peak exceeds the
// budget (by more than 1 MiB of noise). It writes about 450 MB, so it
// runs only with SLUICE_FIGURES=1:
//
//	cd services/storage && SLUICE_FIGURES=1 go test -count=1 -run TestCleanMemoryFigure -v ./internal/log/
func TestCleanMemoryFigure(t *testing.T) {
	if os.Getenv("SLUICE_FIGURES") != "1" {
		t.Skip("set SLUICE_FIGURES=1 to measure")
	}
	const keys, updates, perBatch = 10_000_000, 100_000, 1000
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	l := openLog(t, t.TempDir(), cfg)
	bld := record.NewBuilder(record.CodecNone)
	key, value := make([]byte, 16), make([]byte, 16)
	for i := 0; i < keys+updates; i += perBatch {
		bld.Reset()
		for j := i; j < i+perBatch; j++ {
			copy(key, fmt.Appendf(nil, "%016d", j%keys))
			bld.Append(record.Record{Timestamp: 1, Key: key, Value: value})
		}
		out, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, out)
	}
	l.SetHighWatermark(l.EndOffset())
	for last := l.EndOffset(); protectedFrom(l) < last; { // close the segment of the updates
		bld.Reset()
		for range perBatch {
			bld.Append(record.Record{Timestamp: 1, Value: value})
		}
		out, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, out)
		l.SetHighWatermark(l.EndOffset())
	}
	end := protectedFrom(l)

	runtime.GC()
	before := heapInUse()
	var peak uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, heapInUse())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	begin := time.Now()
	passes := 0
	var read, removed int64
	for l.FirstDirtyOffset() < end {
		st, err := l.Clean(CleanOptions{Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		passes++
		read += st.BytesRead
		removed += st.RecordsRemoved
	}
	close(stop)
	wg.Wait()
	if removed != updates {
		t.Fatalf("the passes removed %d records, want the %d overwritten", removed, updates)
	}
	// The whole pass fits in the budget: the key map takes all of it but
	// cleanReserve, which the buffers (reused from pass to pass) use.
	const buffers = 1 << 20 // sampling and the runtime's own noise
	grew := int64(peak) - int64(before)
	t.Logf("%d keys, %d passes in %v (%d MB read): peak heap in use %.1f MiB above the %.1f MiB before; key map budget %d MiB",
		keys, passes, time.Since(begin).Round(time.Millisecond), read/1e6, float64(grew)/(1<<20), float64(before)/(1<<20), DefaultMapBytes>>20)
	if grew > DefaultMapBytes+buffers {
		t.Fatalf("peak heap grew %d bytes, over the %d-byte budget plus %d", grew, int64(DefaultMapBytes), buffers)
	}
}

// heapInUse is the heap's in-use spans (runtime.MemStats.HeapInuse),
// read without stopping the world.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}
