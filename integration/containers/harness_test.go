package containers

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	metadataPeers = "1=metadata-1:7071=metadata-1:7070,2=metadata-2:7071=metadata-2:7070,3=metadata-3:7071=metadata-3:7070"
	offsetsPeers  = "1=offsets-1:7081=offsets-1:7080,2=offsets-2:7081=offsets-2:7080,3=offsets-3:7081=offsets-3:7080"
	metadataList  = "http://metadata-1:7070,http://metadata-2:7070,http://metadata-3:7070"
	offsetsList   = "http://offsets-1:7080,http://offsets-2:7080,http://offsets-3:7080"
)

// tcCluster is a Sluice cluster in containers on its own network, laid out as
// docker-compose.yml (3 metadata, 3 storage, 3 offsets) with one frontend to
// begin with. Every published port is bound to a host port chosen up front,
// so addresses survive a container's restart; storage nodes advertise
// 127.0.0.1:<port>, so the test process reaches them as clients do.
type tcCluster struct {
	t          *testing.T
	net        *testcontainers.DockerNetwork
	mu         sync.Mutex
	containers map[string]testcontainers.Container
	nodes      map[string]node

	metadataURLs []string // published metadata HTTP ports
	offsetsURLs  []string // published offsets HTTP ports
	frontendURL  string   // published HTTP port of frontend-1
}

// node describes one container.
type node struct {
	name  string // network alias
	image string
	cmd   []string
	admin string         // admin port serving /readyz
	ports map[string]int // published container port -> host port on 127.0.0.1 (admin included)
}

// newNode returns a node publishing admin and ports, each on a free host port.
func newNode(t *testing.T, name, image, admin string, cmd []string, ports ...string) node {
	n := node{name: name, image: image, cmd: cmd, admin: admin, ports: map[string]int{admin: freePort(t)}}
	for _, p := range ports {
		n.ports[p] = freePort(t)
	}
	return n
}

func labels() map[string]string {
	return map[string]string{labelRun: runID, labelPid: strconv.Itoa(os.Getpid())}
}

// startCluster starts the cluster; it is removed when the test ends, with the
// containers' log tails printed if the test failed.
func startCluster(t *testing.T) *tcCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nw, err := network.New(ctx, network.WithLabels(labels()))
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	c := &tcCluster{t: t, net: nw, containers: map[string]testcontainers.Container{}, nodes: map[string]node{}}
	t.Cleanup(c.close)

	var meta, offs, store []node
	for i := 1; i <= 3; i++ {
		id := strconv.Itoa(i)
		// A 6s storage session (3s by default): docker pause and network
		// disconnect take seconds on a loaded machine, and the partition
		// scenario freezes two nodes for a while without wanting them fenced.
		meta = append(meta, newNode(t, "metadata-"+id, "sluice/metadata:dev", "7072/tcp",
			[]string{"-id", id, "-bootstrap", "-peers", metadataPeers, "-session-timeout", "6s"}, "7070/tcp"))
		offs = append(offs, newNode(t, "offsets-"+id, "sluice/offsets:dev", "7082/tcp",
			[]string{"-id", id, "-bootstrap", "-peers", offsetsPeers, "-metadata", metadataList}, "7080/tcp"))
		s := newNode(t, "storage-"+id, "sluice/storage:dev", "9111/tcp", nil, "9101/tcp", "9121/tcp")
		s.cmd = []string{"-node-id", id, "-internal-addr", "storage-" + id + ":9101",
			"-advertised-addr", fmt.Sprintf("127.0.0.1:%d", s.ports["9101/tcp"]),
			"-kafka-advertised-addr", fmt.Sprintf("127.0.0.1:%d", s.ports["9121/tcp"]), "-metadata", metadataList}
		store = append(store, s)
	}
	// Raft voters only become ready together: start each group at once.
	c.startAll(ctx, meta)
	c.startAll(ctx, append(store, offs...))
	c.startAll(ctx, []node{c.frontendNode(1)})

	for i := 1; i <= 3; i++ {
		c.metadataURLs = append(c.metadataURLs, c.endpoint(fmt.Sprintf("metadata-%d", i), "7070/tcp"))
		c.offsetsURLs = append(c.offsetsURLs, c.endpoint(fmt.Sprintf("offsets-%d", i), "7080/tcp"))
	}
	c.frontendURL = c.endpoint("frontend-1", "8080/tcp")
	return c
}

// frontendNode describes frontend-i.
func (c *tcCluster) frontendNode(i int) node {
	name := fmt.Sprintf("frontend-%d", i)
	n := newNode(c.t, name, "sluice/frontend:dev", "8081/tcp", nil, "8080/tcp", "9092/tcp")
	n.cmd = []string{"-node-id", name, "-kafka-advertised-addr", fmt.Sprintf("127.0.0.1:%d", n.ports["9092/tcp"]),
		"-metadata", metadataList, "-offsets", offsetsList}
	return n
}

func (c *tcCluster) startAll(ctx context.Context, nodes []node) {
	c.t.Helper()
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errs <- c.start(ctx, n) }()
	}
	var failed []string
	for range nodes {
		if err := <-errs; err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		c.t.Fatalf("starting containers: %s", strings.Join(failed, "; "))
	}
}

// start creates and starts a node's container. A host port taken meanwhile
// ("port is already allocated" by another container, "address already in
// use" by another process, such as the process suite running alongside) is
// retried on new ports.
func (c *tcCluster) start(ctx context.Context, n node) error {
	for attempt := 1; ; attempt++ {
		err := c.startOnce(ctx, n)
		if err == nil || attempt == 3 || !portTaken(err) {
			return err
		}
		c.mu.Lock()
		ctr := c.containers[n.name]
		delete(c.containers, n.name)
		c.mu.Unlock()
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		n = n.withNewPorts(c.t)
	}
}

