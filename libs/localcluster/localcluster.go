// Package localcluster starts a Sluice cluster as processes on 127.0.0.1: one
// metadata voter, N storage nodes, a frontend and an offsets service, each with
// its own data directory and log file. `make run` (through sluice-dev) and the
// end-to-end tests use it.
//
// Start brings the processes up in dependency order and waits for each one's
// /readyz; Stop sends SIGTERM in reverse order and waits, killing whatever has
// not exited after a grace period. Single processes can be stopped and started
// again to test restarts.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Ports are the listen ports of a local cluster.
type Ports struct {
	MetadataHTTP, MetadataRaft, MetadataAdmin int
	FrontendHTTP, FrontendAdmin               int
	OffsetsHTTP, OffsetsAdmin                 int
	// StorageBase is node 1's protocol port; node i uses StorageBase+i-1 and
	// its admin listener StorageAdminBase+i-1.
	StorageBase, StorageAdminBase int
}

// DefaultPorts are the fixed ports of `make run`.
func DefaultPorts() Ports {
	return Ports{MetadataHTTP: 7070, MetadataRaft: 7071, MetadataAdmin: 7072, FrontendHTTP: 8080, FrontendAdmin: 8081,
		OffsetsHTTP: 7080, OffsetsAdmin: 7081, StorageBase: 9101, StorageAdminBase: 9111}
}

// FreePorts picks unused ports for a cluster with the given storage nodes.
func FreePorts(storage int) (Ports, error) {
	n := 7 + 2*storage
	ps := make([]int, 0, n)
	for len(ps) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return Ports{}, err
		}
		defer ln.Close()
		ps = append(ps, ln.Addr().(*net.TCPAddr).Port)
	}
	p := Ports{MetadataHTTP: ps[0], MetadataRaft: ps[1], MetadataAdmin: ps[2], FrontendHTTP: ps[3], FrontendAdmin: ps[4], OffsetsHTTP: ps[5], OffsetsAdmin: ps[6]}
	// Storage ports must be consecutive; find a free run.
	for base := 20000 + (os.Getpid()%200)*100; base < 60000; base += 97 {
		if runFree(base, storage) && runFree(base+storage, storage) {
			p.StorageBase, p.StorageAdminBase = base, base+storage
			return p, nil
		}
	}
	return Ports{}, errors.New("localcluster: no free run of ports for storage nodes")
}

