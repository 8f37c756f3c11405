package local

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// TestGroupFigures measures what docs/dev/performance-log.md reports for consumer
// groups; it runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -run TestGroupFigures -v ./local/
//
// Rebalance time: from a member's SIGTERM (clean leave) or SIGKILL (crash)
// until the two others own all six partitions, five times each, with the
// members' 3s session timeout and the coordinator's 500ms heartbeat interval.
// Consumer throughput: one group member reading a backlog of 100-byte records.
func TestGroupFigures(t *testing.T) {
	figuresOnly(t, "consumer-group figures")
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	createTopic(t, ctx, c, "rebalance", 6, 1, nil)
	m1 := startMember(t, c, "m1", "fig", "rebalance")
	m2 := startMember(t, c, "m2", "fig", "rebalance")
	for _, crash := range []bool{false, true} {
		var times []time.Duration
		for i := 0; i < 5; i++ {
			m3 := startMember(t, c, "m3", "fig", "rebalance")
			waitOwnership(t, 6, []int{2, 2, 2}, m1, m2, m3)
			start := time.Now()
			if crash {
				m3.kill()
			} else {
				m3.stop()
			}
			times = append(times, waitOwnership(t, 6, []int{3, 3}, m1, m2).Sub(start))
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		t.Logf("FIGURE rebalance after a member %s (3 members, 6 partitions, 3s session): %v, median %v",
			map[bool]string{false: "leaves", true: "crashes"}[crash], times, times[len(times)/2])
	}

	const partitions, backlog, size = 4, 2_000_000, 100
	createTopic(t, ctx, c, "backlog", partitions, 1, nil)
	fillBacklog(t, ctx, c, "backlog", partitions, backlog/partitions, size)
	for run := 0; run < 3; run++ {
		cfg := consumerConfig(c, "throughput-"+string(rune('a'+run)), "backlog")
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

// fillBacklog writes perPartition records of size bytes to each partition
// straight to its leader, in batches of 1000.
func fillBacklog(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions, perPartition, size int) {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("backlog")
	defer pool.Close()
	value := make([]byte, size)
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		addr, err := meta.Leader(ctx, topic, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pool.Get(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(p int32) {
			defer wg.Done()
			b := record.NewBuilder(record.CodecNone)
			var resp protocol.ProduceResponse
			for sent := 0; sent < perPartition; sent += 1000 {
				b.Reset()
				for i := 0; i < 1000; i++ {
					b.Append(record.Record{Value: value, Timestamp: time.Now().UnixMilli()})
				}
				batch, err := b.Build()
				if err != nil {
					t.Error(err)
					return
				}
				req := &protocol.ProduceRequest{Topic: topic, Partition: p, Acks: protocol.AcksLeader, TimeoutMs: 10000}
				if _, err := conn.Call(ctx, protocol.APIProduce, req, batch, &resp); err != nil {
					t.Error(err)
					return
				}
			}
		}(int32(p))
	}
	wg.Wait()
}