// portTaken reports whether a container failed to start because one of its
// host ports was taken.
func portTaken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use")
}

// withNewPorts returns n published on other free host ports (advertising
// the new ones).
func (n node) withNewPorts(t *testing.T) node {
	ports := map[string]int{}
	for p := range n.ports {
		ports[p] = freePort(t)
	}
	n.ports = ports
	n.cmd = slices.Clone(n.cmd)
	for i, a := range n.cmd {
		if i+1 >= len(n.cmd) {
			break
		}
		switch {
		case a == "-advertised-addr":
			n.cmd[i+1] = fmt.Sprintf("127.0.0.1:%d", ports["9101/tcp"])
		case a == "-kafka-advertised-addr" && ports["9121/tcp"] != 0:
			n.cmd[i+1] = fmt.Sprintf("127.0.0.1:%d", ports["9121/tcp"])
		case a == "-kafka-advertised-addr":
			n.cmd[i+1] = fmt.Sprintf("127.0.0.1:%d", ports["9092/tcp"])
		}
	}
	return n
}

func (c *tcCluster) startOnce(ctx context.Context, n node) error {
	c.mu.Lock()
	c.nodes[n.name] = n
	c.mu.Unlock()
	var exposed []string
	for p := range n.ports {
		exposed = append(exposed, p)
	}
	req := testcontainers.ContainerRequest{
		Image:          n.image,
		Cmd:            n.cmd,
		Labels:         labels(),
		ExposedPorts:   exposed,
		Networks:       []string{c.net.Name},
		NetworkAliases: map[string][]string{c.net.Name: {n.name}},
		WaitingFor:     wait.ForHTTP("/readyz").WithPort(n.admin).WithStartupTimeout(90 * time.Second).WithPollInterval(250 * time.Millisecond),
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = mobynet.PortMap{}
			for p, host := range n.ports {
				hc.PortBindings[mobynet.MustParsePort(p)] = []mobynet.PortBinding{
					{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(host)}}
			}
		},
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if ctr != nil {
		c.mu.Lock()
		c.containers[n.name] = ctr
		c.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	return nil
}

// endpoint is the URL of a node's published port.
func (c *tcCluster) endpoint(name, port string) string {
	c.t.Helper()
	c.mu.Lock()
	host, ok := c.nodes[name].ports[port]
	c.mu.Unlock()
	if !ok {
		c.t.Fatalf("%s publishes no %s", name, port)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", host)
}

// containerID returns the Docker id of a node's container.
func (c *tcCluster) containerID(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.containers[name].GetContainerID()
}

// kill sends SIGKILL to a container (kill -9 of its process).
func (c *tcCluster) kill(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerKill(ctx, c.containerID(name), client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
		c.t.Fatalf("kill %s: %v", name, err)
	}
}

// stop stops a container gracefully (SIGTERM, then SIGKILL after 30s).
func (c *tcCluster) stop(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	timeout := 30
	if _, err := docker.ContainerStop(ctx, c.containerID(name), client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		c.t.Fatalf("stop %s: %v", name, err)
	}
}

// restart starts a stopped or killed container again (same file system,
// network alias and host ports) and waits until it is ready.
func (c *tcCluster) restart(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := docker.ContainerStart(ctx, c.containerID(name), client.ContainerStartOptions{}); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.waitReady(name)
}

// waitReady waits up to 90s for a node's /readyz to answer 200.
func (c *tcCluster) waitReady(name string) {
	c.t.Helper()
	c.mu.Lock()
	admin := c.nodes[name].admin
	c.mu.Unlock()
	url := c.endpoint(name, admin) + "/readyz"
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not ready after 90s: %v", name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// disconnect cuts a container off the cluster network (its published ports
// go with it); reconnect joins it again under its alias.
func (c *tcCluster) disconnect(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.NetworkDisconnect(ctx, c.net.ID, client.NetworkDisconnectOptions{Container: c.containerID(name), Force: true}); err != nil {
		c.t.Fatalf("disconnect %s: %v", name, err)
	}
}

func (c *tcCluster) reconnect(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.NetworkConnect(ctx, c.net.ID, client.NetworkConnectOptions{Container: c.containerID(name),
		EndpointConfig: &mobynet.EndpointSettings{Aliases: []string{name}}}); err != nil {
		c.t.Fatalf("reconnect %s: %v", name, err)
	}
}

// logs returns a container's whole log.
func (c *tcCluster) logs(name string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.mu.Lock()
	ctr := c.containers[name]
	c.mu.Unlock()
	rc, err := ctr.Logs(ctx)
	if err != nil {
		c.t.Fatalf("logs of %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		c.t.Fatalf("logs of %s: %v", name, err)
	}
	return string(b)
}

// close removes the containers and the network; on failure it prints the
// tail of each container's log first.
func (c *tcCluster) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for name, ctr := range c.containers {
		if c.t.Failed() {
			if rc, err := ctr.Logs(ctx); err == nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				c.t.Logf("---- %s log (tail) ----\n%s", name, b)
			}
		}
		if err := testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(0)); err != nil {
			c.t.Logf("terminate %s: %v", name, err)
		}
	}
	if err := c.net.Remove(ctx); err != nil {
		c.t.Logf("remove network: %v", err)
	}
	removeRun()
}

// handedOut holds the host ports freePort returned, so that it never gives
// one twice (the kernel may offer a port again once its listener is closed).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a host port that was free a moment ago and was not
// returned before.
func freePort(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}
