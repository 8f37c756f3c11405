package faults

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// acked is one acknowledged record.
type acked struct {
	partition int32
	offset    int64
	value     string
}

// produceLoop sends batches of keyed records with acks=all until ctx ends and
// returns every acknowledged record. Failed records (during a failover) are
// simply not acknowledged.
func produceLoop(ctx context.Context, t *testing.T, url, topic string) []acked {
	var out []acked
	for seq := 0; ctx.Err() == nil; seq++ {
		var recs []map[string]string
		for i := 0; i < 50; i++ {
			v := fmt.Sprintf("r-%d-%d", seq, i)
			recs = append(recs, map[string]string{"key": "k" + strconv.Itoa(i%7), "value": v})
		}
		reply, err := itest.TryPost(ctx, url+"/v1/topics/"+topic+"/records?acks=all", map[string]any{"records": recs})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for i, o := range reply.Offsets {
			if o.ErrorCode == 0 && o.Error == "" {
				out = append(out, acked{o.Partition, o.Offset, recs[i]["value"]})
			}
		}
	}
	return out
}

// readAll reads every partition from its leader up to the high watermark.
func readAll(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions int) map[string]string {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("read-all")
	defer pool.Close()
	got := map[string]string{}
	for p := int32(0); p < int32(partitions); p++ {
		r := client.NewPartitionReader(meta, pool, topic, p, 0, client.ReaderConfig{MaxWait: 100 * time.Millisecond})
		last := int64(-1)
		for {
			recs, err := r.Fetch(ctx)
			if err != nil {
				t.Fatalf("read %s-%d at %d: %v", topic, p, r.Offset(), err)
			}
			for _, rec := range recs {
				if rec.Offset <= last {
					t.Fatalf("%s-%d: offset %d after %d", topic, p, rec.Offset, last)
				}
				last = rec.Offset
				got[fmt.Sprintf("%d/%d", p, rec.Offset)] = string(rec.Value)
			}
			if r.HighWatermark() >= 0 && r.Offset() >= r.HighWatermark() {
				break
			}
		}
	}
	return got
}

// TestLeaderKillUnderAcksAllLoad kills -9 the leader of a partition while
// producers write with acks=all to a 3-replica topic: every acknowledged record
// is still there afterwards, at its offset, and offsets were never reused.
func TestLeaderKillUnderAcksAllLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	itest.CreateReplicated(t, ctx, c, "rep", 3, "2")
	stopLoad := startLoad(ctx, t, c, "rep")
	time.Sleep(2 * time.Second)
	victim, _ := itest.LeaderOf(t, ctx, c, "rep", 0)
	p := c.Proc("storage-" + strconv.Itoa(int(victim)))
	c.StopProc(p, true)
	killedAt := time.Now()
	waitNewLeader(t, ctx, c, "rep", victim, -1)
	t.Logf("partition 0: node %d killed, a new leader took over after %v", victim, time.Since(killedAt).Round(10*time.Millisecond))
	time.Sleep(3 * time.Second)
	got := stopLoad()
	if err := c.StartProc(ctx, p); err != nil {
		t.Fatal(err)
	}
	itest.WaitFullISR(t, ctx, c, "rep", 3)
	stored := readAll(t, ctx, c, "rep", 3)
	checkAcked(t, got, stored)
	t.Logf("%d acknowledged records all present; %d stored", len(got), len(stored))
}

// waitNewLeader waits until partition 0 is led by a node other than old, with a
// leader epoch above minEpoch.
func waitNewLeader(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, old, minEpoch int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l, p := itest.LeaderOf(t, ctx, c, topic, 0); l != old && l >= 0 && p.LeaderEpoch > minEpoch {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-0: no new leader within 30s", topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startLoad runs produceLoop in the background; the returned function stops it
// and returns the acknowledged records.
func startLoad(ctx context.Context, t *testing.T, c *localcluster.Cluster, topic string) func() []acked {
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var got []acked
	wg.Add(1)
	go func() { defer wg.Done(); got = produceLoop(loadCtx, t, c.FrontendURL(), topic) }()
	return func() []acked { stop(); wg.Wait(); return got }
}

// checkAcked fails unless every acknowledged record is stored at its offset.
func checkAcked(t *testing.T, got []acked, stored map[string]string) {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	seen := map[string]bool{}
	for _, a := range got {
		id := fmt.Sprintf("%d/%d", a.partition, a.offset)
		if seen[id] {
			t.Fatalf("offset %s acknowledged twice", id)
		}
		seen[id] = true
		if stored[id] != a.value {
			t.Fatalf("acknowledged record %s (%s) is %q in the log", id, a.value, stored[id])
		}
	}
}
