package ops

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
)

// TestMetadataHealthMetrics: the metadata leader's /metrics follow a storage
// node going away and coming back: partitions and alive nodes are counted,
// under-replicated partitions rise when a node is stopped and return to 0
// once it is back in sync; ISR shrinks, expansions and leader elections are
// counted by the controller.
func TestMetadataHealthMetrics(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3, "-replica-lag-time-max", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateReplicated(t, ctx, c, "health", 3, "1")
	itest.WaitFullISR(t, ctx, c, "health", 3)

	leaderMetrics := func() map[string]float64 {
		t.Helper()
		snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := c.MetadataLeader(snap.Leader)
		if p == nil {
			t.Fatalf("no voter at %q", snap.Leader)
		}
		return itest.ScrapeMetrics(t, p)
	}
	waitMetric := func(name string, ok func(float64) bool, what string) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			m := leaderMetrics()
			if v, found := m[name]; found && ok(v) {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never became %s: %v", name, what, m[name])
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	before := waitMetric("sluice_metadata_under_replicated_partitions", func(v float64) bool { return v == 0 }, "0")
	if before["sluice_metadata_partitions"] != 3 || before["sluice_metadata_alive_storage_nodes"] != 3 || before["sluice_metadata_offline_partitions"] != 0 {
		t.Fatalf("healthy cluster: %v", before)
	}

	storage3 := c.Proc("storage-3")
	c.StopProc(storage3, true) // kill -9: no controlled shutdown
	down := waitMetric("sluice_metadata_under_replicated_partitions", func(v float64) bool { return v == 3 }, "3 (every partition has a replica on storage-3)")
	if down["sluice_metadata_alive_storage_nodes"] != 2 || down["sluice_metadata_isr_shrinks_total"] < 1 {
		t.Fatalf("with storage-3 down: %v", down)
	}
	t.Logf("storage-3 down: under-replicated %v, ISR shrinks %v, leader elections %v", down["sluice_metadata_under_replicated_partitions"],
		down["sluice_metadata_isr_shrinks_total"], down["sluice_metadata_leader_elections_total"])

	if err := c.StartProc(ctx, storage3); err != nil {
		t.Fatal(err)
	}
	up := waitMetric("sluice_metadata_under_replicated_partitions", func(v float64) bool { return v == 0 }, "0 again")
	if up["sluice_metadata_alive_storage_nodes"] != 3 || up["sluice_metadata_isr_expands_total"] < 1 || up["sluice_metadata_offline_partitions"] != 0 {
		t.Fatalf("with storage-3 back: %v", up)
	}
	if up["sluice_metadata_leader_elections_total"] < 1 {
		t.Fatalf("storage-3 led a partition (placement spreads leaders), yet no election was counted: %v", up)
	}
}
