package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestBenchFigures measures the standard workloads of docs/dev/performance-log.md
// with the sluice-bench binary, each next to its physical limit measured in
// the same run; it runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -timeout 30m -run TestBenchFigures -v ./local/
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
	figuresOnly(t, "the benchmark figures")
	runs := 3
	if n, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_RUNS")); err == nil && n > 0 {
		runs = n
	}
	dataDir := t.TempDir()
	c := startClusterConfig(t, localcluster.Config{Storage: 3})
	f := &figures{t: t, c: c, dataDir: dataDir}
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
			before := f.storageCounters()
			r := f.bench(append([]string{"produce", "--topic", w.topic, "--duration", "8s"}, w.args...)...)
			after := f.storageCounters()
			written := (after.produceBytes - before.produceBytes) * float64(w.rf)
			elapsed := r.ElapsedSec // the warm-up included, as in the counters
			diskMB := written / elapsed / 1e6
			chunk := int64((after.produceBytes - before.produceBytes) / max(1, after.produceRequests-before.produceRequests))
			every := int64(0)
			if fs := after.fsyncs - before.fsyncs; fs > 0 {
				every = int64(written / fs)
			}
			limit := f.disk(min(int64(written), 2<<30), max(chunk, 4096), every)
			rates, mbs, disks, limits = append(rates, r.RecordsPerSec), append(mbs, r.MBPerSec), append(disks, diskMB), append(limits, limit.MBPerSec)
			ratios = append(ratios, diskMB/limit.MBPerSec)
			t.Logf("%s run %d: %.0f rec/s, %.1f MB/s of values, %.1f MB/s to disk (%d-byte requests, an fsync every %d bytes); disk baseline %.1f MB/s (%d fsyncs); latency %+v",
				w.name, run, r.RecordsPerSec, r.MBPerSec, diskMB, chunk, every, limit.MBPerSec, limit.Fsyncs, r.Latency)
		}
		report("%s: median %.0f rec/s (%.1f MB/s of values; runs %s), disk writes %.1f MB/s vs raw sequential write with the same fsync cadence %.1f MB/s: ratio %.2f",
			w.name, median(rates), median(mbs), list(rates), median(disks), median(limits), median(ratios))
		if w.rf == 3 {
			rf3Max = median(rates)
		}
		f.deleteTopic(w.topic)
	}

	// Latency at half the RF=3 maximum, on a new topic.
	var p50s, p99s, e2e50s, e2e99s []float64
	rate := strconv.Itoa(int(rf3Max / 2))
	for run := 1; run <= runs; run++ {
		r := f.bench("e2e", "--topic", "fig-latency", "--partitions", "4", "--replication-factor", "3", "--config", "min.insync.replicas=2",
			"--acks", "all", "--rate", rate, "--duration", "8s")
		p50s, p99s = append(p50s, r.Produce.Latency.P50), append(p99s, r.Produce.Latency.P99)
		e2e50s, e2e99s = append(e2e50s, r.Latency.P50), append(e2e99s, r.Latency.P99)
		t.Logf("e2e run %d at %s rec/s: produce %+v, end to end %+v", run, rate, r.Produce.Latency, r.Latency)
	}
	f.deleteTopic("fig-latency")
	report("RF=3 acks=all at %s rec/s (half the maximum): produce p50 %.1f ms, p99 %.1f ms (runs %s); end-to-end p50 %.1f ms, p99 %.1f ms (runs %s)",
		rate, median(p50s), median(p99s), list(p99s), median(e2e50s), median(e2e99s), list(e2e99s))

	// Consume a 10-million-record backlog.
	const backlog = 10_000_000
	before := f.storageCounters()
	f.bench("produce", "--topic", "fig-backlog", "--partitions", "4", "--replication-factor", "1", "--acks", "leader", "--records", strconv.Itoa(backlog))
	stored := int64(f.storageCounters().produceBytes - before.produceBytes)
	var crates, cmbs, climits []float64
	for run := 1; run <= runs; run++ {
		r := f.bench("consume", "--topic", "fig-backlog", "--records", strconv.Itoa(backlog))
		limit := f.sendfile(stored)
		batchMB := r.RecordsPerSec * float64(stored) / backlog / 1e6
		crates, cmbs, climits = append(crates, r.RecordsPerSec), append(cmbs, batchMB), append(climits, limit.MBPerSec)
		t.Logf("consume run %d: %.0f rec/s, %.1f MB/s of batches; loopback sendfile of the same %d bytes %.1f MB/s", run, r.RecordsPerSec, batchMB, stored, limit.MBPerSec)
	}
	report("consume 10 M × 100 B: median %.0f rec/s (runs %s), %.1f MB/s of batches vs raw loopback sendfile %.1f MB/s: ratio %.2f",
		median(crates), list(crates), median(cmbs), median(climits), median(cmbs)/median(climits))
	t.Log("summary:\n" + strings.Join(out, "\n"))
}

