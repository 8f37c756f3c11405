package local

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/localcluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/libs/tlsconf"
)

// TestClusterOverTLS runs every service with the certificates make certs
// writes (tlsconf.Generate): the HTTP APIs, the Raft groups and the storage
// protocol over mutual TLS between services, the frontend's API over TLS
// without requiring client certificates. An SDK producer and a group
// consumer, and sluicectl, go through with the CA (and the client
// certificate where services require one): every record is read back exactly
// once in per-key order. A plaintext client and a client without a
// certificate are refused by the storage nodes and by metadata.
func TestClusterOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c, dir, caOnly := startTLSCluster(t)
	ca := filepath.Join(dir, tlsconf.CAFile)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	app, err := tlsconf.ClientFiles(ca, filepath.Join(dir, tlsconf.ClientCertFile), filepath.Join(dir, tlsconf.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	// The frontend's API: TLS with the CA alone.
	if _, err := cluster.NewClientTLS(c.FrontendURLs(), caOnly).CreateTopic(ctx, cluster.CreateTopicRequest{Name: "secure", Partitions: 2,
		ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	meta := cluster.NewClientTLS(c.MetadataURLs(), app)
	eventually(t, 60*time.Second, func() error {
		tp, err := meta.DescribeTopic(ctx, "secure")
		if err != nil {
			return err
		}
		for _, p := range tp.Partitions {
			if len(p.ISR) != 3 {
				return fmt.Errorf("ISRs never full over TLS: %+v", tp)
			}
		}
		return nil
	})

	l := sendOverTLS(t, ctx, c, caOnly, 10, 3000, ": produce over TLS", "secure")

	ccfg := client.DefaultConsumerConfig()
	ccfg.Metadata, ccfg.Offsets = c.MetadataURLs(), c.OffsetsURLs()
	ccfg.Group, ccfg.Topics, ccfg.AutoOffsetReset = "secure-readers", []string{"secure"}, client.OffsetResetEarliest
	ccfg.TLS = app
	loadcheck.CheckExactlyOnceInOrder(t, readValuesAs(t, ctx, ccfg, l.Sent), l)

	tlsArgs := []string{"--tls-ca", ca, "--tls-cert", filepath.Join(dir, tlsconf.ClientCertFile), "--tls-key", filepath.Join(dir, tlsconf.ClientKeyFile)}
	out, errOut, code := sluicectl(t, c, "", append(tlsArgs, "consume", "secure", "--partition", "0", "--from-beginning", "--exit-at-end")...)
	if code != 0 || strings.Count(out, "\n") == 0 {
		t.Fatalf("sluicectl consume over TLS: exit %d, %d lines, %s", code, strings.Count(out, "\n"), errOut)
	}
	if out, errOut, code := sluicectl(t, c, "", append(tlsArgs, "group", "describe", "secure-readers")...); code != 0 || !strings.Contains(out, "secure") {
		t.Fatalf("sluicectl group describe over TLS: exit %d: %s %s", code, out, errOut)
	}

	// Refusals: the storage protocol and metadata want a client certificate.
	snap, err := meta.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	storageCall := func(cfg *tls.Config) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := storageclient.DialTLS(cctx, snap.Nodes[0].ClientAddr(), "intruder", cfg)
		if err != nil {
			return err
		}
		defer conn.Close()
		var resp protocol.ListOffsetsResponse
		_, err = conn.Call(cctx, protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: "secure", Timestamp: protocol.TimestampLatest}, nil, &resp)
		return err
	}
	if err := storageCall(app); err != nil {
		t.Fatalf("the client certificate was refused by a storage node: %v", err)
	}
	if err := storageCall(nil); err == nil {
		t.Fatal("a storage node served a plaintext client")
	}
	if err := storageCall(caOnly); err == nil {
		t.Fatal("a storage node served a client without a certificate")
	}
	if _, err := cluster.NewClientTLS(c.MetadataURLs(), caOnly).Snapshot(ctx); err == nil {
		t.Fatal("metadata served a client without a certificate")
	}
	plain := strings.Replace(c.MetadataURLs()[0], "https://", "http://", 1)
	if resp, err := http.Get(plain + "/v1/cluster"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("metadata answered plain HTTP")
		}
	}
}

