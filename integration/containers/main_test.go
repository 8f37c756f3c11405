package containers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Labels every container and network of this suite carries: labelRun holds
// the run id, labelPid the test process's pid (a leftover is one whose
// process is gone).
const (
	labelRun = "sluice.test"
	labelPid = "sluice.test.pid"
)

var (
	runID  string
	docker *testcontainers.DockerClient
)

// TestMain skips the suite when no Docker engine answers (failing instead
// under CI=true), builds the sluice/<service>:dev images once with `make
// images`, and removes containers and networks left by earlier runs.
func TestMain(m *testing.M) {
	// Must be set before any testcontainers call: no registry, so no Ryuk.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	// The engine is local (ports are published on the host), but
	// testcontainers may take the process for one inside a container and
	// answer the default gateway as the containers' host: pin it.
	if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" {
		os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	}
	runID = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	cli, err := pingDocker(ctx)
	cancel()
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Printf("containers suite failed: no Docker engine under CI=true (%v)\n", err)
			os.Exit(1)
		}
		fmt.Printf("containers suite skipped: no Docker engine (%v)\n", err)
		os.Exit(0)
	}
	docker = cli

	if err := buildImages(); err != nil {
		fmt.Printf("containers suite: building images: %v\n", err)
		os.Exit(1)
	}
	removeLeftovers()
	code := m.Run()
	_ = docker.Close()
	os.Exit(code)
}

// pingDocker pings the engine the environment names (DOCKER_HOST, as the
// docker CLI that `make images` runs does), then connects testcontainers'
// client. testcontainers alone would fall back to the default socket when
// DOCKER_HOST does not answer.
func pingDocker(ctx context.Context) (*testcontainers.DockerClient, error) {
	type result struct {
		cli *testcontainers.DockerClient
		err error
	}
	ch := make(chan result, 1)
	go func() {
		env, err := client.New(client.FromEnv)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		_, err = env.Ping(ctx, client.PingOptions{})
		_ = env.Close()
		if err != nil {
			ch <- result{nil, err}
			return
		}
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err == nil {
			if _, err = cli.Ping(ctx, client.PingOptions{}); err != nil {
				_ = cli.Close()
			}
		}
		ch <- result{cli, err}
	}()
	select {
	case r := <-ch:
		return r.cli, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("ping: %w", ctx.Err())
	}
}

// buildImages runs `make images` from the repository root.
func buildImages() error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	cmd := exec.Command("make", "images")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("make images: %v\n%s", err, out)
	}
	return nil
}

// removeLeftovers removes containers and networks of earlier runs whose test
// process no longer exists (runs going on concurrently are left alone).
func removeLeftovers() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", labelRun)
	cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err == nil {
		for _, c := range cs.Items {
			if leftover(c.Labels) {
				_, _ = docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}
	ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err == nil {
		for _, n := range ns.Items {
			if leftover(n.Labels) {
				_, _ = docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
}

func leftover(labels map[string]string) bool {
	pid, err := strconv.Atoi(labels[labelPid])
	if err != nil || pid <= 0 {
		return true
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// removeRun removes every container and network of this run (what t.Cleanup
// missed, for instance after a failed start).
func removeRun() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", labelRun+"="+runID)
	if cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			_, _ = docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	if ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			_, _ = docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	}
}
