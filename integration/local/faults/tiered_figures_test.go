package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// figureRecord is the value of the figures' records: 1 KiB that does not
// compress (the producers send them uncompressed anyway).
var figureRecord = func() []byte {
	b := make([]byte, 1024)
	for i := range b {
		b[i] = byte(i*7919 + i/13)
	}
	return b
}()

// produceMiB produces mib MiB of 1 KiB records to topic with franz-go
// (acks=all, uncompressed) and returns MB/s.
func produceMiB(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, mib int) float64 {
	t.Helper()
	recs := make([]*kgo.Record, mib*1024)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: figureRecord}
	}
	start := time.Now()
	itest.ProduceAll(t, ctx, cl, recs, "figures")
	return float64(mib) * (1 << 20) / 1e6 / time.Since(start).Seconds()
}

// consumeAll reads topic from offset 0 to want records with a new
// franz-go consumer and returns MB/s.
func consumeAll(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, want int) float64 {
	t.Helper()
	cl := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	start := time.Now()
	var n, bytes int
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", n, want, err)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch %s-%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { n, bytes = n+1, bytes+len(r.Value) })
	}
	return float64(bytes) / 1e6 / time.Since(start).Seconds()
}

// TestTieredFigures measures tiered storage's figures for
// docs/performance.md (measured, not asserted; SLUICE_FIGURES=1 only):
// produce throughput with tiering on against off, the local disk a tiered
// partition uses with ten times its local retention produced, and the
// read throughput of a 1 GiB backlog from the object store against the
// same read from local disk. SLUICE_FIGURES_UPLOAD_RATE sets the storage
// node's -remote-upload-bytes-per-sec.
//
//	SLUICE_FIGURES=1 go test -run TestTieredFigures -v ./local/faults/
func TestTieredFigures(t *testing.T) {
	itest.FiguresOnly(t, "tiered storage figures")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// A read cache far smaller than the backlog: every block of the read
	// comes from the object store, as for a consumer of a backlog larger
	// than the cache (the default is 1 GiB).
	storageFlags := []string{"-retention-check-interval", "1s", "-remote-upload-interval", "200ms", "-remote-cache-bytes", strconv.Itoa(64 << 20)}
	if v := os.Getenv("SLUICE_FIGURES_UPLOAD_RATE"); v != "" { // -remote-upload-bytes-per-sec
		storageFlags = append(storageFlags, "-remote-upload-bytes-per-sec", v)
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1, ObjectStore: true, Extra: map[string][]string{"storage": storageFlags}})
	const localRetention = 100 << 20
	for _, tc := range []struct {
		name   string
		config map[string]string
	}{
		{"plain", map[string]string{cluster.ConfigSegmentBytes: strconv.Itoa(32 << 20)}},
		{"tiered", map[string]string{cluster.ConfigSegmentBytes: strconv.Itoa(32 << 20), cluster.ConfigRemoteStorageEnable: "true",
			cluster.ConfigLocalRetentionBytes: strconv.Itoa(localRetention)}},
	} {
		itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: tc.name, Partitions: 1, ReplicationFactor: 1, Config: tc.config})
	}
	producer := itest.FranzClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100000))
	const runs, mib = 4, 256 // 1 GiB per topic
	var off, on []float64
	for run := range runs {
		off = append(off, produceMiB(t, ctx, producer, "plain", mib))
		on = append(on, produceMiB(t, ctx, producer, "tiered", mib))
		t.Logf("run %d: produce %d MiB: tiering off %.0f MB/s, on %.0f MB/s", run+1, mib, off[run], on[run])
	}
	t.Logf("FIGURE produce throughput (1 KiB records, acks=all, 1 GiB in runs of %d MiB): tiering off %s MB/s (median %.0f), on %s MB/s (median %.0f), on/off %.2f",
		mib, itest.FormatRuns(off), itest.Median(off), itest.FormatRuns(on), itest.Median(on), itest.Median(on)/itest.Median(off))

	storage := c.Proc("storage-1")
	sizeOf := func(topic string) float64 {
		return itest.MetricSeries(t, storage.AdminAddr)[fmt.Sprintf(`sluice_storage_log_size_bytes{partition="0",topic="%s"}`, topic)]
	}
	testkit.WaitFor(t, 5*time.Minute, "the tiered partition uploaded and down to its local retention", func() bool {
		_, p := itest.LeaderOf(t, ctx, c, "tiered", 0)
		return p.Remote != nil && itest.ScrapeMetrics(t, storage)["sluice_storage_remote_upload_lag_segments"] == 0 &&
			sizeOf("tiered") < 2*localRetention
	})
	_, p := itest.LeaderOf(t, ctx, c, "tiered", 0)
	t.Logf("FIGURE local disk with %d MiB produced and local.retention.bytes %d MiB (32 MiB segments): tiered partition %.0f MiB on disk, %.0f MiB remote in %d segments; the plain one %.0f MiB",
		runs*mib, localRetention>>20, sizeOf("tiered")/(1<<20), float64(p.Remote.Bytes)/(1<<20), p.Remote.Segments, sizeOf("plain")/(1<<20))

	records := runs * mib * 1024
	local := consumeAll(t, ctx, c, "plain", records)
	remote := consumeAll(t, ctx, c, "tiered", records)
	m := itest.ScrapeMetrics(t, storage)
	t.Logf("FIGURE read of a 1 GiB backlog from offset 0 (franz-go): local disk %.0f MB/s, tiered %.0f MB/s (%.0f MiB of it from the object store, cache hits %.0f, misses %.0f), tiered/local %.2f",
		local, remote, m["sluice_storage_remote_read_bytes_total"]/(1<<20), m["sluice_storage_remote_cache_hits_total"], m["sluice_storage_remote_cache_misses_total"], remote/local)
}

