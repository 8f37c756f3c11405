// Package localcluster starts a Sluice cluster as processes on 127.0.0.1: a
// metadata Raft group (three voters by default), N storage nodes, a frontend and
// an offsets Raft group (three replicas by default), each with its own data
// directory and log file, and optionally an S3-compatible object store
// (versitygw) for tiered storage. `make run` (through sluice-dev) and the
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Ports are the listen ports of a local cluster.
type Ports struct {
	// MetadataHTTP, MetadataRaft and MetadataAdmin are voter 1's ports; voter i
	// adds 3*(i-1) to each.
	MetadataHTTP, MetadataRaft, MetadataAdmin int
	// FrontendHTTP and FrontendAdmin are frontend 1's ports; frontend i adds
	// 2*(i-1) to each.
	FrontendHTTP, FrontendAdmin int
	// OffsetsHTTP, OffsetsRaft and OffsetsAdmin are offsets replica 1's
	// ports; replica i adds 3*(i-1) to each.
	OffsetsHTTP, OffsetsRaft, OffsetsAdmin int
	// StorageBase is node 1's protocol port; node i uses StorageBase+i-1 and
	// its admin listener StorageAdminBase+i-1.
	StorageBase, StorageAdminBase int
	// FrontendKafka is frontend 1's Kafka listener (frontend i adds
	// 2*(i-1)); StorageKafkaBase is storage node 1's (node i adds i-1).
	FrontendKafka, StorageKafkaBase int
	// ObjectStore is the S3 listener of the object store (Config.ObjectStore).
	ObjectStore int
}

// DefaultPorts are the fixed ports of `make run`.
func DefaultPorts() Ports {
	return Ports{MetadataHTTP: 7070, MetadataRaft: 7071, MetadataAdmin: 7072, FrontendHTTP: 8080, FrontendAdmin: 8081,
		OffsetsHTTP: 7080, OffsetsRaft: 7081, OffsetsAdmin: 7082, StorageBase: 9101, StorageAdminBase: 9111,
		FrontendKafka: 9092, StorageKafkaBase: 9121, ObjectStore: 9190}
}

// FreePorts picks unused ports for a cluster with the given storage nodes and
// up to MaxVoters metadata voters: one run of consecutive free ports, laid out
// as DefaultPorts lays out its fixed ones. The run lies outside the kernel's
// ephemeral port range when there is room: a process restarted by a test
// binds its ports again, and an outgoing connection given one of them as its
// local port meanwhile would make that fail.
func FreePorts(storage int) (Ports, error) {
	n := 3*MaxVoters + 4*MaxFrontends + 3*MaxOffsets + 3*storage + 1 // as layout uses them
	lo, hi := ephemeralPorts()
	for _, span := range [][2]int{{10000, lo}, {hi + 1, 65536}, {10000, 65536}} {
		if base, ok := freeRun(span[0], span[1], n); ok {
			return layout(base, storage), nil
		}
	}
	return Ports{}, errors.New("localcluster: no free run of ports")
}

// handed holds the bases of the runs FreePorts has handed out in this
// process: a test's cluster may not have bound its ports yet when another
// test running in parallel asks for a run, so a run is handed out once.
var handed struct {
	sync.Mutex
	bases map[int]bool
}

// freeRun finds a run of n free ports within [from, to) that this process
// has not handed out, starting from a place that depends on the process
// id, so parallel test processes pick different runs.
func freeRun(from, to, n int) (int, bool) {
	slots := (to - from - n) / 151
	if slots <= 0 {
		return 0, false
	}
	handed.Lock()
	defer handed.Unlock()
	start := os.Getpid() % slots
	for i := range slots {
		base := from + ((start+i)%slots)*151
		if !handed.bases[base] && runFree(base, n) {
			if handed.bases == nil {
				handed.bases = map[int]bool{}
			}
			handed.bases[base] = true
			return base, true
		}
	}
	return 0, false
}

// ephemeralPorts returns the kernel's range of local ports for outgoing
// connections (Linux's default when it cannot be read).
func ephemeralPorts() (int, int) {
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				lo, hi = l, h
			}
		}
	}
	return lo, hi
}

