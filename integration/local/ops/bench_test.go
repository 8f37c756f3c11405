package ops

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// benchSide and benchResult are the parts of `sluice-bench --json` the
// tests read.
type benchSide struct {
	Records    int64               `json:"records"`
	Sent       int64               `json:"sent"`
	Failed     int64               `json:"failed"`
	Unconsumed int64               `json:"unconsumed"`
	Latency    *itest.BenchLatency `json:"latency_ms"`
}

type benchResult struct {
	Mode          string              `json:"mode"`
	Records       int64               `json:"records"`
	RecordsPerSec float64             `json:"records_per_sec"`
	MBPerSec      float64             `json:"mb_per_sec"`
	Latency       *itest.BenchLatency `json:"latency_ms"`
	Produce       *benchSide          `json:"produce"`
	Consume       *benchSide          `json:"consume"`
	Failed        int64               `json:"failed"`
	Errors        []struct {
		Error string `json:"error"`
		Count int64  `json:"count"`
	} `json:"errors"`
	Interrupted  bool `json:"interrupted"`
	Transactions *struct {
		RecordsPerTxn int                 `json:"records_per_txn"`
		Committed     int64               `json:"committed"`
		CommitLatency *itest.BenchLatency `json:"commit_latency_ms"`
	} `json:"transactions"`
}

// sluiceBench runs the real sluice-bench binary against the cluster with
// --json and returns its parsed output (when it printed one), stderr and
// exit status.
func sluiceBench(t *testing.T, c *localcluster.Cluster, args ...string) (benchResult, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(itest.BuildBinaries(t), "sluice-bench"), append(args, "--frontends", c.FrontendURL(),
		"--metadata", c.MetadataURL(), "--offsets", c.OffsetsURL(), "--json", "--progress", "off")...)
	out, stderr, code := itest.RunBinary(t, cmd)
	var r benchResult
	if len(out) > 0 {
		if strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("sluice-bench %v: stdout is not one JSON line: %q", args, out)
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("sluice-bench %v: stdout %q: %v", args, out, err)
		}
	}
	return r, stderr, code
}

// checkLatency checks a latency summary is there and ordered.
func checkLatency(t *testing.T, what string, l *itest.BenchLatency, records int64) {
	t.Helper()
	if l == nil || l.Count != records || l.P50 <= 0 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Fatalf("%s latency: %+v (want %d values, 0 < p50 <= p95 <= p99 <= p99.9 <= max)", what, l, records)
	}
}

// mustBench runs sluice-bench, which must succeed, and checks the common
// figures: records counted, no failure, positive throughput.
func mustBench(t *testing.T, c *localcluster.Cluster, records int64, args ...string) benchResult {
	t.Helper()
	r, stderr, code := sluiceBench(t, c, args...)
	if code != 0 {
		t.Fatalf("sluice-bench %v: exit %d: %s", args, code, stderr)
	}
	if r.Records != records || r.Failed != 0 || len(r.Errors) != 0 || r.Interrupted || r.RecordsPerSec <= 0 || r.MBPerSec <= 0 {
		t.Fatalf("sluice-bench %v: %+v", args, r)
	}
	t.Logf("sluice-bench %s: %.0f rec/s, %.2f MB/s, latency %+v", strings.Join(args, " "), r.RecordsPerSec, r.MBPerSec, r.Latency)
	return r
}

