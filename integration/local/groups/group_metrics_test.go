package groups

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
)

// TestGroupLagMetrics: the offsets service exports each group's lag and
// committed offset per partition: after a group read and committed 30 of 100
// records, the series say lag 70, committed 30 (from the Raft leader only).
func TestGroupLagMetrics(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "lagging", 1, 1)
	itest.ProduceInRequests(t, c, "lagging", "v", 100, 20)
	if _, errOut, code := itest.Sluicectl(t, c, "", "consume", "lagging", "--group", "readers", "--from-beginning", "--max-messages", "30"); code != 0 {
		t.Fatalf("consume: exit %d: %s", code, errOut)
	}
	want := map[string]float64{
		`sluice_offsets_group_lag{group="readers",partition="0",topic="lagging"}`:              70,
		`sluice_offsets_group_committed_offset{group="readers",partition="0",topic="lagging"}`: 30,
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]float64{}
		exporters := 0
		for _, p := range c.OffsetsReplicas() {
			found := false
			for name, v := range itest.MetricSeries(t, p.AdminAddr) {
				if _, tracked := want[name]; tracked {
					got[name] += v
					found = true
				}
			}
			if found {
				exporters++
			}
		}
		ok := exporters == 1
		for k, v := range want {
			ok = ok && got[k] == v
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group series %v from %d replicas, want %v from the leader alone", got, exporters, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
