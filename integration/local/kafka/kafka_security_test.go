package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/tlsconf"
)

// TestKafkaTLSAndSASL runs the Kafka listeners over TLS with SASL required
// (PLAIN, SCRAM-SHA-256 and -512) on frontends and storage nodes: a
// principal made with sluicectl authenticates with its token as password
// (franz-go with each mechanism, kcat with SCRAM), produces to and consumes
// from the topic its ACLs name, and is refused the other with
// TOPIC_AUTHORIZATION_FAILED, which the frontend logs; that topic is not
// even listed to it. A wrong password fails SASL authentication. A SCRAM
// user set with Kafka's AlterUserScramCredentials authenticates, is
// described, and loses its credential.
func TestKafkaTLSAndSASL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	saslFlags := []string{"-kafka-sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"}
	c, dir, caOnly := itest.StartTLSCluster(t, map[string][]string{"frontend": append([]string{"-require-auth"}, saslFlags...), "storage": saslFlags})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca := filepath.Join(dir, tlsconf.CAFile)
	ctl := []string{"--tls-ca", ca, "--tls-cert", filepath.Join(dir, tlsconf.ClientCertFile), "--tls-key", filepath.Join(dir, tlsconf.ClientKeyFile)}
	root, errOut, code := itest.Sluicectl(t, c, "", append(ctl, "user", "create", "root", "--admin")...)
	if code != 0 {
		t.Fatal(errOut)
	}
	app, errOut, code := itest.Sluicectl(t, c, "", append(ctl, "user", "create", "app")...)
	if code != 0 {
		t.Fatal(errOut)
	}
	root, app = strings.TrimSpace(root), strings.TrimSpace(app)
	for _, args := range [][]string{
		{"--token", root, "topic", "create", "allowed", "--partitions", "2", "--replication-factor", "3"},
		{"--token", root, "topic", "create", "refused", "--partitions", "1", "--replication-factor", "3"},
		{"acl", "add", "--user", "app", "--topic", "allowed", "--operation", "produce"},
		{"acl", "add", "--user", "app", "--topic", "allowed", "--operation", "consume"},
	} {
		testkit.Eventually(t, 30*time.Second, func() error { // the frontend learns principals from its watch
			if _, errOut, code := itest.Sluicectl(t, c, "", append(ctl, args...)...); code != 0 {
				return errors.New(errOut)
			}
			return nil
		})
	}
	client := func(m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		return itest.FranzClient(t, c, append([]kgo.Opt{kgo.DialTLSConfig(caOnly.Clone()), kgo.SASL(m), kgo.RequestRetries(2)}, opts...)...)
	}
	mechanisms := map[string]sasl.Mechanism{
		"SCRAM-SHA-256": scram.Auth{User: "app", Pass: app}.AsSha256Mechanism(),
		"SCRAM-SHA-512": scram.Auth{User: "app", Pass: app}.AsSha512Mechanism(),
		"PLAIN":         plain.Auth{User: "app", Pass: app}.AsMechanism(),
	}
	for name, m := range mechanisms {
		testkit.Eventually(t, 30*time.Second, func() error {
			return client(m).ProduceSync(ctx, &kgo.Record{Topic: "allowed", Value: []byte(name)}).FirstErr()
		})
	}
	cl := client(mechanisms["SCRAM-SHA-256"])
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "refused", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to a topic without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tp := range md.Topics {
		listed = append(listed, *tp.Topic)
	}
	if !slices.Contains(listed, "allowed") || slices.Contains(listed, "refused") {
		t.Fatalf("Metadata lists %v to app: want allowed and not refused", listed)
	}

	// Consuming goes through the storage nodes' listeners, SASL included.
	cons := client(mechanisms["SCRAM-SHA-512"], kgo.ConsumeTopics("allowed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	for got < len(mechanisms) {
		fs := cons.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of allowed", got, len(mechanisms))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("consume allowed: %v", errs)
		}
		got += fs.NumRecords()
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "refused"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -2
	rt.Partitions = append(rt.Partitions, rp)
	lo.Topics = append(lo.Topics, rt)
	shards := cl.RequestSharded(ctx, lo)
	for _, sh := range shards {
		if errors.Is(sh.Err, kerr.TopicAuthorizationFailed) {
			continue // franz-go's metadata look-up was refused already
		}
		if sh.Err != nil {
			t.Fatal(sh.Err)
		}
		if code := sh.Resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("ListOffsets of refused: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
		}
	}

	// Groups: app reads allowed in a group, and its commits land; a commit
	// of refused is refused; a principal without any consume right cannot
	// use groups at all.
	member := client(mechanisms["PLAIN"], kgo.ConsumerGroup("appgroup"), kgo.ConsumeTopics("allowed"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for got := 0; got < len(mechanisms); {
		gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
		fs := member.PollFetches(gctx)
		gcancel()
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("group consume of allowed: %v", errs)
		}
		got += fs.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group commit over SASL: %v", err)
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "appgroup")
	if err != nil || offs.Error() != nil {
		t.Fatalf("OffsetFetch: %v, %v", err, offs.Error())
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != int64(len(mechanisms)) {
		t.Fatalf("committed offsets of appgroup sum to %d, want %d", committed, len(mechanisms))
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "lonely", -1
	admin := client(plain.Auth{User: "root", Pass: root}.AsMechanism())
	refused, err := kadm.NewClient(admin).ListTopics(ctx, "refused")
	if err != nil {
		t.Fatal(err)
	}
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic, ot.TopicID = "refused", refused["refused"].ID // v10 names topics by id
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	if resp, err := cl.Request(ctx, oc); err != nil {
		t.Fatal(err)
	} else if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("commit of refused: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	noacl, errOut, code := itest.Sluicectl(t, c, "", append(ctl, "user", "create", "noacl")...)
	if code != 0 {
		t.Fatal(errOut)
	}
	stranger := client(plain.Auth{User: "noacl", Pass: strings.TrimSpace(noacl)}.AsMechanism())
	testkit.Eventually(t, 30*time.Second, func() error {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = []string{"appgroup"}
		resp, err := fc.RequestWith(ctx, stranger)
		if err != nil {
			return err
		}
		if code := resp.Coordinators[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
			return fmt.Errorf("FindCoordinator for a principal without consume rights: error %d, want GROUP_AUTHORIZATION_FAILED", code)
		}
		return nil
	})

	// A wrong password.
	bad := client(scram.Auth{User: "app", Pass: strings.Repeat("0", 64)}.AsSha256Mechanism())
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(bctx, bad); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// A SCRAM user made with Kafka's admin API (franz-go's kadm salts the
	// password itself) authenticates, is described, and is gone with its
	// credential.
	radm := kadm.NewClient(admin)
	made, err := radm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kafka-made", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "made-by-kadm"}})
	if err != nil || made.Error() != nil {
		t.Fatalf("AlterUserScramCredentials: %v %+v", err, made)
	}
	testkit.Eventually(t, 30*time.Second, func() error { // the storage node's watch too, for the listener it dials
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client(scram.Auth{User: "kafka-made", Pass: "made-by-kadm"}.AsSha512Mechanism()))
		return err
	})
	described, err := radm.DescribeUserSCRAMs(ctx, "kafka-made")
	if err != nil || described["kafka-made"].Err != nil || len(described["kafka-made"].CredInfos) != 1 || described["kafka-made"].CredInfos[0].Mechanism != kadm.ScramSha512 {
		t.Fatalf("DescribeUserScramCredentials: %v %+v", err, described)
	}
	if gone, err := radm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "kafka-made", Mechanism: kadm.ScramSha512}}, nil); err != nil || gone.Error() != nil {
		t.Fatalf("deleting the credential: %v %+v", err, gone)
	}
	if described, err := radm.DescribeUserSCRAMs(ctx, "kafka-made"); err != nil || !errors.Is(described["kafka-made"].Err, kerr.ResourceNotFound) {
		t.Fatalf("DescribeUserScramCredentials after the deletion: %v %+v", err, described)
	}

	// kcat (librdkafka) with SCRAM over TLS sees the allowed topic only.
	{
		kcat := itest.NeedTool(t, "kcat", "kcat")
		out := run(t, time.Minute, "", kcat, "-b", c.KafkaAddrs()[0], "-L", "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+ca,
			"-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=app", "-X", "sasl.password="+app)
		if !strings.Contains(out, `topic "allowed"`) || strings.Contains(out, `topic "refused"`) {
			t.Fatalf("kcat -L over SASL_SSL:\n%s", out)
		}
	}

	b, _ := os.ReadFile(c.Proc("frontend").LogPath)
	if !strings.Contains(string(b), `"kafka request denied"`) || !strings.Contains(string(b), "refused") {
		t.Fatal("the frontend did not log the refusal")
	}
}
