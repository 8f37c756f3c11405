package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestKafkaFetchSessions: a franz-go consumer of 1,000 idle partitions
// fetches with sessions (KIP-227, franz-go's default) and then without
// (kgo.DisableFetchSessions), each for the same time; with sessions its
// fetch requests are a small fraction of the bytes (they name only what
// changed), the listeners hold a session, and records produced meanwhile
// are read either way. The test logs the request bytes and the CPU of the
// frontend and storage node per second of each run (the figures of
// docs/performance.md).
func TestKafkaFetchSessions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const partitions = 1000
	itest.CreateTopic(t, ctx, c, "wide", partitions, 1)
	var brokers []*localcluster.Proc
	for _, p := range c.Procs {
		if strings.HasPrefix(p.Name, "frontend") || strings.HasPrefix(p.Name, "storage") {
			brokers = append(brokers, p)
		}
	}
	sample := func() (fetchBytes, fetches, cpu, sessions float64) {
		for _, p := range brokers {
			for name, v := range itest.MetricSeries(t, p.AdminAddr) {
				switch {
				case strings.HasPrefix(name, "sluice_kafka_request_bytes_total") && strings.Contains(name, `api="Fetch"`):
					fetchBytes += v
				case strings.HasPrefix(name, "sluice_kafka_requests_total") && strings.Contains(name, `api="Fetch"`):
					fetches += v
				case name == "sluice_kafka_fetch_sessions":
					sessions += v
				}
			}
			cpu += itest.CPUSeconds(t, p.Pid())
		}
		return
	}
	producer := itest.FranzClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const window = 8 * time.Second
	want := 0 // records in the topic: each run's consumer reads them all
	run := func(name string, opts ...kgo.Opt) (bytesPerSec, cpuPerSec, sessions float64) {
		cl := itest.FranzClient(t, c, append([]kgo.Opt{kgo.ConsumeTopics("wide"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
		// A record per partition first: every partition is being fetched
		// once they are all read.
		var recs []*kgo.Record
		for p := range int32(partitions) {
			recs = append(recs, &kgo.Record{Topic: "wide", Partition: p, Value: []byte(name)})
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want += partitions
		read := 0
		for read < want {
			pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				t.Fatalf("%s: read %d of %d", name, read, want)
			}
			read += fs.NumRecords()
		}
		// The fetch after the records names every partition's new offset;
		// the partitions are idle from the one after.
		idleFor := func(d time.Duration) {
			idle, icancel := context.WithTimeout(ctx, d)
			defer icancel()
			for idle.Err() == nil {
				if fs := cl.PollFetches(idle); fs.NumRecords() > 0 {
					t.Errorf("%s: %d records from idle partitions", name, fs.NumRecords())
				}
			}
		}
		idleFor(2 * time.Second)
		b0, n0, c0, _ := sample()
		idleFor(window)
		b1, n1, c1, held := sample()
		cl.Close()
		secs := window.Seconds()
		bytesPerSec, cpuPerSec = (b1-b0)/secs, (c1-c0)/secs
		t.Logf("FIGURE %s: a consumer of %d idle partitions sends %.0f fetch request bytes/s (%.1f fetches/s, %.0f bytes each); the frontend and storage node use %.3f CPU-seconds/s",
			name, partitions, bytesPerSec, (n1-n0)/secs, (b1-b0)/max(n1-n0, 1), cpuPerSec)
		return bytesPerSec, cpuPerSec, held
	}
	withBytes, withCPU, held := run("with sessions")
	withoutBytes, withoutCPU, _ := run("without sessions", kgo.DisableFetchSessions())
	if held < 1 {
		t.Fatalf("no fetch session held while a consumer with sessions fetched (%v)", held)
	}
	if withBytes*10 > withoutBytes {
		t.Fatalf("fetch request bytes/s: %.0f with sessions, %.0f without; want a tenth or less", withBytes, withoutBytes)
	}
	t.Logf("FIGURE fetch sessions: request bytes %.3f of sessionless, broker CPU %.2f of sessionless", withBytes/withoutBytes, withCPU/withoutCPU)
}
