package local

import (
	"context"
	"crypto/tls"
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

// TestStorageProtocolOverTLS runs the storage protocol over mutual TLS
// (certificates from tlsconf.Generate, as make certs writes them): produce
// through the frontend, replication between the storage nodes, a group
// consumer and sluicectl reading with the client certificate; every record
// is read back exactly once in per-key order. A plaintext client and a TLS
// client without a certificate are refused.
func TestStorageProtocolOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	dir := t.TempDir()
	if err := tlsconf.Generate(dir, tlsconf.DefaultHosts, time.Hour); err != nil {
		t.Fatal(err)
	}
	node := []string{"-tls-cert", filepath.Join(dir, tlsconf.NodeCertFile), "-tls-key", filepath.Join(dir, tlsconf.NodeKeyFile),
		"-tls-ca", filepath.Join(dir, tlsconf.CAFile)}
	c := startClusterConfig(t, localcluster.Config{Storage: 3, Extra: map[string][]string{"storage": node, "frontend": node, "offsets": node}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Created through the frontend and waited for through metadata: the
	// test's own storage helpers speak plain TCP.
	if _, err := cluster.NewClient([]string{c.FrontendURL()}).CreateTopic(ctx, cluster.CreateTopicRequest{Name: "secure", Partitions: 2,
		ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, ctx, c, "secure", 3)

	p := quietProducer(t, c.FrontendURLs())
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, "secure", 10, 3000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": produce through a frontend speaking TLS to the storage nodes")

	app, err := tlsconf.ClientFiles(filepath.Join(dir, tlsconf.CAFile), filepath.Join(dir, tlsconf.ClientCertFile), filepath.Join(dir, tlsconf.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ccfg := client.DefaultConsumerConfig()
	ccfg.Metadata, ccfg.Offsets = c.MetadataURLs(), c.OffsetsURLs()
	ccfg.Group, ccfg.Topics, ccfg.AutoOffsetReset = "secure-readers", []string{"secure"}, client.OffsetResetEarliest
	ccfg.TLS = app
	loadcheck.CheckExactlyOnceInOrder(t, readValuesAs(t, ctx, ccfg, l.Sent), l)

	out, errOut, code := sluicectl(t, c, "", "--tls-ca", filepath.Join(dir, tlsconf.CAFile), "--tls-cert", filepath.Join(dir, tlsconf.ClientCertFile),
		"--tls-key", filepath.Join(dir, tlsconf.ClientKeyFile), "consume", "secure", "--partition", "0", "--from-beginning", "--exit-at-end")
	if code != 0 || strings.Count(out, "\n") == 0 {
		t.Fatalf("sluicectl consume over TLS: exit %d, %d lines, %s", code, strings.Count(out, "\n"), errOut)
	}

	snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addr := snap.Nodes[0].ClientAddr()
	call := func(cfg *tls.Config) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := storageclient.DialTLS(cctx, addr, "intruder", cfg)
		if err != nil {
			return err
		}
		defer conn.Close()
		var resp protocol.ListOffsetsResponse
		_, err = conn.Call(cctx, protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: "secure", Timestamp: protocol.TimestampLatest}, nil, &resp)
		return err
	}
	if err := call(app); err != nil {
		t.Fatalf("the client certificate was refused: %v", err)
	}
	if err := call(nil); err == nil {
		t.Fatal("a plaintext client was served")
	}
	anon, err := tlsconf.ClientFiles(filepath.Join(dir, tlsconf.CAFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := call(anon); err == nil {
		t.Fatal("a TLS client without a certificate was served")
	}
}
