package ops

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestBenchFigures measures the standard workloads of docs/dev/performance-log.md
// with the sluice-bench binary, each next to its physical limit measured in
// the same run; it runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -timeout 30m -run TestBenchFigures -v ./local/ops/
//
// A local cluster (3 metadata voters, 3 storage nodes, 3 offsets replicas,
// one frontend, defaults) and the benchmark share this machine. Each
// workload runs SLUICE_FIGURES_RUNS times (default 3), alternating with its
// baseline; the log ends with the medians:
//   - produce, RF=1, acks=leader, 100-byte records (SDK, unthrottled);
//   - produce, RF=3, acks=all, flush.policy=fsync, 100-byte records;
//   - produce, RF=1, acks=all, flush.policy=fsync, 1 KiB records (8
//     partitions; the others have 4);
//   - e2e, RF=3, acks=all, at half of the RF=3 median maximum;
//   - consume a 10-million-record backlog of 100-byte records;
//   - every run starts after a sync(2), and each workload's topic is deleted
//     once it is measured (the page cache holds only the current one);
//   - the disk baseline writes what the storage nodes wrote in the run (up to
//     2 GiB), in writes of their mean request size, fsynced at their mean
//     bytes per fsync (from sluice_storage_fsyncs_total); the sendfile
//     baseline sends the consumed bytes over loopback.
func TestBenchFigures(t *testing.T) {
	itest.FiguresOnly(t, "the benchmark figures")
	runs := 3
	if n, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_RUNS")); err == nil && n > 0 {
		runs = n
	}
	dataDir := t.TempDir()
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	f := &itest.Figures{T: t, C: c, DataDir: dataDir}
	var out []string
	report := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		t.Log("FIGURE " + line)
		out = append(out, line)
	}

	type produceLoad struct {
		name  string
		topic string
		rf    int
		args  []string
	}
	var rf3Max float64
	for _, w := range []produceLoad{
		{"RF=1 acks=leader 100 B", "fig-rf1", 1, []string{"--partitions", "4", "--replication-factor", "1", "--acks", "leader"}},
		{"RF=3 acks=all fsync 100 B", "fig-rf3", 3, []string{"--partitions", "4", "--replication-factor", "3", "--config", "min.insync.replicas=2", "--acks", "all"}},
		// 8 partitions: with one batch in flight per partition, 4 leave the
		// disk waiting between a partition's fsync and its next batch.
		{"RF=1 acks=all fsync 1 KiB", "fig-1k", 1, []string{"--partitions", "8", "--replication-factor", "1", "--acks", "all", "--record-size", "1024"}},
	} {
		var rates, mbs, disks, limits, ratios []float64
		for run := 1; run <= runs; run++ {
			before := f.StorageCounters()
			r := f.Bench(append([]string{"produce", "--topic", w.topic, "--duration", "8s"}, w.args...)...)
			after := f.StorageCounters()
			written := (after.ProduceBytes - before.ProduceBytes) * float64(w.rf)
			elapsed := r.ElapsedSec // the warm-up included, as in the counters
			diskMB := written / elapsed / 1e6
			chunk := int64((after.ProduceBytes - before.ProduceBytes) / max(1, after.ProduceRequests-before.ProduceRequests))
			every := int64(0)
			if fs := after.Fsyncs - before.Fsyncs; fs > 0 {
				every = int64(written / fs)
			}
			limit := f.Disk(min(int64(written), 2<<30), max(chunk, 4096), every)
			rates, mbs, disks, limits = append(rates, r.RecordsPerSec), append(mbs, r.MBPerSec), append(disks, diskMB), append(limits, limit.MBPerSec)
			ratios = append(ratios, diskMB/limit.MBPerSec)
			t.Logf("%s run %d: %.0f rec/s, %.1f MB/s of values, %.1f MB/s to disk (%d-byte requests, an fsync every %d bytes); disk baseline %.1f MB/s (%d fsyncs); latency %+v",
				w.name, run, r.RecordsPerSec, r.MBPerSec, diskMB, chunk, every, limit.MBPerSec, limit.Fsyncs, r.Latency)
		}
		report("%s: median %.0f rec/s (%.1f MB/s of values; runs %s), disk writes %.1f MB/s vs raw sequential write with the same fsync cadence %.1f MB/s: ratio %.2f",
			w.name, itest.Median(rates), itest.Median(mbs), itest.FormatRuns(rates), itest.Median(disks), itest.Median(limits), itest.Median(ratios))
		if w.rf == 3 {
			rf3Max = itest.Median(rates)
		}
		f.DeleteTopic(w.topic)
	}

	// Latency at half the RF=3 maximum, on a new topic.
	var p50s, p99s, e2e50s, e2e99s []float64
	rate := strconv.Itoa(int(rf3Max / 2))
	for run := 1; run <= runs; run++ {
		r := f.Bench("e2e", "--topic", "fig-latency", "--partitions", "4", "--replication-factor", "3", "--config", "min.insync.replicas=2",
			"--acks", "all", "--rate", rate, "--duration", "8s")
		p50s, p99s = append(p50s, r.Produce.Latency.P50), append(p99s, r.Produce.Latency.P99)
		e2e50s, e2e99s = append(e2e50s, r.Latency.P50), append(e2e99s, r.Latency.P99)
		t.Logf("e2e run %d at %s rec/s: produce %+v, end to end %+v", run, rate, r.Produce.Latency, r.Latency)
	}
	f.DeleteTopic("fig-latency")
	report("RF=3 acks=all at %s rec/s (half the maximum): produce p50 %.1f ms, p99 %.1f ms (runs %s); end-to-end p50 %.1f ms, p99 %.1f ms (runs %s)",
		rate, itest.Median(p50s), itest.Median(p99s), itest.FormatRuns(p99s), itest.Median(e2e50s), itest.Median(e2e99s), itest.FormatRuns(e2e99s))

	// Consume a 10-million-record backlog.
	const backlog = 10_000_000
	before := f.StorageCounters()
	f.Bench("produce", "--topic", "fig-backlog", "--partitions", "4", "--replication-factor", "1", "--acks", "leader", "--records", strconv.Itoa(backlog))
	stored := int64(f.StorageCounters().ProduceBytes - before.ProduceBytes)
	var crates, cmbs, climits []float64
	for run := 1; run <= runs; run++ {
		r := f.Bench("consume", "--topic", "fig-backlog", "--records", strconv.Itoa(backlog))
		limit := f.Sendfile(stored)
		batchMB := r.RecordsPerSec * float64(stored) / backlog / 1e6
		crates, cmbs, climits = append(crates, r.RecordsPerSec), append(cmbs, batchMB), append(climits, limit.MBPerSec)
		t.Logf("consume run %d: %.0f rec/s, %.1f MB/s of batches; loopback sendfile of the same %d bytes %.1f MB/s", run, r.RecordsPerSec, batchMB, stored, limit.MBPerSec)
	}
	report("consume 10 M × 100 B: median %.0f rec/s (runs %s), %.1f MB/s of batches vs raw loopback sendfile %.1f MB/s: ratio %.2f",
		itest.Median(crates), itest.FormatRuns(crates), itest.Median(cmbs), itest.Median(climits), itest.Median(cmbs)/itest.Median(climits))
	t.Log("summary:\n" + strings.Join(out, "\n"))
}
