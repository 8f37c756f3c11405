package faults

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// TestReplicationFigures measures what docs/performance.md reports for
// replication; it runs only with SLUICE_FIGURES=1 (figures are measured, not
// asserted):
//
//	SLUICE_FIGURES=1 go test -run TestReplicationFigures -v ./local/faults/
func TestReplicationFigures(t *testing.T) {
	itest.FiguresOnly(t, "replication figures")
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	admin := cluster.NewClient([]string{c.FrontendURL()})
	for _, tc := range []struct {
		name string
		rf   int
	}{{"rf1", 1}, {"rf3", 3}} {
		if _, err := admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: tc.name, Partitions: 1, ReplicationFactor: tc.rf,
			Config: map[string]string{"min.insync.replicas": strconv.Itoa(min(tc.rf, 2))}}); err != nil {
			t.Fatal(err)
		}
		itest.WaitFullISR(t, ctx, c, tc.name, tc.rf)
	}
	for _, size := range []int{100, 1024} {
		for run := 0; run < 3; run++ {
			r1 := produceRate(t, ctx, c, "rf1", protocol.AcksLeader, size, 4*time.Second)
			r3 := produceRate(t, ctx, c, "rf3", protocol.AcksAll, size, 4*time.Second)
			t.Logf("FIGURE %4d-byte records run %d: RF=1 acks=leader %9.0f rec/s, RF=3 acks=all (fsync) %9.0f rec/s, ratio %.2f",
				size, run+1, r1, r3, r3/r1)
		}
	}
	var times []time.Duration
	for i := 0; i < 3; i++ {
		times = append(times, failoverTime(t, ctx, c, "rf3"))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	t.Logf("FIGURE failover (kill -9 leader to first acks=all write on the new leader): %v, median %v", times, times[len(times)/2])
}

// produceRate sends batches of 100 records straight to the partition leader
// over the storage protocol from 4 pipelined senders, for d, and returns
// records per second.
func produceRate(t *testing.T, ctx context.Context, c interface{ MetadataURLs() []string }, topic string, acks int8, size int, d time.Duration) float64 {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("figures")
	defer pool.Close()
	addr, err := meta.Leader(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Get(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, size)
	var records atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := record.NewBuilder(record.CodecNone)
			var resp protocol.ProduceResponse
			for time.Now().Before(end) {
				b.Reset()
				for i := 0; i < 100; i++ {
					b.Append(record.Record{Value: value, Timestamp: time.Now().UnixMilli()})
				}
				batch, err := b.Build()
				if err != nil {
					t.Error(err)
					return
				}
				req := &protocol.ProduceRequest{Topic: topic, Acks: acks, TimeoutMs: 10000}
				if _, err := conn.Call(ctx, protocol.APIProduce, req, batch, &resp); err != nil {
					t.Error(err)
					return
				}
				records.Add(100)
			}
		}()
	}
	wg.Wait()
	return float64(records.Load()) / d.Seconds()
}

// failoverTime kills the partition's leader and measures the time until an
// acks=all write through the frontend succeeds again; it restarts the node and
// waits for the full ISR before returning.
func failoverTime(t *testing.T, ctx context.Context, c interface {
	FrontendURL() string
	MetadataURLs() []string
}, topic string) time.Duration {
	t.Helper()
	lc := c.(*localcluster.Cluster)
	leader, _ := itest.LeaderOf(t, ctx, lc, topic, 0)
	p := lc.Proc("storage-" + strconv.Itoa(int(leader)))
	lc.StopProc(p, true)
	start := time.Now()
	for {
		code, err := itest.ProduceOne(ctx, c.FrontendURL(), topic, "failover")
		if err == nil && code == 0 {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatal("no acknowledged write within a minute of the leader's death")
		}
	}
	took := time.Since(start)
	if err := lc.StartProc(ctx, p); err != nil {
		t.Fatal(err)
	}
	itest.WaitFullISR(t, ctx, lc, topic, 3)
	return took
}