// layout lays out a cluster's ports from base, as DefaultPorts lays out
// its fixed ones: the metadata voters', the frontends', the offsets
// replicas', the storage nodes' and their admin listeners, the Kafka
// listeners and last the object store's, 3*MaxVoters + 4*MaxFrontends +
// 3*MaxOffsets + 3*storage + 1 ports in all.
func layout(base, storage int) Ports {
	m := base + 3*MaxVoters
	o := m + 2*MaxFrontends
	k := o + 3*MaxOffsets + 2*storage
	return Ports{MetadataHTTP: base, MetadataRaft: base + 1, MetadataAdmin: base + 2,
		FrontendHTTP: m, FrontendAdmin: m + 1, OffsetsHTTP: o, OffsetsRaft: o + 1, OffsetsAdmin: o + 2,
		StorageBase: o + 3*MaxOffsets, StorageAdminBase: o + 3*MaxOffsets + storage,
		FrontendKafka: k, StorageKafkaBase: k + 2*MaxFrontends, ObjectStore: k + 2*MaxFrontends + storage}
}

// MaxVoters bounds the metadata voters of a local cluster, MaxOffsets its
// offsets replicas.
const (
	MaxVoters    = 5
	MaxOffsets   = 3
	MaxFrontends = 3
)

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
	BinDir  string // holds sluice-metadata, sluice-storage, sluice-frontend, sluice-offsets (and versitygw)
	DataDir string // data and logs go under it
	Storage int    // storage nodes (default 3)
	Voters  int    // metadata voters, 1 to MaxVoters (default 3)
	Offsets int    // offsets replicas, 1 to MaxOffsets (default 3)
	// Frontends is the number of frontends, 1 to MaxFrontends (default 1);
	// the first is named "frontend", the others "frontend-2", ...
	Frontends int
	Ports     Ports
	// Extra flags per process name ("metadata-1", "storage-1", "frontend",
	// "offsets-1"); those under "metadata", "storage" or "offsets" go to
	// every process of that service. The object store takes none.
	Extra map[string][]string
	// Log, when set, receives progress lines.
	Log io.Writer
	// Netns runs each storage node in its own network namespace so that
	// links can be cut (Cut, Heal); it needs root and iproute2.
	Netns bool
	// TLS makes the URLs of the HTTP services https (the processes get their
	// -tls-* flags through Extra).
	TLS bool
	// ObjectStore starts an S3-compatible object store for tiered storage
	// first, as process "objectstore": versitygw from BinDir, with its data
	// under DataDir/objectstore, listening on Ports.ObjectStore. The
	// storage nodes get its endpoint and bucket as flags (-remote-*) and
	// its credentials (ObjectStoreAccessKey, ObjectStoreSecretKey) in
	// their environment.
	ObjectStore bool
}

// The object store's development credentials and bucket (Config.ObjectStore).
const (
	ObjectStoreAccessKey = "sluice-dev"
	ObjectStoreSecretKey = "sluice-dev-secret"
	ObjectStoreBucket    = "sluice"
)

// objectStoreName names the object store's process and data directory.
const objectStoreName = "objectstore"

// Proc is one process of the cluster.
type Proc struct {
	Name      string
	Bin       string
	Args      []string
	AdminAddr string
	LogPath   string
	// Env is added to the launcher's environment.
	Env []string

	// anyAnswer: the process is ready once AdminAddr answers HTTP at all
	// (the object store has no /readyz; any S3 answer, even an error,
	// means it serves).
	anyAnswer bool

	netnsIndex int // storage node index when it runs in its own namespace

	mu     sync.Mutex // guards cmd and exited
	cmd    *exec.Cmd  // nil when not running
	exited chan struct{}
}

// Cluster is a running local cluster.
type Cluster struct {
	cfg   Config
	Procs []*Proc
	netns *netnsLayout // nil unless Config.Netns

	exitMu sync.Mutex
	onExit func(Exit) // set by Supervise; called for exits that StopProc did not cause
}

// Exit describes a process that exited on its own (crashed, or was killed
// from outside), not through StopProc.
type Exit struct {
	Proc *Proc
	// Status is the process's end as the OS reports it: "exit status 1",
	// "signal: killed".
	Status string
	// Ran is how long it ran.
	Ran time.Duration
}