// TestStorageAuthorizesByCertificate runs storage nodes with -authorize: a
// consumer reading a storage node directly is the principal its client
// certificate names (sluice-certs -client NAME), and reads only the topics
// its consume ACLs name; the cluster's services (the node certificate)
// produce and replicate as before. Each refusal is TOPIC_AUTHORIZATION_FAILED
// and a log line.
func TestStorageAuthorizesByCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c, dir, caOnly := startTLSCluster(t, "-authorize")
	if err := tlsconf.IssueClient(dir, "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, tlsconf.CAFile)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice, err := tlsconf.ClientFiles(ca, filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	admin := cluster.NewClientTLS(c.FrontendURLs(), caOnly)
	for _, name := range []string{"mine", "theirs"} {
		if _, err := admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: name, Partitions: 1, ReplicationFactor: 3}); err != nil {
			t.Fatal(err)
		}
	}
	sendOverTLS(t, ctx, c, caOnly, 5, 200, ": the frontend produces with the node certificate, a service", "mine", "theirs")

	tlsArgs := []string{"--tls-ca", ca, "--tls-cert", filepath.Join(dir, tlsconf.ClientCertFile), "--tls-key", filepath.Join(dir, tlsconf.ClientKeyFile)}
	if _, errOut, code := sluicectl(t, c, "", append(tlsArgs, "user", "create", "alice")...); code != 0 {
		t.Fatalf("user create: %s", errOut)
	}
	if _, errOut, code := sluicectl(t, c, "", append(tlsArgs, "acl", "add", "--user", "alice", "--topic", "mine", "--operation", "consume")...); code != 0 {
		t.Fatalf("acl add: %s", errOut)
	}
	read := func(cfg *tls.Config, topic string) (int, error) {
		meta := client.NewMetadata(cluster.NewClientTLS(c.MetadataURLs(), cfg))
		pool := storageclient.NewPoolTLS("reader", cfg)
		defer pool.Close()
		r := client.NewPartitionReader(meta, pool, topic, 0, 0, client.ReaderConfig{MaxWait: 100 * time.Millisecond})
		n := 0
		for {
			recs, err := r.Fetch(ctx)
			if err != nil {
				return n, err
			}
			n += len(recs)
			if r.HighWatermark() >= 0 && r.Offset() >= r.HighWatermark() {
				return n, nil
			}
		}
	}
	eventually(t, 30*time.Second, func() error { // the storage nodes learn the ACL from their metadata watch
		if n, err := read(alice, "mine"); err != nil || n != 200 {
			return fmt.Errorf("alice reading mine: %d records, %v", n, err)
		}
		return nil
	})
	if _, err := read(alice, "theirs"); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed {
		t.Fatalf("alice reading theirs: %v; want TOPIC_AUTHORIZATION_FAILED", err)
	}
	app, err := tlsconf.ClientFiles(ca, filepath.Join(dir, tlsconf.ClientCertFile), filepath.Join(dir, tlsconf.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(app, "mine"); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed {
		t.Fatalf("a certificate naming no principal: %v; want TOPIC_AUTHORIZATION_FAILED", err)
	}
	denied := 0
	for i := 1; i <= 3; i++ {
		b, _ := os.ReadFile(c.Proc(fmt.Sprintf("storage-%d", i)).LogPath)
		denied += strings.Count(string(b), `"request denied"`)
	}
	if denied < 2 {
		t.Fatalf("%d denials logged by the storage nodes", denied)
	}
}

// startTLSCluster writes a CA and certificates as make certs does and starts
// a cluster whose services all use them (storage nodes with storageExtra
// too). It returns the certificates' directory and a client configuration
// that trusts the CA and has no certificate of its own.
func startTLSCluster(t *testing.T, storageExtra ...string) (*localcluster.Cluster, string, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := tlsconf.Generate(dir, tlsconf.DefaultHosts, time.Hour); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, tlsconf.CAFile)
	node := []string{"-tls-cert", filepath.Join(dir, tlsconf.NodeCertFile), "-tls-key", filepath.Join(dir, tlsconf.NodeKeyFile), "-tls-ca", ca}
	c := startClusterConfig(t, localcluster.Config{Storage: 3, TLS: true,
		Extra: map[string][]string{"metadata": node, "storage": append(slices.Clone(node), storageExtra...), "frontend": node, "offsets": node}})
	caOnly, err := tlsconf.ClientFiles(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return c, dir, caOnly
}

// sendOverTLS sends n keyed records (over keys keys) to each topic through
// the frontends with an SDK producer using cfg, and requires every one
// acknowledged (what says how).
func sendOverTLS(t *testing.T, ctx context.Context, c *localcluster.Cluster, cfg *tls.Config, keys, n int, what string, topics ...string) *loadcheck.KeyedLoad {
	t.Helper()
	pcfg := client.DefaultProducerConfig()
	pcfg.Frontends, pcfg.TLS, pcfg.Linger = c.FrontendURLs(), cfg, 2*time.Millisecond
	p, err := client.NewProducer(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	l := loadcheck.NewKeyedLoad()
	for _, topic := range topics {
		l.SendN(t, p, topic, keys, n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, what)
	return l
}
