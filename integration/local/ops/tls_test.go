package ops

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
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
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c, dir, caOnly := startTLSCluster(t, false)
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
	testkit.Eventually(t, 60*time.Second, func() error {
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
	out, errOut, code := itest.Sluicectl(t, c, "", append(tlsArgs, "consume", "secure", "--partition", "0", "--from-beginning", "--exit-at-end")...)
	if code != 0 || strings.Count(out, "\n") == 0 {
		t.Fatalf("sluicectl consume over TLS: exit %d, %d lines, %s", code, strings.Count(out, "\n"), errOut)
	}
	if out, errOut, code := itest.Sluicectl(t, c, "", append(tlsArgs, "group", "describe", "secure-readers")...); code != 0 || !strings.Contains(out, "secure") {
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
		_, err = conn.Call(cctx, protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: "secure", Timestamp: protocol.TimestampLatest, CurrentLeaderEpoch: -1}, nil, &resp)
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
	if _, err := groups.NewClientTLS(c.OffsetsURLs(), caOnly).List(ctx); err == nil {
		t.Fatal("the offsets service served a client without a certificate")
	}
	if _, err := groups.NewClientTLS(c.OffsetsURLs(), app).List(ctx); err != nil {
		t.Fatalf("the offsets service refused the client certificate: %v", err)
	}
	plain := strings.Replace(c.MetadataURLs()[0], "https://", "http://", 1)
	if resp, err := http.Get(plain + "/v1/cluster"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("metadata answered plain HTTP")
		}
	}
}

