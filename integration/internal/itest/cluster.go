package itest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// BuildBinaries builds the service binaries once per test process, and
// versitygw beside them (BuildObjectStore: sluice-dev and a cluster with
// an object store run it).
func BuildBinaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := binariesDir()
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		root, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+"/",
			"github.com/sluicemq/sluice/services/metadata/cmd/sluice-metadata",
			"github.com/sluicemq/sluice/services/storage/cmd/sluice-storage",
			"github.com/sluicemq/sluice/services/frontend/cmd/sluice-frontend",
			"github.com/sluicemq/sluice/services/offsets/cmd/sluice-offsets",
			"github.com/sluicemq/sluice/tools/cmd/sluicectl",
			"github.com/sluicemq/sluice/tools/cmd/sluice-dev",
			"github.com/sluicemq/sluice/tools/cmd/sluice-bench",
			"github.com/sluicemq/sluice/integration/cmd/sluice-testmember",
			"github.com/sluicemq/sluice/integration/cmd/sluice-kafkamember",
			"github.com/sluicemq/sluice/integration/cmd/sluice-sharemember")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("go build: %s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building binaries: %v", buildErr)
	}
	BuildObjectStore(t)
	return binDir
}

// repoRoot is the checkout's root, the folder of go.work: the go command
// looks for it from the test's working directory (its package's folder)
// up, whatever the package's depth.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		return "", errors.New("no go.work in effect (go env GOWORK): run the tests inside the checkout, without GOWORK=off")
	}
	return filepath.Dir(work), nil
}

// StartCluster starts a cluster on free ports; it is stopped when the test ends,
// and its logs are printed when the test fails.
func StartCluster(t *testing.T, storage int, extra ...string) *localcluster.Cluster {
	t.Helper()
	return startClusterWith(t, storage, false, extra...)
}

// StartNetnsCluster starts a cluster whose storage nodes run in their own
// network namespaces, so links between them can be cut. It needs root and
// iproute2: without them the test is skipped, except under CI=true where that
// is a failure.
func StartNetnsCluster(t *testing.T, storage int, extra ...string) *localcluster.Cluster {
	t.Helper()
	if err := localcluster.NetnsAvailable(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("network namespaces unavailable under CI: %v", err)
		}
		t.Skipf("network namespaces unavailable: %v", err)
	}
	return startClusterWith(t, storage, true, extra...)
}

func startClusterWith(t *testing.T, storage int, netns bool, extra ...string) *localcluster.Cluster {
	t.Helper()
	return StartClusterConfig(t, localcluster.Config{Storage: storage, Netns: netns, Extra: map[string][]string{"storage": extra}})
}

// StartClusterConfig starts a cluster described by cfg (BinDir, DataDir and
// Ports are filled in).
func StartClusterConfig(t *testing.T, cfg localcluster.Config) *localcluster.Cluster {
	t.Helper()
	c, err := launch(t, cfg, t.TempDir)
	if c != nil {
		t.Cleanup(func() {
			c.Close()
			if t.Failed() {
				printLogs(t, c)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// launch starts a cluster described by cfg (BinDir, DataDir and Ports are
// filled in, the data directory from dir) and returns it, started or not:
// the caller closes it.
func launch(t *testing.T, cfg localcluster.Config, dir func() string) (*localcluster.Cluster, error) {
	t.Helper()
	cfg.BinDir = BuildBinaries(t)
	if cfg.Storage == 0 {
		cfg.Storage = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for attempt := 1; ; attempt++ {
		ports, err := localcluster.FreePorts(cfg.Storage)
		if err != nil {
			return nil, err
		}
		cfg.Ports, cfg.DataDir = ports, dir()
		c, err := localcluster.New(cfg)
		if err != nil {
			return nil, err
		}
		err = c.Start(ctx)
		if err != nil && attempt < 3 && logsMention(c, "address already in use") {
			// Another process (the containers suite publishing ports, say)
			// took a port between FreePorts and the bind: start again on
			// other ports.
			t.Logf("a port was taken meanwhile (%v); starting again on other ports", err)
			c.Close()
			continue
		}
		return c, err
	}
}

// printLogs logs the tail of every process's log (and writes the whole
// logs to $SLUICE_DEBUG_LOGS when it names a folder).
func printLogs(t testing.TB, c *localcluster.Cluster) {
	for _, p := range c.Procs {
		b, _ := os.ReadFile(p.LogPath)
		if d := os.Getenv("SLUICE_DEBUG_LOGS"); d != "" {
			_ = os.WriteFile(filepath.Join(d, p.Name+".log"), b, 0o644)
		}
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		t.Logf("---- %s log (tail) ----\n%s", p.Name, b)
	}
}

// shared is the cluster the tests of a package share (SharedCluster).
var shared struct {
	mu  sync.Mutex
	c   *localcluster.Cluster
	dir string
	err error
}

// SharedCluster is a cluster of 3 storage nodes that the tests of a
// package share: the first test that asks starts it, Main stops it when
// the package's tests end. A test using it leaves it as it found it for
// the others, which run beside it: no process stopped, paused or cut off,
// no cluster-wide setting changed, and topics, groups and principals of
// names its own. A test that fails prints the cluster's logs.
func SharedCluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "sluice-shared-")
		if shared.err == nil {
			shared.c, shared.err = launch(t, localcluster.Config{}, func() string {
				d, err := os.MkdirTemp(shared.dir, "data-")
				if err != nil {
					t.Fatal(err)
				}
				return d
			})
		}
	}
	if shared.err != nil {
		t.Fatalf("the shared cluster did not start: %v", shared.err)
	}
	c := shared.c
	t.Cleanup(func() {
		if t.Failed() {
			printLogs(t, c)
		}
	})
	return c
}

// Main runs a package's tests (TestMain calls it) and stops the cluster
// they shared, if one was started.
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.c != nil {
		shared.c.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// logsMention reports whether a log of c's processes holds text.
func logsMention(c *localcluster.Cluster, text string) bool {
	for _, p := range c.Procs {
		if b, _ := os.ReadFile(p.LogPath); strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}
