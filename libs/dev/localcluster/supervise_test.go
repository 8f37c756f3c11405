package localcluster

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// syncBuffer is a bytes.Buffer safe for the supervisor's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// shellCluster is a cluster of one process running script under /bin/sh.
func shellCluster(t *testing.T, script string) (*Cluster, *Proc) {
	t.Helper()
	dir := t.TempDir()
	p := &Proc{Name: "worker", Bin: "/bin/sh", Args: []string{"-c", script}, LogPath: filepath.Join(dir, "worker.log")}
	c := &Cluster{cfg: Config{DataDir: dir}, Procs: []*Proc{p}}
	t.Cleanup(c.Stop)
	return c, p
}

// TestSupervisorRestartsAProcessKilledFromOutside: a kill -9 from outside is
// reported with the exit status and the log's last lines, and the process is
// started again while the supervisor runs.
func TestSupervisorRestartsAProcessKilledFromOutside(t *testing.T) {
	c, p := shellCluster(t, "echo ready to work; exec sleep 600")
	out := &syncBuffer{}
	sup := c.Supervise(out)
	defer sup.Close()
	if err := c.launch(p); err != nil {
		t.Fatal(err)
	}
	first := p.Pid()
	testkit.WaitFor(t, 20*time.Second, "the log line", func() bool { b, _ := os.ReadFile(p.LogPath); return strings.Contains(string(b), "ready to work") })
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "a restart", func() bool { pid := p.Pid(); return pid != 0 && pid != first })
	report := out.String()
	for _, want := range []string{"worker exited on its own", "signal: killed", "ready to work", "restarting worker in 1s"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	st := sup.Status()[0]
	if st.State != StateRunning || st.Restarts != 1 || st.LastExit != "signal: killed" {
		t.Fatalf("status after the restart: %+v", st)
	}
}

// TestSupervisorKeepsStoppedProcessesDown: Kill and Stop hold a process down
// (no restart) until Start; an exit status other than a signal is reported
// as such. Kill and Stop return once the exit was handled: a report of it,
// and the restart a report announces, would be written by then.
func TestSupervisorKeepsStoppedProcessesDown(t *testing.T) {
	c, p := shellCluster(t, "exec sleep 600")
	out := &syncBuffer{}
	sup := c.Supervise(out)
	defer sup.Close()
	if err := c.launch(p); err != nil {
		t.Fatal(err)
	}
	heldDown := func(after string) {
		t.Helper()
		if p.Running() || sup.Status()[0].State != StateStopped {
			t.Fatalf("running or restarting after %s: %+v", after, sup.Status()[0])
		}
		if report := out.String(); strings.Contains(report, "exited on its own") || strings.Contains(report, "restarting") {
			t.Fatalf("%s was reported as a crash:\n%s", after, report)
		}
	}
	sup.Kill(p)
	heldDown("a Kill through the supervisor")
	// Start waits for /readyz, which a shell does not serve: a test server
	// answers it.
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer ready.Close()
	p.AdminAddr = strings.TrimPrefix(ready.URL, "http://")
	if err := sup.Start(context.Background(), p); err != nil || !p.Running() {
		t.Fatalf("Start: %v (running %v)", err, p.Running())
	}
	if err := sup.Start(context.Background(), p); err == nil {
		t.Fatal("a second Start of a running process succeeded")
	}
	sup.Stop(p)
	heldDown("a Stop through the supervisor")
}

// TestSupervisorReportsExitStatus: a process that exits with a status is
// reported with it, restarted, and its quick exits back off.
func TestSupervisorReportsExitStatus(t *testing.T) {
	c, p := shellCluster(t, "echo giving up >&2; exit 3")
	out := &syncBuffer{}
	sup := c.Supervise(out)
	if err := c.launch(p); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "two exits", func() bool { return strings.Count(out.String(), "exited on its own") >= 2 })
	sup.Close()
	report := out.String()
	for _, want := range []string{"exit status 3", "giving up", "restarting worker in 1s", "restarting worker in 2s"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 40: 30 * time.Second} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 5000 {
		b.WriteString(strings.Repeat("x", i%7) + "line\n")
	}
	b.WriteString("the end\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(lastLines(path, 3), "\n")
	if len(got) != 3 || got[2] != "the end" || got[1] != strings.Repeat("x", 4999%7)+"line" {
		t.Fatalf("lastLines = %q", got)
	}
	if lastLines(filepath.Join(t.TempDir(), "missing"), 3) != "" {
		t.Fatal("a missing log gave lines")
	}
}
