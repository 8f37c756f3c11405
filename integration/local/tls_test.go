package local

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	dir := t.TempDir()
	if err := tlsconf.Generate(dir, tlsconf.DefaultHosts, time.Hour); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, tlsconf.CAFile)
	node := []string{"-tls-cert", filepath.Join(dir, tlsconf.NodeCertFile), "-tls-key", filepath.Join(dir, tlsconf.NodeKeyFile), "-tls-ca", ca}
	c := startClusterConfig(t, localcluster.Config{Storage: 3, TLS: true,
		Extra: map[string][]string{"metadata": node, "storage": node, "frontend": node, "offsets": node}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	app, err := tlsconf.ClientFiles(ca, filepath.Join(dir, tlsconf.ClientCertFile), filepath.Join(dir, tlsconf.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caOnly, err := tlsconf.ClientFiles(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// The frontend's API: TLS with the CA alone.
	if _, err := cluster.NewClientTLS(c.FrontendURLs(), caOnly).CreateTopic(ctx, cluster.CreateTopicRequest{Name: "secure", Partitions: 2,
		ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	meta := cluster.NewClientTLS(c.MetadataURLs(), app)
	deadline := time.Now().Add(60 * time.Second)
	for {
		tp, err := meta.DescribeTopic(ctx, "secure")
		full := err == nil
		for _, p := range tp.Partitions {
			full = full && len(p.ISR) == 3
		}
		if full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISRs never full over TLS: %+v %v", tp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	pcfg := client.DefaultProducerConfig()
	pcfg.Frontends, pcfg.TLS, pcfg.Linger = c.FrontendURLs(), caOnly, 2*time.Millisecond
	p, err := client.NewProducer(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, "secure", 10, 3000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": produce over TLS")

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
	dir := t.TempDir()
	if err := tlsconf.Generate(dir, tlsconf.DefaultHosts, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := tlsconf.IssueClient(dir, "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, tlsconf.CAFile)
	node := []string{"-tls-cert", filepath.Join(dir, tlsconf.NodeCertFile), "-tls-key", filepath.Join(dir, tlsconf.NodeKeyFile), "-tls-ca", ca}
	c := startClusterConfig(t, localcluster.Config{Storage: 3, TLS: true,
		Extra: map[string][]string{"metadata": node, "storage": append(append([]string{}, node...), "-authorize"), "frontend": node, "offsets": node}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	caOnly, err := tlsconf.ClientFiles(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
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
	pcfg := client.DefaultProducerConfig()
	pcfg.Frontends, pcfg.TLS, pcfg.Linger = c.FrontendURLs(), caOnly, 2*time.Millisecond
	p, err := client.NewProducer(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, "mine", 5, 200)
	l.SendN(t, p, "theirs", 5, 200)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": the frontend produces with the node certificate, a service")

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
	deadline := time.Now().Add(30 * time.Second)
	for { // the storage nodes learn the ACL from their metadata watch
		n, err := read(alice, "mine")
		if err == nil && n == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice reading mine: %d records, %v", n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
