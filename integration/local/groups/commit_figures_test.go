package groups

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/groups"
)

// TestCommitFigures measures offset commits of many groups at once, a
// figure of docs/dev/performance-log.md; it runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -run TestCommitFigures -v ./local/groups/
//
// A local cluster (3 metadata voters, 3 storage nodes, 3 offsets replicas,
// one frontend); 100 groups each commit one offset every 100 ms for 10 s
// through the offsets HTTP API, from this test's process. It reports the
// commits answered per second, their latency, and the Raft entries the
// offsets leader proposed for them (group commit puts many in one).
func TestCommitFigures(t *testing.T) {
	itest.FiguresOnly(t, "the commit figures")
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "commits", 4, 3)
	gc := groups.NewClient(c.OffsetsURLs())
	// One commit each first, so that the clients know the leader.
	for g := range 100 {
		if err := gc.Commit(ctx, "cf-"+strconv.Itoa(g), groups.CommitRequest{Offsets: []groups.Offset{{Topic: "commits", Partition: 0, Offset: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	entries0, commands0 := leaderEntries(t, c)
	const d = 10 * time.Second
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 100 {
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for off := int64(2); time.Since(start) < d; off++ {
				<-tick.C
				t0 := time.Now()
				err := gc.Commit(ctx, "cf-"+strconv.Itoa(g), groups.CommitRequest{Offsets: []groups.Offset{{Topic: "commits", Partition: int32(g % 4), Offset: off}}})
				mu.Lock()
				if err != nil {
					failed++
				} else {
					lat = append(lat, time.Since(t0))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	entries, commands := leaderEntries(t, c)
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatalf("no commit answered (%d failed)", failed)
	}
	t.Logf("FIGURE 100 groups committing every 100 ms: %.0f commits/s answered (%d failed), latency p50 %v, p99 %v; %0.f commands in %.0f Raft entries (%.1f an entry)",
		float64(len(lat))/elapsed.Seconds(), failed, lat[len(lat)/2], lat[len(lat)*99/100], commands-commands0, entries-entries0,
		(commands-commands0)/max(entries-entries0, 1))
}

// leaderEntries reads the offsets leader's group-commit counters.
func leaderEntries(t *testing.T, c *localcluster.Cluster) (entries, commands float64) {
	t.Helper()
	for _, p := range c.OffsetsReplicas() {
		m := itest.ScrapeMetrics(t, p)
		if m["sluice_offsets_raft_is_leader"] == 1 {
			return m["sluice_offsets_coordinator_entries_total"], m["sluice_offsets_coordinator_commands_total"]
		}
	}
	t.Fatal("no offsets leader")
	return 0, 0
}