// New lays out the cluster's processes without starting them.
func New(cfg Config) (*Cluster, error) {
	if cfg.Storage <= 0 {
		cfg.Storage = 3
	}
	if cfg.Voters <= 0 {
		cfg.Voters = 3
	}
	if cfg.Offsets <= 0 {
		cfg.Offsets = 3
	}
	if cfg.Frontends <= 0 {
		cfg.Frontends = 1
	}
	if cfg.Voters > MaxVoters || cfg.Offsets > MaxOffsets || cfg.Frontends > MaxFrontends {
		return nil, fmt.Errorf("localcluster: %d voters, %d offsets replicas and %d frontends, at most %d, %d and %d",
			cfg.Voters, cfg.Offsets, cfg.Frontends, MaxVoters, MaxOffsets, MaxFrontends)
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
	c := &Cluster{cfg: cfg}
	if cfg.Netns {
		c.netns = newNetns(cfg.Storage)
		if err := c.netns.setup(); err != nil {
			return nil, err
		}
	}
	var remote, remoteEnv []string
	if cfg.ObjectStore {
		if remote, remoteEnv, err = c.addObjectStore(); err != nil {
			return nil, err
		}
	}
	var peers []string
	for i := 1; i <= cfg.Voters; i++ {
		h, r, _ := c.voterPorts(i)
		peers = append(peers, fmt.Sprintf("%d=%s=%s", i, addr(r), c.rootAddr(h)))
	}
	metaURL := c.MetadataURL()
	for i := 1; i <= cfg.Voters; i++ {
		h, r, a := c.voterPorts(i)
		c.add(voterName(i), "sluice-metadata", addr(a), "-id", strconv.Itoa(i), "-http-addr", c.rootAddr(h), "-raft-addr", addr(r),
			"-admin-addr", addr(a), "-data-dir", filepath.Join(abs, voterName(i)), "-bootstrap", "-peers", strings.Join(peers, ","))
	}
	c.addStorage(metaURL, remote, remoteEnv)
	var opeers []string
	for i := 1; i <= cfg.Offsets; i++ {
		h, r, _ := c.offsetsPorts(i)
		opeers = append(opeers, fmt.Sprintf("%d=%s=%s", i, addr(r), addr(h)))
	}
	for i := 1; i <= cfg.Offsets; i++ {
		h, r, a := c.offsetsPorts(i)
		c.add(offsetsName(i), "sluice-offsets", addr(a), "-id", strconv.Itoa(i), "-http-addr", addr(h), "-raft-addr", addr(r),
			"-admin-addr", addr(a), "-data-dir", filepath.Join(abs, offsetsName(i)), "-bootstrap", "-peers", strings.Join(opeers, ","),
			"-metadata", metaURL)
	}
	for i := 1; i <= cfg.Frontends; i++ {
		h, a := c.frontendPorts(i)
		c.add(frontendName(i), "sluice-frontend", addr(a), "-node-id", frontendName(i), "-http-addr", addr(h), "-admin-addr", addr(a),
			"-kafka-addr", c.KafkaAddrs()[i-1], "-metadata", metaURL, "-offsets", c.OffsetsURL())
	}
	return c, nil
}

// addObjectStore adds the object store's process and returns the flags
// and environment that point a storage node at it.
func (c *Cluster) addObjectStore() (flags, env []string, err error) {
	listen := c.rootAddr(c.cfg.Ports.ObjectStore)
	args, err := ObjectStoreArgs(listen, c.ObjectStoreDir())
	if err != nil {
		return nil, nil, err
	}
	c.add(objectStoreName, "versitygw", listen, args...)
	c.Procs[len(c.Procs)-1].anyAnswer = true
	flags = []string{"-remote-endpoint", c.ObjectStoreURL(), "-remote-bucket", ObjectStoreBucket, "-remote-create-bucket"}
	env = []string{"AWS_ACCESS_KEY_ID=" + ObjectStoreAccessKey, "AWS_SECRET_ACCESS_KEY=" + ObjectStoreSecretKey}
	return flags, env, nil
}

// ObjectStoreArgs returns the arguments of versitygw serving S3 on addr
// (plain HTTP) with the development credentials (ObjectStoreAccessKey,
// ObjectStoreSecretKey), its files under dir, which it creates: the
// buckets under dir/data (bucket sluice in dir/data/sluice, one file per
// object) and their metadata under dir/meta. The cluster runs the object
// store so, and so may a test that needs one alone.
//
// versitygw's posix backend keeps each bucket as a directory and each
// object as a file below it; the metadata it keeps beside them (a bucket's
// owner and ACL, an object's ETag and content type) goes to extended
// attributes unless --sidecar names a directory for it, or --nometa drops
// it. The sidecar directory works on every file system, where user xattrs
// do not (tmpfs before Linux 6.6, some overlay and network file systems),
// and keeps the metadata --nometa would lose. (ext4 here has user xattrs:
// all three ways passed the objstore tests.) --data-integrity-etag spares
// it an MD5 of every object it stores (the ETag is then derived otherwise;
// Sluice checks its segments with CRC-32Cs of its own): its PUTs of 32 MiB
// went from 295 to 788 MB/s on the two cores it shares with the cluster.
func ObjectStoreArgs(addr, dir string) ([]string, error) {
	meta, data := filepath.Join(dir, "meta"), filepath.Join(dir, "data")
	for _, d := range []string{meta, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return []string{"--access", ObjectStoreAccessKey, "--secret", ObjectStoreSecretKey, "--port", addr, "--quiet",
		"posix", "--data-integrity-etag", "--sidecar", meta, data}, nil
}

// ObjectStoreURL is the object store's S3 endpoint ("" when the cluster
// has none).
func (c *Cluster) ObjectStoreURL() string {
	if !c.cfg.ObjectStore {
		return ""
	}
	return "http://" + c.rootAddr(c.cfg.Ports.ObjectStore)
}

// ObjectStoreDir is the object store's directory (ObjectStoreArgs says
// what it holds; "" when the cluster has none).
func (c *Cluster) ObjectStoreDir() string {
	if !c.cfg.ObjectStore {
		return ""
	}
	return filepath.Join(c.cfg.DataDir, objectStoreName)
}

// addStorage adds the storage nodes' processes, with remote (the
// -remote-* flags) and env added to each.
func (c *Cluster) addStorage(metaURL string, remote, env []string) {
	p := c.cfg.Ports
	for i := 1; i <= c.cfg.Storage; i++ {
		name := "storage-" + strconv.Itoa(i)
		args := append([]string{"-node-id", strconv.Itoa(i),
			"-addr", c.nodeAddr(i, p.StorageBase+i-1), "-admin-addr", c.nodeAddr(i, p.StorageAdminBase+i-1),
			"-data-dir", filepath.Join(c.cfg.DataDir, name), "-metadata", metaURL, "-offsets", c.OffsetsURL(),
			"-kafka-addr", c.nodeAddr(i, p.StorageKafkaBase+i-1)}, remote...)
		c.add(name, "sluice-storage", c.nodeAddr(i, p.StorageAdminBase+i-1), args...)
		last := c.Procs[len(c.Procs)-1]
		last.Env = env
		if c.netns != nil {
			last.netnsIndex = i
		}
	}
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// rootAddr is a root-namespace listen address that storage nodes can reach:
// the bridge address with Netns, 127.0.0.1 otherwise.
func (c *Cluster) rootAddr(port int) string {
	if c.netns != nil {
		return c.netns.rootIP() + ":" + strconv.Itoa(port)
	}
	return addr(port)
}

// nodeAddr is storage node i's listen address.
func (c *Cluster) nodeAddr(i, port int) string {
	if c.netns != nil {
		return c.netns.nodeIP(i) + ":" + strconv.Itoa(port)
	}
	return addr(port)
}

// voterName names metadata voter i (and its data directory).
func voterName(i int) string { return "metadata-" + strconv.Itoa(i) }

// voterPorts returns voter i's HTTP, Raft and admin ports.
func (c *Cluster) voterPorts(i int) (int, int, int) {
	p, d := c.cfg.Ports, 3*(i-1)
	return p.MetadataHTTP + d, p.MetadataRaft + d, p.MetadataAdmin + d
}

// Voters returns the metadata voters' processes.
func (c *Cluster) Voters() []*Proc {
	var out []*Proc
	for i := 1; i <= c.cfg.Voters; i++ {
		out = append(out, c.Proc(voterName(i)))
	}
	return out
}

// offsetsName names offsets replica i (and its data directory).
func offsetsName(i int) string { return "offsets-" + strconv.Itoa(i) }

// offsetsPorts returns offsets replica i's HTTP, Raft and admin ports.
func (c *Cluster) offsetsPorts(i int) (int, int, int) {
	p, d := c.cfg.Ports, 3*(i-1)
	return p.OffsetsHTTP + d, p.OffsetsRaft + d, p.OffsetsAdmin + d
}

// OffsetsReplicas returns the offsets replicas' processes.
func (c *Cluster) OffsetsReplicas() []*Proc {
	var out []*Proc
	for i := 1; i <= c.cfg.Offsets; i++ {
		out = append(out, c.Proc(offsetsName(i)))
	}
	return out
}

func (c *Cluster) add(name, bin, admin string, args ...string) {
	if group, _, ok := strings.Cut(name, "-"); ok {
		args = append(args, c.cfg.Extra[group]...)
	}
	args = append(args, c.cfg.Extra[name]...)
	c.Procs = append(c.Procs, &Proc{Name: name, Bin: filepath.Join(c.cfg.BinDir, bin), Args: args, AdminAddr: admin,
		LogPath: filepath.Join(c.cfg.DataDir, "logs", name+".log")})
}

// Ports are the cluster's listen ports.
func (c *Cluster) Ports() Ports { return c.cfg.Ports }

// DataDir returns the absolute directory holding every process's data
// directory (storage-1, metadata-1, ...) and the logs.
func (c *Cluster) DataDir() string { return c.cfg.DataDir }

// FrontendURL is the first frontend's base URL.
func (c *Cluster) FrontendURL() string { return c.scheme() + addr(c.cfg.Ports.FrontendHTTP) }

// scheme is the URL scheme of the HTTP services.
func (c *Cluster) scheme() string {
	if c.cfg.TLS {
		return "https://"
	}
	return "http://"
}

// FrontendURLs is every frontend's base URL.
func (c *Cluster) FrontendURLs() []string {
	var urls []string
	for i := 1; i <= c.cfg.Frontends; i++ {
		h, _ := c.frontendPorts(i)
		urls = append(urls, c.scheme()+addr(h))
	}
	return urls
}

// KafkaAddrs are the frontends' Kafka listeners (a Kafka client's
// bootstrap servers).
func (c *Cluster) KafkaAddrs() []string {
	var out []string
	for i := 1; i <= c.cfg.Frontends; i++ {
		out = append(out, addr(c.cfg.Ports.FrontendKafka+2*(i-1)))
	}
	return out
}

// StorageKafkaAddr is storage node i's Kafka listener.
func (c *Cluster) StorageKafkaAddr(i int) string {
	return c.nodeAddr(i, c.cfg.Ports.StorageKafkaBase+i-1)
}

// frontendName names frontend i: "frontend", then "frontend-2", ...
func frontendName(i int) string {
	if i == 1 {
		return "frontend"
	}
	return "frontend-" + strconv.Itoa(i)
}

// frontendPorts returns frontend i's HTTP and admin ports.
func (c *Cluster) frontendPorts(i int) (int, int) {
	d := 2 * (i - 1)
	return c.cfg.Ports.FrontendHTTP + d, c.cfg.Ports.FrontendAdmin + d
}

// MetadataURL is the metadata voters' base URLs, comma-separated (the form of
// every -metadata flag).
func (c *Cluster) MetadataURL() string { return strings.Join(c.MetadataURLs(), ",") }

// MetadataURLs is the metadata voters' base URLs.
func (c *Cluster) MetadataURLs() []string {
	var urls []string
	for i := 1; i <= c.cfg.Voters; i++ {
		h, _, _ := c.voterPorts(i)
		urls = append(urls, c.scheme()+c.rootAddr(h))
	}
	return urls
}

// OffsetsURL is the offsets replicas' base URLs, comma-separated.
func (c *Cluster) OffsetsURL() string { return strings.Join(c.OffsetsURLs(), ",") }

// OffsetsURLs is the offsets replicas' base URLs.
func (c *Cluster) OffsetsURLs() []string {
	var urls []string
	for i := 1; i <= c.cfg.Offsets; i++ {
		h, _, _ := c.offsetsPorts(i)
		urls = append(urls, c.scheme()+addr(h))
	}
	return urls
}

// Proc returns the named process.
func (c *Cluster) Proc(name string) *Proc {
	for _, p := range c.Procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Start starts every process in order: the object store, if any, then the
// metadata voters together (none is ready before a quorum runs), then the
// others one by one, waiting for each to be ready, except the offsets
// replicas, which also start together.
func (c *Cluster) Start(ctx context.Context) error {
	voters := c.Voters()
	offsets := c.OffsetsReplicas()
	store := c.Proc(objectStoreName)
	if store != nil {
		if err := c.StartProc(ctx, store); err != nil {
			c.Stop()
			return err
		}
	}
	for _, p := range voters {
		if err := c.launch(p); err != nil {
			c.Stop()
			return err
		}
	}
	for _, p := range c.Procs {
		var err error
		switch {
		case p == store:
		case slices.Contains(voters, p):
			err = c.WaitReady(ctx, p)
		case p == offsets[0]:
			for _, o := range offsets {
				if err = c.launch(o); err != nil {
					break
				}
			}
			if err == nil {
				err = c.WaitReady(ctx, p)
			}
		case slices.Contains(offsets, p):
			err = c.WaitReady(ctx, p)
		default:
			err = c.StartProc(ctx, p)
		}
		if err != nil {
			c.Stop()
			return err
		}
	}
	return nil
}

// StartProc starts one process and waits until its /readyz answers 200.
func (c *Cluster) StartProc(ctx context.Context, p *Proc) error {
	if err := c.launch(p); err != nil {
		return err
	}
	return c.WaitReady(ctx, p)
}

// WaitReady waits until a started process's /readyz answers 200.
func (c *Cluster) WaitReady(ctx context.Context, p *Proc) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	return waitReady(ctx, p, exited)
}

// launch starts one process without waiting for it.
func (c *Cluster) launch(p *Proc) error {
	p.mu.Lock() // held until cmd is set: two launches of one process cannot both start it
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("start %s: already running", p.Name)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	bin, args := p.Bin, p.Args
	if c.netns != nil && p.netnsIndex > 0 {
		bin, args = c.netns.wrap(p.netnsIndex, p.Bin, p.Args)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	// Ctrl-C reaches the launcher only, which stops the children in order. A
	// launcher killed with SIGKILL leaves them running (they hold the ports
	// until stopped by hand: pkill -f sluice-).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	started := time.Now()
	p.cmd, p.exited = cmd, exited
	go func() {
		_ = cmd.Wait()
		logf.Close()
		// StopProc clears cmd before it signals; a process still current
		// here ended on its own.
		p.mu.Lock()
		own := p.cmd == cmd
		if own {
			p.cmd = nil
		}
		p.mu.Unlock()
		// The supervisor hears of the exit before exited closes, so that
		// whoever waits for the exit (StopProc, a test) sees its report
		// and any restart it scheduled.
		if own {
			c.exited(Exit{Proc: p, Status: cmd.ProcessState.String(), Ran: time.Since(started)})
		}
		close(exited)
	}()
	if c.cfg.Log != nil {
		fmt.Fprintf(c.cfg.Log, "started %-10s pid %d, log %s\n", p.Name, cmd.Process.Pid, p.LogPath)
	}
	return nil
}

func waitReady(ctx context.Context, p *Proc, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	url := "http://" + p.AdminAddr + "/readyz"
	if p.anyAnswer {
		url = "http://" + p.AdminAddr + "/"
	}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || p.anyAnswer {
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

// Close stops the cluster and removes its network namespaces, if any.
func (c *Cluster) Close() {
	c.Stop()
	if c.netns != nil {
		c.netns.teardown()
	}
}

// exited passes an exit to the supervisor, if one watches.
func (c *Cluster) exited(e Exit) {
	c.exitMu.Lock()
	f := c.onExit
	c.exitMu.Unlock()
	if f != nil {
		f(e)
	}
}

// Pause stops a running process with SIGSTOP (it keeps its sockets but does
// nothing: a hung node); Resume continues it. It returns once every thread
// of the process has stopped: the kernel stops them one by one after the
// signal is sent, and a thread still running could serve a request sent
// right after.
func (c *Cluster) Pause(p *Proc) error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := p.Pid()
	deadline := time.Now().Add(5 * time.Second)
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d threads still running 5s after SIGSTOP", p.Name, running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of process pid that are not stopped,
// from /proc/pid/task/*/stat (a thread that exits meanwhile is not
// counted; a process gone has none).
func runningThreads(pid int) (int, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue
		}
		// "tid (comm) S ...": the state follows the last parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("%s/%s/stat: unexpected format %q", dir, task.Name(), b)
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			n++
		}
	}
	return n, nil
}

// Resume continues a paused process with SIGCONT.
func (c *Cluster) Resume(p *Proc) error { return p.signal(syscall.SIGCONT) }

func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// MetadataLeader returns the voter process that leads the Raft group, as the
// given snapshot's leader address names it.
func (c *Cluster) MetadataLeader(leaderHTTP string) *Proc {
	for i := 1; i <= c.cfg.Voters; i++ {
		h, _, _ := c.voterPorts(i)
		if a := c.rootAddr(h); a == leaderHTTP || "http://"+a == leaderHTTP {
			return c.Proc(voterName(i))
		}
	}
	return nil
}

// Running reports whether the process runs (it was started and has not
// exited or been stopped since).
func (p *Proc) Running() bool { return p.Pid() != 0 }

// Pid returns the running process's id (0 when it is not running).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
