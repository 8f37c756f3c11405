package containers

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
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
// docker-compose.yml (3 metadata, 3 storage, 3 offsets) with one frontend.
// Storage nodes publish 9101 on a host port chosen up front and advertise
// 127.0.0.1:<port>, so the test process reaches them as clients do.
type tcCluster struct {
	t          *testing.T
	net        *testcontainers.DockerNetwork
	mu         sync.Mutex
	containers map[string]testcontainers.Container

	metadataURLs []string // published metadata HTTP ports
	offsetsURLs  []string // published offsets HTTP ports
	frontendURL  string   // published frontend HTTP port
}

// node describes one container.
type node struct {
	name      string // network alias
	image     string
	cmd       []string
	admin     string   // admin port serving /readyz
	ports     []string // exposed ports published on random host ports
	storePort int      // storage only: fixed host port for 9101
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
	c := &tcCluster{t: t, net: nw, containers: map[string]testcontainers.Container{}}
	t.Cleanup(c.close)

	var meta, offs, store []node
	for i := 1; i <= 3; i++ {
		id := strconv.Itoa(i)
		meta = append(meta, node{name: "metadata-" + id, image: "sluice/metadata:dev", admin: "7072/tcp", ports: []string{"7070/tcp"},
			cmd: []string{"-id", id, "-bootstrap", "-peers", metadataPeers}})
		offs = append(offs, node{name: "offsets-" + id, image: "sluice/offsets:dev", admin: "7082/tcp", ports: []string{"7080/tcp"},
			cmd: []string{"-id", id, "-bootstrap", "-peers", offsetsPeers, "-metadata", metadataList}})
		port := freePort(t)
		store = append(store, node{name: "storage-" + id, image: "sluice/storage:dev", admin: "9111/tcp", storePort: port,
			cmd: []string{"-node-id", id, "-internal-addr", "storage-" + id + ":9101", "-advertised-addr", fmt.Sprintf("127.0.0.1:%d", port), "-metadata", metadataList}})
	}
	// Raft voters only become ready together: start each group at once.
	c.startAll(ctx, meta)
	c.startAll(ctx, append(store, offs...))
	c.startAll(ctx, []node{{name: "frontend-1", image: "sluice/frontend:dev", admin: "8081/tcp", ports: []string{"8080/tcp"},
		cmd: []string{"-node-id", "frontend-1", "-metadata", metadataList, "-offsets", offsetsList}}})

	for i := 1; i <= 3; i++ {
		c.metadataURLs = append(c.metadataURLs, c.endpoint(ctx, fmt.Sprintf("metadata-%d", i), "7070/tcp"))
		c.offsetsURLs = append(c.offsetsURLs, c.endpoint(ctx, fmt.Sprintf("offsets-%d", i), "7080/tcp"))
	}
	c.frontendURL = c.endpoint(ctx, "frontend-1", "8080/tcp")
	return c
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

func (c *tcCluster) start(ctx context.Context, n node) error {
	exposed := append([]string{n.admin}, n.ports...)
	if n.storePort != 0 {
		exposed = append(exposed, "9101/tcp")
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
			if n.storePort != 0 {
				if hc.PortBindings == nil {
					hc.PortBindings = mobynet.PortMap{}
				}
				hc.PortBindings[mobynet.MustParsePort("9101/tcp")] = []mobynet.PortBinding{
					{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(n.storePort)}}
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

func (c *tcCluster) endpoint(ctx context.Context, name, port string) string {
	c.t.Helper()
	e, err := c.containers[name].PortEndpoint(ctx, port, "http")
	if err != nil {
		c.t.Fatalf("%s %s: %v", name, port, err)
	}
	return e
}

// kill sends SIGKILL to a container (kill -9 of its process).
func (c *tcCluster) kill(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerKill(ctx, c.containers[name].GetContainerID(), client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
		c.t.Fatalf("kill %s: %v", name, err)
	}
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

// freePort returns a host port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
