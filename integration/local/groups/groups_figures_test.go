package groups

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
)

// TestGroupFigures measures what docs/dev/performance-log.md reports for consumer
// groups; it runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -run TestGroupFigures -v ./local/groups/
//
// Rebalance time: from a member's SIGTERM (clean leave) or SIGKILL (crash)
// until the two others own all six partitions, five times each, with the
// members' 3s session timeout and the coordinator's 500ms heartbeat interval.
// Consumer throughput: one group member reading a backlog of 100-byte records.
func TestGroupFigures(t *testing.T) {
	itest.FiguresOnly(t, "consumer-group figures")
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "rebalance", 6, 1)
	m1 := itest.StartMember(t, c, "m1", "fig", "rebalance")
	m2 := itest.StartMember(t, c, "m2", "fig", "rebalance")
	for _, crash := range []bool{false, true} {
		var times []time.Duration
		for i := 0; i < 5; i++ {
			m3 := itest.StartMember(t, c, "m3", "fig", "rebalance")
			itest.WaitOwnership(t, 6, []int{2, 2, 2}, m1, m2, m3)
			start := time.Now()
			if crash {
				m3.Kill()
			} else {
				m3.Stop()
			}
			times = append(times, itest.WaitOwnership(t, 6, []int{3, 3}, m1, m2).Sub(start))
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		t.Logf("FIGURE rebalance after a member %s (3 members, 6 partitions, 3s session): %v, median %v",
			map[bool]string{false: "leaves", true: "crashes"}[crash], times, times[len(times)/2])
	}

	const partitions, backlog, size = 4, 2_000_000, 100
	itest.CreateTopic(t, ctx, c, "backlog", partitions, 1)
	itest.FillBacklog(t, ctx, c, "backlog", itest.Backlog{Partitions: partitions, PerPartition: backlog / partitions, Size: size})
	for run := 0; run < 3; run++ {
		cfg := itest.ConsumerConfig(c, "throughput-"+string(rune('a'+run)), "backlog")
		created := time.Now()
		cons, err := client.NewConsumer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var start time.Time
		for n < backlog {
			recs, err := cons.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 && len(recs) > 0 {
				start = time.Now() // from the first record: joining is not reading
			}
			n += len(recs)
		}
		d, whole := time.Since(start), time.Since(created)
		cons.Close(ctx)
		t.Logf("FIGURE consumer run %d: %d records of %d bytes from %d partitions in %v: %.0f records/s, %.1f MB/s (%v and %.0f records/s counting the join)",
			run+1, n, size, partitions, d.Round(time.Millisecond), float64(n)/d.Seconds(), float64(n*size)/d.Seconds()/1e6,
			whole.Round(time.Millisecond), float64(n)/whole.Seconds())
	}
}
