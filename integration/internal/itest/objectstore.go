package itest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// binaries is the temporary folder the binaries of a test process are
// built into (BuildBinaries, BuildObjectStore).
var binaries struct {
	once sync.Once
	dir  string
	err  error
}

// binariesDir returns the folder the test process builds its binaries
// into, creating it on the first call.
func binariesDir() (string, error) {
	binaries.once.Do(func() { binaries.dir, binaries.err = os.MkdirTemp("", "sluice-e2e-bin-") })
	return binaries.dir, binaries.err
}

var objectStoreBuild struct {
	once sync.Once
	path string
	err  error
}

// BuildObjectStore builds versitygw, the object store of tiered storage,
// once per test process into the folder of BuildBinaries, and returns its
// path. It is built as make build builds it: in tools/objectstore, whose
// module is outside go.work (GOWORK=off), without cgo; the Go build cache
// keeps it between runs (the first build takes a minute or two).
func BuildObjectStore(t *testing.T) string {
	t.Helper()
	objectStoreBuild.once.Do(func() {
		dir, err := binariesDir()
		if err != nil {
			objectStoreBuild.err = err
			return
		}
		root, err := repoRoot()
		if err != nil {
			objectStoreBuild.err = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/versity/versitygw/cmd/versitygw")
		cmd.Dir = filepath.Join(root, "tools", "objectstore")
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			objectStoreBuild.err = fmt.Errorf("%w: %s", err, out)
			return
		}
		objectStoreBuild.path = filepath.Join(dir, "versitygw")
	})
	if objectStoreBuild.err != nil {
		t.Fatalf("building versitygw in tools/objectstore: %v", objectStoreBuild.err)
	}
	return objectStoreBuild.path
}

// StartObjectStore starts an object store alone, as a local cluster runs
// it (localcluster.ObjectStoreArgs: credentials
// localcluster.ObjectStoreAccessKey and ObjectStoreSecretKey, no bucket
// yet), on a free port with its files in a temporary folder, and returns
// its endpoint once it answers. It is stopped when the test ends; its log is printed
// when the test fails.
func StartObjectStore(t *testing.T) string {
	t.Helper()
	bin := BuildObjectStore(t)
	ports, err := localcluster.FreePorts(0)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", ports.ObjectStore)
	args, err := localcluster.ObjectStoreArgs(addr, filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "versitygw.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("---- versitygw log ----\n%s", b)
		}
	})
	url := "http://" + addr
	testkit.Eventually(t, 30*time.Second, func() error {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logPath)
			t.Fatalf("versitygw exited during start-up (%v): %s", err, b)
		default:
		}
		// Any answer, an S3 error included, means it serves.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("versitygw on %s: %w", addr, err)
		}
		resp.Body.Close()
		return nil
	})
	return url
}
