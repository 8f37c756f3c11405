package replica

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// epochLog opens a log holding, for each epoch given, count one-record
// batches appended at that epoch.
func epochLog(t *testing.T, epochs ...[2]int32) *seglog.Log {
	t.Helper()
	l, err := seglog.Open(t.TempDir(), seglog.DefaultConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, e := range epochs {
		for i := int32(0); i < e[1]; i++ {
			if _, err := l.Append(testBatch(t), e[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// TestTruncationPoint is the follower's rule for the leader's
// OffsetForLeaderEpoch answer (Kafka's KIP-101 and KIP-279).
func TestTruncationPoint(t *testing.T) {
	// Epoch 0 at [0,5), epoch 1 at [5,8), epoch 3 at [8,10).
	l := epochLog(t, [2]int32{0, 5}, [2]int32{1, 3}, [2]int32{3, 2})
	for _, tc := range []struct {
		name        string
		epoch       int32
		end         int64
		want        int64
		wantFinal   bool
		description string
	}{
		{"same latest epoch", 3, 10, 10, true, "nothing to cut"},
		{"leader ends our latest epoch earlier", 3, 9, 9, true, "cut at the leader's end"},
		{"an epoch we never had", 2, 12, 8, false, "cut at our end of epoch 1, then ask about it"},
		{"an older epoch we share, ending earlier", 1, 7, 7, true, "cut at the leader's end of epoch 1"},
		{"an older epoch we share, ending later", 1, 9, 8, true, "cut at our own end of epoch 1"},
		{"no epoch at or below ours", -1, -1, 0, true, "the whole log goes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, final := truncationPoint(l, protocol.OffsetForLeaderEpochResponse{LeaderEpoch: tc.epoch, EndOffset: tc.end})
			if end != tc.want || final != tc.wantFinal {
				t.Fatalf("(%d, %v), want (%d, %v): %s", end, final, tc.want, tc.wantFinal, tc.description)
			}
		})
	}
	// Every local epoch is above the leader's answer: none of our records
	// is of an epoch the leader had.
	later := epochLog(t, [2]int32{3, 4})
	if end, final := truncationPoint(later, protocol.OffsetForLeaderEpochResponse{LeaderEpoch: 2, EndOffset: 6}); end != 0 || !final {
		t.Fatalf("(%d, %v) for a log of epoch 3 only against the leader's epoch 2, want (0, true)", end, final)
	}
}
