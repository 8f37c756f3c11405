package containers

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/tlsconf"
)

// TestComposeOverTLS brings up docker-compose.yml with docker-compose.tls.yml
// laid over it, as `make certs && make up-tls` does, with certificates
// written the way make certs writes them: every service on mutual TLS. An
// SDK producer (the CA only) and a group consumer (the client certificate)
// on the host go through the published ports: every record is read back. A
// plain-HTTP client and a TLS client without a certificate are refused by
// metadata.
func TestComposeOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("containers suite")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The compose file publishes the fixed ports of make run.
	for _, port := range []int{7070, 7073, 7076, 7080, 7083, 7086, 8080, 8082, 9092, 9094, 9101, 9102, 9103, 9121, 9122, 9123} {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("port %d of docker-compose.yml is taken: %v", port, err)
			}
			t.Skipf("port %d of docker-compose.yml is taken (a cluster running?): %v", port, err)
		}
		ln.Close()
	}
	certs := t.TempDir()
	if err := tlsconf.Generate(certs, tlsconf.DefaultHosts, time.Hour); err != nil {
		t.Fatal(err)
	}
	project := "sluicetls" + strings.ReplaceAll(runID, "-", "")
	compose := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "docker-compose", append([]string{"-p", project,
			"-f", filepath.Join(root, "docker-compose.yml"), "-f", filepath.Join(root, "docker-compose.tls.yml")}, args...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "SLUICE_CERTS="+certs)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			out, _ := compose(ctx, "logs", "--tail", "30")
			t.Logf("docker-compose logs:\n%s", out)
		}
		if out, err := compose(ctx, "down", "-v", "--timeout", "5"); err != nil {
			t.Errorf("docker-compose down: %v\n%s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if out, err := compose(ctx, "up", "-d"); err != nil {
		t.Fatalf("docker-compose up: %v\n%s", err, out)
	}

	ca := filepath.Join(certs, tlsconf.CAFile)
	caOnly, err := tlsconf.ClientFiles(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	app, err := tlsconf.ClientFiles(ca, filepath.Join(certs, tlsconf.ClientCertFile), filepath.Join(certs, tlsconf.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	frontends := []string{"127.0.0.1:8080", "127.0.0.1:8082"}
	metadata := []string{"127.0.0.1:7070", "127.0.0.1:7073", "127.0.0.1:7076"}
	admin := cluster.NewClientTLS(frontends, caOnly)
	const topic = "compose-tls"
	var lastErr error
	for ctx.Err() == nil { // the frontends start once the storage nodes are healthy
		if _, lastErr = admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: topic, Partitions: 3, ReplicationFactor: 3}); lastErr == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if lastErr != nil {
		t.Fatalf("creating a topic through the TLS frontends: %v", lastErr)
	}

	pcfg := client.DefaultProducerConfig()
	pcfg.Frontends, pcfg.TLS, pcfg.Logger = frontends, caOnly, loadcheck.QuietLogger()
	l := loadcheck.Produce(t, ctx, pcfg, 10, 2000, " over TLS", topic)

	ccfg := client.DefaultConsumerConfig()
	ccfg.Metadata, ccfg.Offsets, ccfg.TLS = metadata, []string{"127.0.0.1:7080", "127.0.0.1:7083", "127.0.0.1:7086"}, app
	ccfg.Group, ccfg.Topics, ccfg.AutoOffsetReset = "compose-tls-readers", []string{topic}, client.OffsetResetEarliest
	ccfg.Logger = loadcheck.QuietLogger()
	consumeAllWith(t, ctx, ccfg, l.AckedSet())

	// Refused: plain HTTP, and TLS without a client certificate.
	if resp, err := http.Get("http://127.0.0.1:7070/v1/cluster"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("metadata answered plain HTTP")
		}
	}
	if _, err := cluster.NewClientTLS(metadata[:1], caOnly).Snapshot(ctx); err == nil {
		t.Error("metadata answered a TLS client without a certificate")
	}
}

// TestComposeAdvertisesOneHost: SLUICE_ADVERTISED_HOST alone moves every
// address the compose cluster gives its clients (storage nodes' and the
// frontends' Kafka listeners, storage nodes' protocol) off 127.0.0.1, so
// the cluster is reachable from other hosts and containers; unset, every
// one is 127.0.0.1 for clients on this host.
func TestComposeAdvertisesOneHost(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	advertised := func(host string) []string {
		t.Helper()
		cmd := exec.Command("docker-compose", "-f", filepath.Join(root, "docker-compose.yml"), "config")
		cmd.Env = append(os.Environ(), "SLUICE_ADVERTISED_HOST="+host)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("docker-compose config: %v", err)
		}
		var addrs []string
		lines := strings.Split(string(out), "\n")
		for i, l := range lines {
			if f := strings.TrimSpace(l); (f == "- -advertised-addr" || f == "- -kafka-advertised-addr") && i+1 < len(lines) {
				addrs = append(addrs, strings.TrimPrefix(strings.TrimSpace(lines[i+1]), "- "))
			}
		}
		// 3 storage nodes with two advertised addresses, 2 frontends with one.
		if len(addrs) != 8 {
			t.Fatalf("SLUICE_ADVERTISED_HOST=%q: %d advertised addresses, want 8: %v", host, len(addrs), addrs)
		}
		return addrs
	}
	for _, a := range advertised("192.0.2.10") {
		if !strings.HasPrefix(a, "192.0.2.10:") {
			t.Fatalf("with SLUICE_ADVERTISED_HOST=192.0.2.10 an address is %s", a)
		}
	}
	for _, a := range advertised("") {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("by default an address is %s", a)
		}
	}
}
