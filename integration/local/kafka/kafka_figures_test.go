package kafka

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestKafkaFigures measures the Kafka path next to the SDK path on one
// cluster, the figures of docs/performance.md's summary (the full tables
// are in docs/dev/performance-log.md); it runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -timeout 30m -run TestKafkaFigures -v ./local/kafka/
//
// A local cluster (3 metadata voters, 3 storage nodes, 3 offsets replicas,
// one frontend, defaults) and the benchmark share this machine. Each
// workload runs SLUICE_FIGURES_RUNS times (default 3) per protocol, the two
// protocols alternating (sluice-bench --protocol sluice, the SDK, and
// --protocol kafka, franz-go through the Kafka listeners):
//   - produce, RF=1, acks=leader, 100-byte records, 4 partitions, 8 s;
//   - produce, RF=3, acks=all, flush.policy=fsync, min.insync.replicas=2;
//   - consume a 5-million-record backlog (RF=1, 4 partitions);
//   - kcat's own consume of 1 million records (kcat -C -e -o beginning -q)
//     next to the SDK's of the same (sluice-bench consume, group join
//     included, as kcat's time includes its start), with the CPU kcat
//     itself used.
//
// Each run reports records/s and CPU-seconds per million records summed
// over the cluster's processes (/proc/<pid>/stat before and after; the
// benchmark's own process is not counted).
func TestKafkaFigures(t *testing.T) {
	itest.FiguresOnly(t, "the Kafka figures")
	runs := 3
	if n, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_RUNS")); err == nil && n > 0 {
		runs = n
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	f := &itest.Figures{T: t, C: c, DataDir: t.TempDir()}
	var out []string
	report := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		t.Log("FIGURE " + line)
		out = append(out, line)
	}
	cpu := func() float64 {
		var s float64
		for _, p := range c.Procs {
			if pid := p.Pid(); pid > 0 {
				s += itest.CPUSeconds(t, pid)
			}
		}
		return s
	}
	// bench runs sluice-bench with a protocol and returns the result and the
	// cluster's CPU-seconds per million records.
	bench := func(protocol string, args ...string) (itest.FigureResult, float64) {
		before := cpu()
		r := f.Bench(append(args, "--protocol", protocol, "--bootstrap", c.KafkaAddrs()[0])...)
		used := cpu() - before
		records := r.RecordsPerSec * r.ElapsedSec
		return r, used / records * 1e6
	}
	protocols := []string{"sluice", "kafka"}

	for _, w := range []struct {
		name, topic string
		args        []string
	}{
		{"produce RF=1 acks=leader 100 B", "kfig-rf1", []string{"--partitions", "4", "--replication-factor", "1", "--acks", "leader"}},
		{"produce RF=3 acks=all fsync 100 B", "kfig-rf3", []string{"--partitions", "4", "--replication-factor", "3", "--config", "min.insync.replicas=2", "--acks", "all"}},
	} {
		rates, cpus := map[string][]float64{}, map[string][]float64{}
		for run := 1; run <= runs; run++ {
			for _, p := range protocols {
				topic := w.topic + "-" + p
				r, cpm := bench(p, append([]string{"produce", "--topic", topic, "--duration", "8s", "--warmup", "0s"}, w.args...)...)
				rates[p], cpus[p] = append(rates[p], r.RecordsPerSec), append(cpus[p], cpm)
				t.Logf("%s %s run %d: %.0f rec/s, %.2f cluster CPU-s per million records, latency %+v", w.name, p, run, r.RecordsPerSec, cpm, r.Latency)
				f.DeleteTopic(topic)
			}
		}
		report("%s: SDK median %.0f rec/s (runs %s), %.2f CPU-s/M; Kafka (franz-go) median %.0f rec/s (runs %s), %.2f CPU-s/M; Kafka/SDK %.2f",
			w.name, itest.Median(rates["sluice"]), itest.FormatRuns(rates["sluice"]), itest.Median(cpus["sluice"]),
			itest.Median(rates["kafka"]), itest.FormatRuns(rates["kafka"]), itest.Median(cpus["kafka"]), itest.Median(rates["kafka"])/itest.Median(rates["sluice"]))
	}

	// Consume a backlog with each protocol.
	const backlog = 5_000_000
	f.Bench("produce", "--topic", "kfig-backlog", "--partitions", "4", "--replication-factor", "1", "--acks", "leader", "--records", strconv.Itoa(backlog))
	rates, cpus := map[string][]float64{}, map[string][]float64{}
	for run := 1; run <= runs; run++ {
		for _, p := range protocols {
			r, cpm := bench(p, "consume", "--topic", "kfig-backlog", "--records", strconv.Itoa(backlog))
			rates[p], cpus[p] = append(rates[p], r.RecordsPerSec), append(cpus[p], cpm)
			t.Logf("consume %s run %d: %.0f rec/s, %.2f cluster CPU-s per million records", p, run, r.RecordsPerSec, cpm)
		}
	}
	report("consume 5 M × 100 B backlog: SDK median %.0f rec/s (runs %s), %.2f CPU-s/M; Kafka (franz-go, fetching from the storage nodes by sendfile) median %.0f rec/s (runs %s), %.2f CPU-s/M; Kafka/SDK %.2f",
		itest.Median(rates["sluice"]), itest.FormatRuns(rates["sluice"]), itest.Median(cpus["sluice"]),
		itest.Median(rates["kafka"]), itest.FormatRuns(rates["kafka"]), itest.Median(cpus["kafka"]), itest.Median(rates["kafka"])/itest.Median(rates["sluice"]))
	f.DeleteTopic("kfig-backlog")

	// kcat's own consume of a million records, next to the SDK's.
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Log("kcat is not installed: its figure is left out")
		t.Log("summary:\n" + strings.Join(out, "\n"))
		return
	}
	const million = 1_000_000
	f.Bench("produce", "--topic", "kfig-kcat", "--partitions", "4", "--replication-factor", "1", "--acks", "leader", "--records", strconv.Itoa(million))
	var kcatRates, kcatCPU, sdkRates []float64
	for run := 1; run <= runs; run++ {
		start, before := time.Now(), cpu()
		cmd := exec.Command(kcat, "-b", c.KafkaAddrs()[0], "-C", "-t", "kfig-kcat", "-e", "-o", "beginning", "-q")
		// kcat writes to a file, as `> file` would have it (a pipe to this
		// process would pace it by the reader).
		outPath := filepath.Join(t.TempDir(), "kcat.out")
		outFile, err := os.Create(outPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = outFile
		err = cmd.Run()
		outFile.Close()
		if err != nil {
			t.Fatalf("kcat: %v", err)
		}
		secs := time.Since(start).Seconds()
		clusterCPU := cpu() - before
		own := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
		kcatCPU = append(kcatCPU, own/secs)
		if n := countLines(t, outPath); n != million {
			t.Fatalf("kcat read %d records, want %d", n, million)
		}
		os.Remove(outPath)
		kcatRates = append(kcatRates, million/secs)
		var r struct {
			Consume struct {
				RecordsPerSecWithJoin float64 `json:"records_per_sec_with_join"`
			} `json:"consume"`
		}
		f.RunJSON(&r, "consume", "--topic", "kfig-kcat", "--records", strconv.Itoa(million), "--frontends", c.FrontendURL(),
			"--metadata", c.MetadataURL(), "--offsets", c.OffsetsURL())
		sdkRates = append(sdkRates, r.Consume.RecordsPerSecWithJoin)
		t.Logf("kcat run %d: %.0f rec/s (%.2f s; kcat's own CPU %.2f s, the cluster's %.2f s); SDK %.0f rec/s with its group join",
			run, million/secs, secs, own, clusterCPU, r.Consume.RecordsPerSecWithJoin)
	}
	report("consume 1 M × 100 B: kcat -C -e -o beginning -q median %.0f rec/s (runs %s), kcat busy %.0f%% of a core; SDK (sluice-bench consume, group join included) median %.0f rec/s (runs %s)",
		itest.Median(kcatRates), itest.FormatRuns(kcatRates), 100*itest.Median(kcatCPU), itest.Median(sdkRates), itest.FormatRuns(sdkRates))
	f.DeleteTopic("kfig-kcat")
	t.Log("summary:\n" + strings.Join(out, "\n"))
}

// countLines counts the lines of a file.
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte{'\n'})
}