// TestTieredReplicaFigures measures the time a replaced storage node takes
// to join the ISR of a partition holding SLUICE_FIGURES_GIB GiB (default
// 5), with and without tiered storage: the node's copy of the partition is
// deleted while it is down, and it copies again what the leader's disk
// holds (with tiering, the local retention's 256 MiB and the active
// segment). SLUICE_FIGURES=1 only:
//
//	SLUICE_FIGURES=1 go test -run TestTieredReplicaFigures -v -timeout 60m ./local/faults/
func TestTieredReplicaFigures(t *testing.T) {
	itest.FiguresOnly(t, "tiered storage replica figures")
	gib := 5
	if v, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_GIB")); err == nil && v > 0 {
		gib = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 2, ObjectStore: true, Extra: map[string][]string{
		"storage": {"-retention-check-interval", "1s", "-remote-upload-interval", "200ms"},
	}})
	producer := itest.FranzClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100000))
	for _, tiered := range []bool{false, true} {
		topic := "replica-plain"
		config := map[string]string{cluster.ConfigSegmentBytes: strconv.Itoa(128 << 20)}
		if tiered {
			topic = "replica-tiered"
			config[cluster.ConfigRemoteStorageEnable] = "true"
			config[cluster.ConfigLocalRetentionBytes] = strconv.Itoa(256 << 20)
		}
		itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 2, Config: config})
		itest.WaitFullISR(t, ctx, c, topic, 2)
		for range gib * 4 {
			produceMiB(t, ctx, producer, topic, 256)
		}
		leader, p := itest.LeaderOf(t, ctx, c, topic, 0)
		if tiered {
			lead := c.Proc("storage-" + strconv.Itoa(int(leader)))
			testkit.WaitFor(t, 10*time.Minute, "uploads caught up and the leader's disk down to the local retention", func() bool {
				_, p := itest.LeaderOf(t, ctx, c, topic, 0)
				size := itest.MetricSeries(t, lead.AdminAddr)[fmt.Sprintf(`sluice_storage_log_size_bytes{partition="0",topic="%s"}`, topic)]
				return p.Remote != nil && p.Remote.Bytes > int64(gib-1)<<30 && size < 512<<20
			})
		}
		follower := p.Replicas[0]
		if follower == leader {
			follower = p.Replicas[1]
		}
		proc := c.Proc("storage-" + strconv.Itoa(int(follower)))
		c.StopProc(proc, false)
		waitISR(t, ctx, c, topic, 1, time.Minute)
		if err := os.RemoveAll(filepath.Join(c.DataDir(), proc.Name, topic+"-0")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := c.StartProc(ctx, proc); err != nil {
			t.Fatal(err)
		}
		waitISR(t, ctx, c, topic, 2, 20*time.Minute)
		t.Logf("FIGURE replaced replica back in the ISR of a %d GiB partition, tiering %v: %.1f s", gib, tiered, time.Since(start).Seconds())
	}
}

// waitISR waits until partition 0 of topic has n replicas in sync.
func waitISR(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, n int, within time.Duration) {
	t.Helper()
	testkit.WaitFor(t, within, fmt.Sprintf("%d replicas of %s-0 in sync", n, topic), func() bool {
		_, p := itest.LeaderOf(t, ctx, c, topic, 0)
		return len(p.ISR) == n
	})
}
