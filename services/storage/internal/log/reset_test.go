package log

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

func TestResetTo(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 500
	l := openLog(t, dir, cfg)
	for i := range 4 {
		if _, err := l.Append(nBatch(t, 1, 320, int64(i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ResetTo(2); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("reset below the end: %v", err)
	}
	if err := l.ResetTo(100); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 100 || l.EndOffset() != 100 || l.Segments() != 1 || l.HighWatermark() != 100 || l.LatestEpoch() != -1 {
		t.Fatalf("after reset: start %d end %d segments %d hw %d epoch %d", l.StartOffset(), l.EndOffset(), l.Segments(), l.HighWatermark(), l.LatestEpoch())
	}
	// A follower appends what the leader has from its start on.
	b := nBatch(t, 2, 10, 5)
	record.SetBaseOffset(b, 100)
	if _, err := l.AppendReplica(b); err != nil {
		t.Fatal(err)
	}
	must(t, l.Close())
	l = openLog(t, dir, cfg)
	if l.StartOffset() != 100 || l.EndOffset() != 102 {
		t.Fatalf("after reopen: [%d, %d)", l.StartOffset(), l.EndOffset())
	}
}