// TestSluiceBench runs the real sluice-bench binary in each mode against a
// local cluster and checks what its --json reports, then makes every record
// fail (exit 1) and gives it a bad flag (exit 2).
func TestSluiceBench(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3, "-replica-lag-time-max", "1s")
	const n = 20000
	records := strconv.Itoa(n)

	t.Run("produce-sdk", func(t *testing.T) {
		r := mustBench(t, c, n, "produce", "--topic", "bench1", "--partitions", "3", "--replication-factor", "1",
			"--records", records, "--keys", "random", "--acks", "leader")
		checkLatency(t, "produce", r.Latency, n)
		if r.Produce == nil || r.Produce.Sent != n || r.Consume != nil {
			t.Fatalf("sides: %+v %+v", r.Produce, r.Consume)
		}
	})
	t.Run("produce-json", func(t *testing.T) {
		r := mustBench(t, c, n, "produce", "--topic", "bench1", "--body", "json", "--json-batch", "500", "--producers", "2",
			"--records", records, "--keys", "fixed:10")
		checkLatency(t, "produce", r.Latency, n)
	})
	// Two producers, each committing every 1,000 records, take the records
	// from one plan: 20 transactions, or 21 when the producers' shares are
	// not multiples of 1,000 and each commits a last, shorter one.
	// read_committed readers see all their records. The SDK's transactional
	// producer, then franz-go's over the Kafka listener.
	for _, tc := range []struct {
		name, topic string
		args        []string
	}{
		{"produce-transactions", "benchtx", nil},
		{"produce-transactions-kafka", "benchtxk", []string{"--protocol", "kafka", "--bootstrap", c.KafkaAddrs()[0]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"produce", "--topic", tc.topic, "--partitions", "3", "--replication-factor", "1",
				"--records", records, "--producers", "2", "--txn-records", "1000"}, tc.args...)
			r := mustBench(t, c, n, args...)
			checkLatency(t, "produce", r.Latency, n)
			if tx := r.Transactions; tx == nil || tx.RecordsPerTxn != 1000 || tx.Committed < int64(n/1000) || tx.Committed > int64(n/1000+1) || tx.CommitLatency == nil {
				t.Fatalf("transactions: %+v", r.Transactions)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Every transaction is committed: each partition's last stable
			// offset is its high watermark, past the records and the markers.
			meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
			pool := storageclient.NewPool("bench-lso")
			defer pool.Close()
			var stable, end int64
			for p := range int32(3) {
				lso, err := client.ListOffsetAt(ctx, meta, pool, tc.topic, p, protocol.TimestampLatest, protocol.ReadCommitted)
				if err != nil {
					t.Fatal(err)
				}
				hw, err := client.ListOffset(ctx, meta, pool, tc.topic, p, protocol.TimestampLatest)
				if err != nil {
					t.Fatal(err)
				}
				stable, end = stable+lso, end+hw
			}
			if stable != end || end <= n {
				t.Fatalf("last stable offsets add up to %d, high watermarks to %d: want equal, above the %d records (markers)", stable, end, n)
			}
		})
	}
	t.Run("consume", func(t *testing.T) {
		// Both produce runs went to bench1: it holds 2n records.
		r := mustBench(t, c, 2*n, "consume", "--topic", "bench1", "--records", strconv.Itoa(2*n), "--consumers", "2")
		if r.Latency != nil || r.Consume == nil || r.Consume.Records != 2*n {
			t.Fatalf("consume: %+v", r)
		}
		if _, stderr, code := sluiceBench(t, c, "consume", "--topic", "bench1", "--records", strconv.Itoa(2*n+1)); code != 1 || !strings.Contains(stderr, "fewer than --records") {
			t.Fatalf("consume of more than the topic holds: exit %d, %s", code, stderr)
		}
	})
	t.Run("share", func(t *testing.T) {
		// Two members of a new share group accept every record of bench1,
		// 1,000 an acquisition: what the run counts is what the group
		// holds as accepted, and the group took the given setting.
		r := mustBench(t, c, 2*n, "share", "--topic", "bench1", "--records", strconv.Itoa(2*n), "--consumers", "2",
			"--group", "bench-share", "--group-config", "share.max.fetch.records=1000")
		if r.Mode != "share" || r.Latency != nil || r.Consume == nil || r.Consume.Records != 2*n || r.Produce != nil {
			t.Fatalf("share: %+v", r)
		}
		d, err := shares.NewClient(c.OffsetsURLs()).Describe(context.Background(), "bench-share")
		if err != nil {
			t.Fatal(err)
		}
		var accepted int64
		for _, p := range d.Partitions {
			accepted += p.Accepted
		}
		if accepted < 2*n || d.Config[shares.ConfigMaxFetchRecords] != "1000" {
			t.Fatalf("share group after the run: %d records accepted (want %d at least), config %v", accepted, 2*n, d.Config)
		}
	})
	t.Run("consume-kafka", func(t *testing.T) {
		// franz-go members of a group through the Kafka listeners: the
		// group is the offsets service's, a classic one.
		r := mustBench(t, c, 2*n, "consume", "--protocol", "kafka", "--bootstrap", c.KafkaAddrs()[0], "--topic", "bench1",
			"--records", strconv.Itoa(2*n), "--consumers", "2", "--group", "bench-kafka")
		if r.Consume == nil || r.Consume.Records != 2*n {
			t.Fatalf("consume over Kafka: %+v", r)
		}
		d, err := groups.NewClient(c.OffsetsURLs()).Describe(context.Background(), "bench-kafka")
		if err != nil || d.Protocol != groups.ProtocolClassic {
			t.Fatalf("the Kafka consumers' group: %+v, %v", d, err)
		}
	})
	t.Run("e2e-kafka", func(t *testing.T) {
		r := mustBench(t, c, n, "e2e", "--protocol", "kafka", "--bootstrap", c.KafkaAddrs()[0], "--topic", "bench4", "--partitions", "3",
			"--replication-factor", "1", "--records", records, "--consumers", "2")
		checkLatency(t, "end-to-end", r.Latency, n)
		if r.Produce == nil || r.Produce.Records != n || r.Consume == nil || r.Consume.Unconsumed != 0 {
			t.Fatalf("e2e over Kafka: %+v %+v", r.Produce, r.Consume)
		}
	})
	t.Run("e2e-rf3", func(t *testing.T) {
		r := mustBench(t, c, n, "e2e", "--topic", "bench3", "--partitions", "3", "--replication-factor", "3",
			"--config", "min.insync.replicas=2", "--acks", "all", "--records", records, "--consumers", "2")
		checkLatency(t, "end-to-end", r.Latency, n)
		if r.Produce == nil || r.Produce.Records != n || r.Produce.Failed != 0 || r.Consume == nil || r.Consume.Unconsumed != 0 {
			t.Fatalf("e2e sides: %+v %+v", r.Produce, r.Consume)
		}
		checkLatency(t, "produce", r.Produce.Latency, n)
	})
	t.Run("usage-error", func(t *testing.T) {
		if _, stderr, code := sluiceBench(t, c, "produce", "--records", "0"); code != 2 || !strings.Contains(stderr, "--records") {
			t.Fatalf("exit %d, %s", code, stderr)
		}
	})
	t.Run("every-record-fails", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin := cluster.NewClient([]string{c.FrontendURL()})
		if _, err := admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "benchmis", Partitions: 1, ReplicationFactor: 3,
			Config: map[string]string{"min.insync.replicas": "3"}}); err != nil {
			t.Fatal(err)
		}
		itest.WaitFullISR(t, ctx, c, "benchmis", 3)
		// With a storage node gone the ISR shrinks below
		// min.insync.replicas=3: acks=all is refused.
		c.StopProc(c.Proc("storage-3"), false)
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, err := itest.ProduceOne(ctx, c.FrontendURL(), "benchmis", "probe")
			if err == nil && code == int16(protocol.NotEnoughReplicas) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("acks=all never refused with NOT_ENOUGH_REPLICAS (last code %d, %v)", code, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		r, stderr, code := sluiceBench(t, c, "produce", "--topic", "benchmis", "--body", "json", "--records", "2000", "--json-batch", "500")
		if code != 1 || r.Failed != 2000 || r.Records != 0 || len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Error, "NOT_ENOUGH_REPLICAS") ||
			!strings.Contains(stderr, "2,000 records failed") {
			t.Fatalf("json body: exit %d, %+v, stderr %s", code, r, stderr)
		}
		// The SDK retries NOT_ENOUGH_REPLICAS (retriable) until its delivery
		// timeout.
		r, stderr, code = sluiceBench(t, c, "produce", "--topic", "benchmis", "--records", "1000", "--delivery-timeout", "2s")
		if code != 1 || r.Failed != 1000 || r.Records != 0 || len(r.Errors) == 0 {
			t.Fatalf("sdk: exit %d, %+v, stderr %s", code, r, stderr)
		}
		t.Logf("sdk failures: %+v", r.Errors)
	})
}
