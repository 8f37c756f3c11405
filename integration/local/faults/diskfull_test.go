package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestFullDiskRefusesProduceAndRecovers runs a storage node on a 16 MiB
// tmpfs. With a 4 MiB reserve (-min-free-bytes) produce is refused with
// KAFKA_STORAGE_ERROR "disk full" once the reserve would be touched; with no
// reserve the file system itself refuses a write, which is cut back. Each
// time, freeing space lets produce go on without a restart, and the log
// holds exactly the acknowledged records, in order.
func TestFullDiskRefusesProduceAndRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("mounting a tmpfs needs root, which CI has")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1, Extra: map[string][]string{"frontend": {"-produce-timeout", "2s"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := c.Proc("storage-1")
	dir := p.Args[slices.Index(p.Args, "-data-dir")+1]
	c.StopProc(p, false)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	t.Cleanup(func() {
		c.StopProc(p, true)
		_ = exec.Command("umount", "-l", dir).Run()
	})
	filler := filepath.Join(dir, "filler")
	writeFiller(t, filler, 6<<20)
	p.Args = append(p.Args, "-min-free-bytes", fmt.Sprint(4<<20))
	if err := c.StartProc(ctx, p); err != nil {
		t.Fatal(err)
	}
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: "full", Partitions: 1, ReplicationFactor: 1, Config: map[string]string{"segment.bytes": fmt.Sprint(1 << 20)}})

	var acked []string
	// With the reserve: refused before anything is written.
	acked = fillUntilRefused(t, c, acked, "reserve")
	if got := itest.MetricSeries(t, p.AdminAddr)["sluice_storage_disk_full_refusals_total"]; got < 1 {
		t.Fatalf("refusals counted: %v", got)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	acked = produceBlock(t, c, acked, "after freeing space", true)

	// Without a reserve: the file system refuses the write itself.
	c.StopProc(p, false)
	p.Args = append(p.Args[:len(p.Args)-2], "-min-free-bytes", "0")
	if err := c.StartProc(ctx, p); err != nil {
		t.Fatal(err)
	}
	itest.WaitLeaders(t, ctx, c, "full", 1)
	writeFiller(t, filler, -1) // everything that is left
	acked = fillUntilRefused(t, c, acked, "ENOSPC")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	acked = produceBlock(t, c, acked, "after freeing space again", true)

	stored := itest.ReadValues(t, ctx, c, "full", 1)[0]
	if !slices.Equal(stored, acked) {
		t.Fatalf("the log holds %d records, %d were acknowledged (first difference at %d)", len(stored), len(acked), firstDiff(stored, acked))
	}
	t.Logf("%d acknowledged records stored once, in order, across two full disks", len(acked))
}

// writeFiller writes n bytes to path (n < 0: until the file system is full).
func writeFiller(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for written := int64(0); n < 0 || written < n; written += int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			if n < 0 && errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// fillUntilRefused produces blocks until one is refused with disk full, and
// returns the acknowledged values so far.
func fillUntilRefused(t *testing.T, c *localcluster.Cluster, acked []string, what string) []string {
	t.Helper()
	for i := 0; i < 400; i++ {
		before := len(acked)
		acked = produceBlock(t, c, acked, what, false)
		if len(acked) == before {
			return acked
		}
	}
	t.Fatalf("%s: produce never refused", what)
	return nil
}

// produceBlock sends 50 records of 1 KiB; it returns acked with the
// acknowledged ones added. A refused block must fail whole, saying the disk
// is full (unless mustPass).
func produceBlock(t *testing.T, c *localcluster.Cluster, acked []string, what string, mustPass bool) []string {
	t.Helper()
	var recs []map[string]string
	pad := strings.Repeat("x", 1000)
	for i := 0; i < 50; i++ {
		recs = append(recs, map[string]string{"value": fmt.Sprintf("%s-%d-%d-%s", what, len(acked), i, pad)})
	}
	body, _ := json.Marshal(map[string]any{"records": recs})
	resp, err := http.Post(c.FrontendURL()+"/v1/topics/full/records?acks=all", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var r itest.ProduceReply
	_ = json.Unmarshal(data, &r)
	if len(r.Offsets) != len(recs) {
		t.Fatalf("%s: HTTP %d %s", what, resp.StatusCode, data)
	}
	failed := 0
	for i, o := range r.Offsets {
		if o.ErrorCode == 0 {
			acked = append(acked, recs[i]["value"])
			continue
		}
		failed++
		// KAFKA_STORAGE_ERROR is retriable: the frontend resends until its
		// -produce-timeout and then answers REQUEST_TIMED_OUT quoting the
		// leader's last answer.
		if (o.ErrorCode != 56 && o.ErrorCode != 7) || !strings.Contains(o.Error, "disk full") {
			t.Fatalf("%s: record refused with %d %q; want the disk full answer", what, o.ErrorCode, o.Error)
		}
	}
	if failed > 0 && (mustPass || failed != len(recs)) {
		t.Fatalf("%s: %d of %d records failed: %s", what, failed, len(recs), data)
	}
	return acked
}

// firstDiff is the first index where a and b differ (the shorter one's
// length when one is a prefix of the other).
func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
