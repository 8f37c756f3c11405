package replica

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/log/faultfs"
)

// TestFailedLogHandsLeadershipOverOnce: when the log of a partition this
// node leads fails (a failed segment write here), the node asks metadata to
// move the leadership, in the background, until the snapshot that makes it a
// follower arrives; it asks for nothing on other errors, and nothing again
// for the same failed log.
func TestFailedLogHandsLeadershipOverOnce(t *testing.T) {
	resigned := make(chan cluster.ResignRequest, 100)
	m, err := NewManager(t.TempDir(), 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ffs := faultfs.New()
	m.UseFileSystem(ffs)
	m.EnableReplication(Replication{Resign: func(_ context.Context, req cluster.ResignRequest) (*cluster.Partition, error) {
		resigned <- req
		return &cluster.Partition{}, nil
	}})
	apply := func(version uint64, leader, epoch int32, isr ...int32) {
		t.Helper()
		tp := topic("t", []int32{1, 2, 3})
		tp.Partitions[0].Leader, tp.Partitions[0].LeaderEpoch, tp.Partitions[0].ISR = leader, epoch, isr
		if err := m.Apply(snap(version, tp), true); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, 1, 1, 1, 2, 3)
	r, err := m.Get("t", 0)
	if err != nil {
		t.Fatal(err)
	}

	m.ReportFailed(r, errors.New("log: a request timed out"))
	if r.repairing.Load() {
		t.Fatal("an error other than a failed log started a resignation")
	}
	ffs.Add(faultfs.Rule{Op: faultfs.Write, Name: "*.log"})
	_, err = r.Log.Append(testBatch(t), 1)
	if !errors.Is(err, seglog.ErrFailed) {
		t.Fatalf("append on a failing disk: %v, want ErrFailed", err)
	}
	m.ReportFailed(r, err)
	select {
	case req := <-resigned:
		if req.Topic != "t" || req.Partition != 0 || req.LeaderID != 1 || req.LeaderEpoch != 1 {
			t.Fatalf("resign request %+v, want t-0 from node 1 at leader epoch 1", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leader of a failed log never asked to resign")
	}

	apply(2, 2, 2, 2, 3) // metadata moved the partition and took node 1 out of the ISR
	testkit.WaitFor(t, 10*time.Second, "the resignation to end once the node followed", func() bool { return !r.repairing.Load() })
	apply(3, 1, 3, 1) // led again, with the same failed log
	m.ReportFailed(r, err)
	if r.repairing.Load() {
		t.Fatal("a second resignation started for the same failed log")
	}
}