func runFree(base, n int) bool {
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

// Config describes a local cluster.
type Config struct {
	BinDir  string // holds sluice-metadata, sluice-storage, sluice-frontend, sluice-offsets
	DataDir string // data and logs go under it
	Storage int    // storage nodes (default 3)
	Ports   Ports
	// Extra flags per process name ("metadata", "storage-1", "frontend", "offsets").
	Extra map[string][]string
	// Log, when set, receives progress lines.
	Log io.Writer
}

// Proc is one process of the cluster.
type Proc struct {
	Name      string
	Bin       string
	Args      []string
	AdminAddr string
	LogPath   string

	mu     sync.Mutex // guards cmd and exited
	cmd    *exec.Cmd
	exited chan struct{}
}

// Cluster is a running local cluster.
type Cluster struct {
	cfg   Config
	Procs []*Proc
}

// New lays out the cluster's processes without starting them.
func New(cfg Config) (*Cluster, error) {
	if cfg.Storage <= 0 {
		cfg.Storage = 3
	}
	if cfg.Ports == (Ports{}) {
		cfg.Ports = DefaultPorts()
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = abs
	if err := os.MkdirAll(filepath.Join(abs, "logs"), 0o755); err != nil {
		return nil, err
	}
	p := cfg.Ports
	metaURL := "http://" + addr(p.MetadataHTTP)
	c := &Cluster{cfg: cfg}
	c.add("metadata", "sluice-metadata", addr(p.MetadataAdmin), "-id", "1", "-http-addr", addr(p.MetadataHTTP), "-raft-addr", addr(p.MetadataRaft),
		"-admin-addr", addr(p.MetadataAdmin), "-data-dir", filepath.Join(abs, "metadata"), "-bootstrap")
	for i := 1; i <= cfg.Storage; i++ {
		c.add("storage-"+strconv.Itoa(i), "sluice-storage", addr(p.StorageAdminBase+i-1), "-node-id", strconv.Itoa(i),
			"-addr", addr(p.StorageBase+i-1), "-admin-addr", addr(p.StorageAdminBase+i-1),
			"-data-dir", filepath.Join(abs, "storage-"+strconv.Itoa(i)), "-metadata", metaURL)
	}
	c.add("offsets", "sluice-offsets", addr(p.OffsetsAdmin), "-http-addr", addr(p.OffsetsHTTP), "-admin-addr", addr(p.OffsetsAdmin),
		"-data-dir", filepath.Join(abs, "offsets"))
	c.add("frontend", "sluice-frontend", addr(p.FrontendAdmin), "-http-addr", addr(p.FrontendHTTP), "-admin-addr", addr(p.FrontendAdmin),
		"-metadata", metaURL)
	return c, nil
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func (c *Cluster) add(name, bin, admin string, args ...string) {
	args = append(args, c.cfg.Extra[name]...)
	c.Procs = append(c.Procs, &Proc{Name: name, Bin: filepath.Join(c.cfg.BinDir, bin), Args: args, AdminAddr: admin,
		LogPath: filepath.Join(c.cfg.DataDir, "logs", name+".log")})
}

// FrontendURL is the frontend's base URL.
func (c *Cluster) FrontendURL() string { return "http://" + addr(c.cfg.Ports.FrontendHTTP) }

// MetadataURL is the metadata service's base URL.
func (c *Cluster) MetadataURL() string { return "http://" + addr(c.cfg.Ports.MetadataHTTP) }

// OffsetsURL is the offsets service's base URL.
func (c *Cluster) OffsetsURL() string { return "http://" + addr(c.cfg.Ports.OffsetsHTTP) }

// Proc returns the named process.
func (c *Cluster) Proc(name string) *Proc {
	for _, p := range c.Procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Start starts every process in order, waiting for each to be ready.
func (c *Cluster) Start(ctx context.Context) error {
	for _, p := range c.Procs {
		if err := c.StartProc(ctx, p); err != nil {
			c.Stop()
			return err
		}
	}
	return nil
}

// StartProc starts one process and waits until its /readyz answers 200.
func (c *Cluster) StartProc(ctx context.Context, p *Proc) error {
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the launcher only; it stops children in order
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	if c.cfg.Log != nil {
		fmt.Fprintf(c.cfg.Log, "started %-10s pid %d, log %s\n", p.Name, cmd.Process.Pid, p.LogPath)
	}
	return waitReady(ctx, p, exited)
}

func waitReady(ctx context.Context, p *Proc, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	url := "http://" + p.AdminAddr + "/readyz"
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = string(body)
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start-up; see %s", p.Name, p.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %s (log %s)", p.Name, last, p.LogPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StopProc sends SIGTERM (or SIGKILL when kill is set) and waits for the exit.
func (c *Cluster) StopProc(p *Proc, kill bool) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	if c.cfg.Log != nil {
		fmt.Fprintf(c.cfg.Log, "stopped %s\n", p.Name)
	}
}

// Stop stops every process in reverse start order.
func (c *Cluster) Stop() {
	for i := len(c.Procs) - 1; i >= 0; i-- {
		c.StopProc(c.Procs[i], false)
	}
}

// Exited returns a channel closed when any process exits on its own.
func (c *Cluster) Exited() <-chan string {
	ch := make(chan string, len(c.Procs))
	for _, p := range c.Procs {
		p.mu.Lock()
		e, cmd := p.exited, p.cmd
		p.mu.Unlock()
		if cmd == nil {
			continue
		}
		go func(name string) { <-e; ch <- name }(p.Name)
	}
	return ch
}
