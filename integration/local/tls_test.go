package local

import (
	"context"
	"crypto/tls"
	"net/http"
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
