package log

import (
	"errors"
	"testing"
)

// TestDiskFullRefusesAndRecovers: appends that would eat into the reserve
// are refused with ErrDiskFull and change nothing; once space returns they
// go through again, on the same log.
func TestDiskFullRefusesAndRecovers(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	capacity := int64(20_000)
	g := NewSpaceGuard(l.Dir(), 8_000)
	g.statfs = func(string) (int64, error) { return capacity - l.Size(), nil }
	l.SetSpaceGuard(g)
	var appended int
	var err error
	for i := 0; i < 200; i++ {
		if _, err = l.Append(nBatch(t, 3, 40, int64(i)), 7); err != nil {
			break
		}
		appended++
	}
	if !errors.Is(err, ErrDiskFull) || appended == 0 || appended == 200 {
		t.Fatalf("after %d appends: %v; want ErrDiskFull past the reserve", appended, err)
	}
	end := l.EndOffset()
	if end != int64(3*appended) || l.Size() > capacity-8_000 {
		t.Fatalf("end %d after %d appends, %d bytes used", end, appended, l.Size())
	}
	if got := len(readRecords(t, l, 0)); got != 3*appended {
		t.Fatalf("%d records readable, want %d", got, 3*appended)
	}
	if g.Refused() != 1 || g.Free() < 0 {
		t.Fatalf("refused %d, free %d", g.Refused(), g.Free())
	}
	capacity += 20_000 // space returns
	info, err := l.Append(nBatch(t, 3, 40, 999), 7)
	if err != nil || info.BaseOffset != end {
		t.Fatalf("append once space returned: %+v, %v", info, err)
	}
}
