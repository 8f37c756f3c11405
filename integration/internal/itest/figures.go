package itest

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

// Figures runs sluice-bench against one cluster.
type Figures struct {
	T       *testing.T
	C       *localcluster.Cluster
	DataDir string // where the baselines write their scratch files
}

// FigureResult is what the figures read of `sluice-bench --json`.
type FigureResult struct {
	RecordsPerSec float64       `json:"records_per_sec"`
	MBPerSec      float64       `json:"mb_per_sec"`
	ElapsedSec    float64       `json:"elapsed_sec"`
	Failed        int64         `json:"failed"`
	Latency       *BenchLatency `json:"latency_ms"`
	Produce       *struct {
		Latency *BenchLatency `json:"latency_ms"`
	} `json:"produce"`
}

// LimitResult is `sluice-bench disk|sendfile --json`.
type LimitResult struct {
	MBPerSec float64 `json:"mb_per_sec"`
	Fsyncs   int64   `json:"fsyncs"`
}

// Bench runs a sluice-bench workload (args) against the cluster and fails
// the test if a record failed.
func (f *Figures) Bench(args ...string) FigureResult {
	f.T.Helper()
	var r FigureResult
	f.RunJSON(&r, append(args, "--frontends", f.C.FrontendURL(), "--metadata", f.C.MetadataURL(), "--offsets", f.C.OffsetsURL())...)
	if r.Failed != 0 {
		f.T.Fatalf("sluice-bench %v: %d records failed", args, r.Failed)
	}
	return r
}

// Disk measures the disk baseline: bytes written in writes of chunk bytes
// under DataDir, fsynced every every bytes.
func (f *Figures) Disk(bytes, chunk, every int64) LimitResult {
	f.T.Helper()
	var r LimitResult
	f.RunJSON(&r, "disk", "--dir", f.DataDir, "--bytes", strconv.FormatInt(bytes, 10), "--chunk", strconv.FormatInt(chunk, 10),
		"--fsync-every", strconv.FormatInt(every, 10))
	return r
}

// Sendfile measures the loopback sendfile baseline for bytes.
func (f *Figures) Sendfile(bytes int64) LimitResult {
	f.T.Helper()
	var r LimitResult
	f.RunJSON(&r, "sendfile", "--dir", f.DataDir, "--bytes", strconv.FormatInt(bytes, 10))
	return r
}

// DeleteTopic deletes a workload's topic once it is measured, so that the
// page cache and the disk hold only what the next workload writes.
func (f *Figures) DeleteTopic(name string) {
	f.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.NewClient([]string{f.C.FrontendURL()}).DeleteTopic(ctx, name); err != nil {
		f.T.Fatalf("delete topic %s: %v", name, err)
	}
	// Storage nodes delete the files on their own time: wait for it, so the
	// deletion's I/O is not part of the next measurement.
	for i := 1; i <= 3; i++ {
		p := f.C.Proc(fmt.Sprintf("storage-%d", i))
		dir := ""
		for j, a := range p.Args {
			if a == "-data-dir" && j+1 < len(p.Args) {
				dir = p.Args[j+1]
			}
		}
		if dir == "" {
			f.T.Fatalf("%s runs without -data-dir", p.Name)
		}
		for {
			left, _ := filepath.Glob(filepath.Join(dir, name+"-*"))
			if len(left) == 0 {
				break
			}
			if ctx.Err() != nil {
				f.T.Fatalf("%s still holds %v after deleting topic %s", p.Name, left, name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// RunJSON runs the sluice-bench binary with --json and decodes its output. It
// syncs the file systems first, so that the write-back of what earlier runs
// left in the page cache does not slow this one down.
func (f *Figures) RunJSON(into any, args ...string) {
	f.T.Helper()
	syscall.Sync()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args = append(args, "--json")
	if args[0] != "disk" && args[0] != "sendfile" {
		args = append(args, "--progress", "off")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(BuildBinaries(f.T), "sluice-bench"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.T.Fatalf("sluice-bench %v: %v: %s", args, err, stderr.String())
	}
	if err := json.Unmarshal(out, into); err != nil {
		f.T.Fatalf("sluice-bench %v: %q: %v", args, out, err)
	}
}

// StorageCounters sums the storage nodes' counters the disk baseline copies.
type StorageCounters struct {
	ProduceBytes, ProduceRequests, Fsyncs float64
}

// StorageCounters reads the counters of the cluster's three storage nodes.
func (f *Figures) StorageCounters() StorageCounters {
	f.T.Helper()
	var s StorageCounters
	for i := 1; i <= 3; i++ {
		for name, v := range MetricSeries(f.T, f.C.Proc(fmt.Sprintf("storage-%d", i)).AdminAddr) {
			switch base, _, _ := strings.Cut(name, "{"); {
			case base == "sluice_storage_produce_bytes_total": // summed over topics
				s.ProduceBytes += v
			case name == `sluice_storage_requests_total{api="Produce"}`:
				s.ProduceRequests += v
			case name == "sluice_storage_fsyncs_total":
				s.Fsyncs += v
			}
		}
	}
	return s
}

// Median is the middle of xs (the upper one of an even count).
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// FormatRuns lists each run's figure for a report, "a / b / c".
func FormatRuns(xs []float64) string {
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

// BenchLatency is a latency summary of `sluice-bench --json`, in
// milliseconds.
type BenchLatency struct {
	Count                    int64
	P50, P95, P99, P999, Max float64
}

// FiguresOnly skips a test that measures figures (what: which ones) unless
// SLUICE_FIGURES=1 asks for them.
func FiguresOnly(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("SLUICE_FIGURES") != "1" {
		t.Skip("set SLUICE_FIGURES=1 to measure " + what)
	}
}
