package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// tryReadRecords reads [offset, end) like readRecords but returns errors.
func tryReadRecords(l *Log, offset int64) ([]record.Record, error) {
	var out []record.Record
	for {
		s, err := l.Read(offset, 1<<20, l.EndOffset())
		if err != nil {
			return out, err
		}
		if s.Size() == 0 {
			return out, nil
		}
		b, err := s.ReadAll()
		s.Release()
		if err != nil {
			return out, err
		}
		it := record.NewIterator(b)
		it.SetStartOffset(offset)
		for it.Next() {
			r := *it.Record()
			r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
			out = append(out, r)
		}
		if it.Err() != nil || it.Consumed() != len(b) {
			return out, fmt.Errorf("slice at %d: %v", offset, it.Err())
		}
		offset = it.NextOffset()
	}
}

// FuzzClean writes a small valid log, overwrites bytes of one of its older
// segments with the fuzzer's, reopens it and runs a pass: Clean must not
// panic, and when the log read whole before the pass, every record read
// after it is the one read before at its offset and the latest record of
// every key is still there.
func FuzzClean(f *testing.F) {
	f.Add(uint8(1), uint16(0), []byte{})
	f.Add(uint8(2), uint16(70), []byte{0xff, 0xff})
	f.Add(uint8(3), uint16(8), []byte{0, 0, 0, 1})
	f.Add(uint8(4), uint16(61), []byte{0x10, 0x02, 0x00})
	f.Add(uint8(5), uint16(200), bytes.Repeat([]byte{0}, 64))
	f.Fuzz(func(t *testing.T, seed uint8, pos uint16, patch []byte) {
		dir := t.TempDir()
		m := newCleanModel(t, uint64(seed), dir, testConfig())
		for range 40 {
			m.appendBatch()
		}
		m.l.mu.RLock()
		n := len(m.l.segs)
		m.l.mu.RUnlock()
		if err := m.l.Close(); err != nil {
			t.Fatal(err)
		}
		if n > 1 && len(patch) > 0 {
			victim := segPath(dir, 0, logSuffix)
			f, err := os.OpenFile(victim, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteAt(patch, int64(pos)%max(fileSize(t, victim), 1))
			_ = f.Close()
			_ = os.Remove(filepath.Join(dir, fmt.Sprintf("%020d%s", 0, indexSuffix))) // sometimes caught by recovery, sometimes not
		}
		l, err := Open(dir, testConfig(), nil)
		if err != nil {
			return // recovery refused the damage: nothing to clean
		}
		defer l.Close()
		l.SetHighWatermark(l.EndOffset())
		before, rerr := tryReadRecords(l, l.StartOffset())
		_, cerr := l.Clean(CleanOptions{Now: m.clock.Now(), DeleteRetention: 1000 * time.Hour, MapBytes: mapBytesFor(50 + int64(seed))})
		if rerr != nil || errors.Is(cerr, ErrCleanBudget) {
			return
		}
		after, err := tryReadRecords(l, l.StartOffset())
		if err != nil {
			t.Fatalf("log read whole before the pass (err %v), not after: %v", cerr, err)
		}
		byOff := map[int64]record.Record{}
		latest := map[string]int64{}
		for _, r := range before {
			byOff[r.Offset] = r
			if r.Key != nil {
				latest[string(r.Key)] = r.Offset
			}
		}
		got := map[int64]bool{}
		for _, r := range after {
			w, ok := byOff[r.Offset]
			if !ok || !bytes.Equal(w.Key, r.Key) || !bytes.Equal(w.Value, r.Value) || (w.Value == nil) != (r.Value == nil) {
				t.Fatalf("offset %d changed by the pass (err %v)", r.Offset, cerr)
			}
			got[r.Offset] = true
		}
		for k, off := range latest {
			if !got[off] {
				t.Fatalf("latest record %d of key %q lost (err %v)", off, k, cerr)
			}
		}
	})
}