// TestCertificateAuthorization runs the storage nodes, metadata and offsets
// with -authorize: a client is the principal its certificate names
// (sluice-certs -client NAME) and may do what its ACLs say; the cluster's
// services (the node certificate) may do everything, which is also how the
// first admin is made. Each service refuses, with the Kafka authorization
// code and a "request denied" log line:
//
//   - metadata: admin requests (users, topics) from a non-admin, service
//     requests (heartbeats) from anyone else, and reading the model from a
//     name no principal has; a principal reads the model without token
//     hashes, principals or ACLs;
//   - offsets: group calls on topics without a consume ACL, any call on a
//     group that reads such a topic, deleting a group without admin
//     rights, and a name no principal has;
//   - storage: fetches without the consume ACL, produce without the produce
//     ACL, follower fetches from anyone but a service.
//
// Allowed, each checked: an SDK group consumer with alice's certificate
// reads her topic in full (metadata, offsets and storage), and the admin
// certificate manages users and ACLs with sluicectl.
func TestCertificateAuthorization(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c, dir, caOnly := startTLSCluster(t, true)
	for _, name := range []string{"alice", "bob"} {
		if err := tlsconf.IssueClient(dir, name, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	ca := filepath.Join(dir, tlsconf.CAFile)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	certs := func(name string) (*tls.Config, []string) {
		cert, key := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		cfg, err := tlsconf.ClientFiles(ca, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, []string{"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key}
	}
	alice, _ := certs("alice")
	bob, _ := certs("bob")          // no principal has this name
	app, appArgs := certs("client") // sluice-client: no principal yet
	_, nodeArgs := certs("node")    // sluice-node: a service

	frontend := cluster.NewClientTLS(c.FrontendURLs(), caOnly)
	for _, name := range []string{"mine", "theirs"} {
		if _, err := frontend.CreateTopic(ctx, cluster.CreateTopicRequest{Name: name, Partitions: 1, ReplicationFactor: 3}); err != nil {
			t.Fatal(err)
		}
	}
	sendOverTLS(t, ctx, c, caOnly, 5, 200, ": the frontend produces with the node certificate, a service", "mine", "theirs")

	// No principal is admin yet: sluice-client may not make one; a service
	// may, and then sluice-client manages the rest.
	ctl := func(args ...string) (string, string, int) { return itest.Sluicectl(t, c, "", args...) }
	if _, errOut, code := ctl(append(appArgs, "user", "create", "alice")...); code == 0 || !strings.Contains(errOut, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("user create by a name no principal has: exit %d: %s", code, errOut)
	}
	if _, errOut, code := ctl(append(nodeArgs, "user", "create", "sluice-client", "--admin")...); code != 0 {
		t.Fatalf("user create by a service: %s", errOut)
	}
	for _, args := range [][]string{{"user", "create", "alice"}, {"acl", "add", "--user", "alice", "--topic", "mine", "--operation", "consume"}} {
		if _, errOut, code := ctl(append(appArgs, args...)...); code != 0 {
			t.Fatalf("%v by the admin: %s", args, errOut)
		}
	}
	if out, errOut, code := ctl(append(appArgs, "user", "list")...); code != 0 || !strings.Contains(out, "alice") {
		t.Fatalf("user list by the admin: exit %d: %s %s", code, out, errOut)
	}

	// Metadata.
	meta := cluster.NewClientTLS(c.MetadataURLs(), alice)
	snap, err := meta.Snapshot(ctx)
	if err != nil {
		t.Fatalf("alice reading the model: %v", err)
	}
	if len(snap.Topics) < 2 || snap.Principals != nil || snap.ACLs != nil {
		t.Fatalf("alice's view of the model: %d topics, principals %v, ACLs %v", len(snap.Topics), snap.Principals, snap.ACLs)
	}
	if adminView, err := cluster.NewClientTLS(c.MetadataURLs(), app).Snapshot(ctx); err != nil || len(adminView.Principals) != 2 || adminView.Principals[0].TokenSHA256 != "" {
		t.Fatalf("the admin's view of the principals: %+v, %v", adminView, err)
	}
	for what, want := range map[string]struct {
		err  error
		code protocol.Code
	}{
		"alice creating a topic": {func() error {
			_, err := meta.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "hers", Partitions: 1, ReplicationFactor: 1})
			return err
		}(), protocol.TopicAuthorizationFailed}, // no create ACL on it, as Kafka answers CreateTopics
		"alice making herself admin": {meta.SetPrincipal(ctx, cluster.Principal{Name: "alice", TokenSHA256: strings.Repeat("0", 64), Admin: true}, false),
			protocol.ClusterAuthorizationFailed},
		"alice heartbeating as a storage node":       {meta.Heartbeat(ctx, cluster.HeartbeatRequest{ID: 1}), protocol.ClusterAuthorizationFailed},
		"alice claiming to be relayed for the admin": {spoofRelay(ctx, c.MetadataURLs()[0], alice), protocol.TopicAuthorizationFailed},
	} {
		if protocol.CodeOf(want.err) != want.code {
			t.Errorf("%s: %v; want %v", what, want.err, want.code)
		}
	}

	// Offsets, through the SDK consumer first: alice reads her topic.
	ccfg := client.DefaultConsumerConfig()
	ccfg.Metadata, ccfg.Offsets, ccfg.TLS = c.MetadataURLs(), c.OffsetsURLs(), alice
	ccfg.Group, ccfg.Topics, ccfg.AutoOffsetReset = "alice-readers", []string{"mine"}, client.OffsetResetEarliest
	testkit.Eventually(t, 30*time.Second, func() error { // every service learns the ACL from its metadata watch
		return consumeAll(ctx, ccfg, 200)
	})
	ccfg.Group, ccfg.Topics = "alice-snooping", []string{"theirs"}
	if err := consumeAll(ctx, ccfg, 1); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed {
		t.Fatalf("alice's consumer of theirs: %v; want TOPIC_AUTHORIZATION_FAILED from Poll", err)
	}
	coord := groups.NewClientTLS(c.OffsetsURLs(), alice)
	if err := groups.NewClientTLS(c.OffsetsURLs(), app).Commit(ctx, "their-readers",
		groups.CommitRequest{Offsets: []groups.Offset{{Topic: "theirs", Partition: 0, Offset: 1}}}); err != nil {
		t.Fatalf("the admin committing for their-readers: %v", err)
	}
	for what, want := range map[string]struct {
		err  error
		code protocol.Code
	}{
		"alice committing on theirs": {coord.Commit(ctx, "alice-readers", groups.CommitRequest{Offsets: []groups.Offset{{Topic: "theirs", Partition: 0, Offset: 1}}}),
			protocol.TopicAuthorizationFailed},
		"alice deleting a group": {coord.Delete(ctx, "alice-readers"), protocol.GroupAuthorizationFailed},
		"alice describing a group that reads theirs": {func() error {
			_, err := coord.Describe(ctx, "their-readers")
			return err
		}(), protocol.GroupAuthorizationFailed},
		"a name no principal has listing groups": {func() error {
			_, err := groups.NewClientTLS(c.OffsetsURLs(), bob).List(ctx)
			return err
		}(), protocol.GroupAuthorizationFailed},
	} {
		if protocol.CodeOf(want.err) != want.code {
			t.Errorf("%s: %v; want %v", what, want.err, want.code)
		}
	}
	if offs, err := coord.Offsets(ctx, "alice-readers", "mine"); err != nil || len(offs) != 1 || offs[0].Offset != 200 {
		t.Fatalf("alice's committed offsets: %+v, %v", offs, err)
	}

	// Storage, read directly.
	read := func(cfg *tls.Config, topic string) (int, error) {
		pool := storageclient.NewPoolTLS("reader", cfg)
		defer pool.Close()
		r := client.NewPartitionReader(client.NewMetadata(cluster.NewClientTLS(c.MetadataURLs(), cfg)), pool, topic, 0, 0,
			client.ReaderConfig{MaxWait: 100 * time.Millisecond})
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
	if n, err := read(alice, "mine"); err != nil || n != 200 {
		t.Fatalf("alice reading mine from storage: %d records, %v", n, err)
	}
	if _, err := read(alice, "theirs"); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed {
		t.Fatalf("alice reading theirs from storage: %v; want TOPIC_AUTHORIZATION_FAILED", err)
	}

	denied := map[string]int{} // per service: which replica refused depends on leaders and client order
	for _, p := range c.Procs {
		b, _ := os.ReadFile(p.LogPath)
		denied[strings.TrimRight(p.Name, "-0123456789")] += strings.Count(string(b), `"request denied"`)
	}
	for _, svc := range []string{"metadata", "offsets", "storage"} {
		if denied[svc] == 0 {
			t.Errorf("no refusal logged by %s: %v", svc, denied)
		}
	}
}

// spoofRelay sends a topic creation to metadata as a relay on behalf of
// the admin sluice-client would, with cfg's certificate, and returns the
// refusal.
func spoofRelay(ctx context.Context, url string, cfg *tls.Config) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/topics",
		strings.NewReader(`{"name":"spoofed","partitions":1,"replication_factor":1}`))
	if err != nil {
		return err
	}
	req.Header.Set(service.PrincipalHeader, "sluice-client")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body cluster.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	return protocol.Code(body.ErrorCode).Err("HTTP %d: %s", resp.StatusCode, body.Error)
}

// consumeAll polls a group consumer until it has read n records and
// committed them, and returns the first error Poll or the commit returns.
func consumeAll(ctx context.Context, cfg client.ConsumerConfig, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cs, err := client.NewConsumer(cfg)
	if err != nil {
		return err
	}
	defer cs.Close(ctx)
	for got := 0; got < n; {
		recs, err := cs.Poll(ctx)
		if err != nil {
			return err
		}
		got += len(recs)
	}
	return cs.Commit(ctx)
}

// startTLSCluster writes a CA and certificates as make certs does and starts
// a cluster whose services all use them (storage, metadata and offsets with
// -authorize when authorize). It returns the certificates' directory and a
// client configuration that trusts the CA and has no certificate of its own.
func startTLSCluster(t *testing.T, authorize bool) (*localcluster.Cluster, string, *tls.Config) {
	t.Helper()
	var extra []string
	if authorize {
		extra = []string{"-authorize"}
	}
	return itest.StartTLSCluster(t, map[string][]string{"metadata": extra, "storage": extra, "offsets": extra})
}

// sendOverTLS sends n keyed records (over keys keys) to each topic through
// the frontends with an SDK producer using cfg, and requires every one
// acknowledged (what says how).
func sendOverTLS(t *testing.T, ctx context.Context, c *localcluster.Cluster, cfg *tls.Config, keys, n int, what string, topics ...string) *loadcheck.KeyedLoad {
	t.Helper()
	pcfg := client.DefaultProducerConfig()
	pcfg.Frontends, pcfg.TLS, pcfg.Linger = c.FrontendURLs(), cfg, 2*time.Millisecond
	return loadcheck.Produce(t, ctx, pcfg, keys, n, what, topics...)
}