// figures runs sluice-bench against one cluster.
type figures struct {
	t       *testing.T
	c       *localcluster.Cluster
	dataDir string // where the baselines write their scratch files
}

// figureResult is what the figures read of `sluice-bench --json`.
type figureResult struct {
	RecordsPerSec float64       `json:"records_per_sec"`
	MBPerSec      float64       `json:"mb_per_sec"`
	ElapsedSec    float64       `json:"elapsed_sec"`
	Failed        int64         `json:"failed"`
	Latency       *benchLatency `json:"latency_ms"`
	Produce       *struct {
		Latency *benchLatency `json:"latency_ms"`
	} `json:"produce"`
}

// limitResult is `sluice-bench disk|sendfile --json`.
type limitResult struct {
	MBPerSec float64 `json:"mb_per_sec"`
	Fsyncs   int64   `json:"fsyncs"`
}

func (f *figures) bench(args ...string) figureResult {
	f.t.Helper()
	var r figureResult
	f.run(&r, append(args, "--frontends", f.c.FrontendURL(), "--metadata", f.c.MetadataURL(), "--offsets", f.c.OffsetsURL())...)
	if r.Failed != 0 {
		f.t.Fatalf("sluice-bench %v: %d records failed", args, r.Failed)
	}
	return r
}

func (f *figures) disk(bytes, chunk, every int64) limitResult {
	f.t.Helper()
	var r limitResult
	f.run(&r, "disk", "--dir", f.dataDir, "--bytes", strconv.FormatInt(bytes, 10), "--chunk", strconv.FormatInt(chunk, 10),
		"--fsync-every", strconv.FormatInt(every, 10))
	return r
}

func (f *figures) sendfile(bytes int64) limitResult {
	f.t.Helper()
	var r limitResult
	f.run(&r, "sendfile", "--dir", f.dataDir, "--bytes", strconv.FormatInt(bytes, 10))
	return r
}

// deleteTopic deletes a workload's topic once it is measured, so that the
// page cache and the disk hold only what the next workload writes.
func (f *figures) deleteTopic(name string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.NewClient([]string{f.c.FrontendURL()}).DeleteTopic(ctx, name); err != nil {
		f.t.Fatalf("delete topic %s: %v", name, err)
	}
	// Storage nodes delete the files on their own time: wait for it, so the
	// deletion's I/O is not part of the next measurement.
	for i := 1; i <= 3; i++ {
		p := f.c.Proc(fmt.Sprintf("storage-%d", i))
		dir := ""
		for j, a := range p.Args {
			if a == "-data-dir" && j+1 < len(p.Args) {
				dir = p.Args[j+1]
			}
		}
		if dir == "" {
			f.t.Fatalf("%s runs without -data-dir", p.Name)
		}
		for {
			left, _ := filepath.Glob(filepath.Join(dir, name+"-*"))
			if len(left) == 0 {
				break
			}
			if ctx.Err() != nil {
				f.t.Fatalf("%s still holds %v after deleting topic %s", p.Name, left, name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// run runs the sluice-bench binary with --json and decodes its output. It
// syncs the file systems first, so that the write-back of what earlier runs
// left in the page cache does not slow this one down.
func (f *figures) run(into any, args ...string) {
	f.t.Helper()
	syscall.Sync()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args = append(args, "--json")
	if args[0] != "disk" && args[0] != "sendfile" {
		args = append(args, "--progress", "off")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(buildBinaries(f.t), "sluice-bench"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("sluice-bench %v: %v: %s", args, err, stderr.String())
	}
	if err := json.Unmarshal(out, into); err != nil {
		f.t.Fatalf("sluice-bench %v: %q: %v", args, out, err)
	}
}

// storageCounters sums the storage nodes' counters the disk baseline copies.
type storageCounters struct {
	produceBytes, produceRequests, fsyncs float64
}

func (f *figures) storageCounters() storageCounters {
	f.t.Helper()
	var s storageCounters
	for i := 1; i <= 3; i++ {
		for name, v := range metricSeries(f.t, f.c.Proc(fmt.Sprintf("storage-%d", i)).AdminAddr) {
			switch base, _, _ := strings.Cut(name, "{"); {
			case base == "sluice_storage_produce_bytes_total": // summed over topics
				s.produceBytes += v
			case name == `sluice_storage_requests_total{api="Produce"}`:
				s.produceRequests += v
			case name == "sluice_storage_fsyncs_total":
				s.fsyncs += v
			}
		}
	}
	return s
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		if x >= 1000 {
			parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
		} else {
			parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
		}
	}
	return strings.Join(parts, " / ")
}
