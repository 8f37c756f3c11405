package itest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// CleanerPasses sums the cleaning passes of every storage node.
func CleanerPasses(t *testing.T, c *localcluster.Cluster) float64 {
	t.Helper()
	total := 0.0
	for _, p := range c.Procs {
		if strings.HasPrefix(p.Name, "storage-") && p.Running() {
			total += ScrapeMetrics(t, p)["sluice_storage_cleaner_passes_total"]
		}
	}
	return total
}

// ScrapeMetrics reads a process's unlabelled metrics from its admin /metrics.
func ScrapeMetrics(t *testing.T, p *localcluster.Proc) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for name, v := range MetricSeries(t, p.AdminAddr) {
		if !strings.Contains(name, "{") {
			out[name] = v
		}
	}
	return out
}

// MetricSeries reads every series of an admin listener's /metrics: the
// series as written (name and labels) to its value.
func MetricSeries(t *testing.T, adminAddr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// CPUSeconds is a process's user+system CPU time from /proc.
func CPUSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks (USER_HZ = 100)
}
