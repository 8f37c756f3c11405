package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/tlsconf"
)

// TestACLMatrix: Kafka's LITERAL and PREFIXED patterns and ALLOW and DENY
// bindings, created with franz-go's kadm, decide the same on the three
// paths: Kafka (franz-go over SASL PLAIN), HTTP (the frontend's API with a
// bearer token) and the SDK (sluicectl, which is built on it: its producer
// sends the token to the frontends, its consumer reads the storage nodes
// with ana's certificate). ana may
// consume the topics starting with team- but not team-secret (a deny wins
// over the prefixed allow), and produce everywhere but to the topics
// starting with oth, and read but not write hosted, by ACLs that name
// hosts (the clients are on 127.0.0.1); each case is checked per
// operation. A principal with DESCRIBE on a topic sees it and its offsets
// and reads nothing; CREATE and DELETE on a prefix let ana create and
// delete those topics alone.
// GROUP and
// TRANSACTIONAL_ID bindings decide which groups and transactional ids she
// may use, on the same paths, and her regex subscription matches only what
// she may read. A MATCH filter of DescribeAcls on team-secret finds the
// bindings that apply to it.
func TestACLMatrix(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sasl := []string{"-kafka-sasl-mechanisms", "PLAIN"}
	authz := []string{"-authorize"}
	c, dir, caOnly := itest.StartTLSCluster(t, map[string][]string{"frontend": append([]string{"-require-auth"}, sasl...),
		"storage": append(slices.Clone(authz), sasl...), "metadata": authz, "offsets": authz})
	if err := tlsconf.IssueClient(dir, "ana", time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// certs are sluicectl's TLS flags with a certificate: the node's (a
	// service) or ana's, whose common name is her principal at the storage
	// nodes, which the SDK consumer reads from.
	certs := func(name string) []string {
		return []string{"--tls-ca", filepath.Join(dir, tlsconf.CAFile), "--tls-cert", filepath.Join(dir, name+".pem"), "--tls-key", filepath.Join(dir, name+"-key.pem")}
	}
	root := strings.TrimSpace(itest.MustSluicectl(t, c, append(certs("node"), "user", "create", "root", "--admin")...))
	ana := strings.TrimSpace(itest.MustSluicectl(t, c, append(certs("node"), "user", "create", "ana")...))
	as := func(token, stdin string, args ...string) (string, string, int) {
		return itest.Sluicectl(t, c, stdin, append(append(certs("ana"), "--token", token), args...)...)
	}
	for _, topic := range []string{"team-a", "team-secret", "other", "hosted"} {
		testkit.Eventually(t, 30*time.Second, func() error { // the frontend learns the principals from its watch
			if _, errOut, code := as(root, "", "topic", "create", topic, "--partitions", "1", "--replication-factor", "1"); code != 0 {
				return errors.New(errOut)
			}
			return nil
		})
		if _, errOut, code := as(root, "record\n", "produce", topic); code != 0 {
			t.Fatalf("root producing to %s: %s", topic, errOut)
		}
	}
	kafkaAs := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		return itest.FranzClient(t, c, append([]kgo.Opt{kgo.DialTLSConfig(caOnly.Clone()), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()), kgo.RequestRetries(2)}, opts...)...)
	}
	adm := kadm.NewClient(kafkaAs("root", root))
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Topics("team-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:ana").Operations(kadm.OpRead),
		kadm.NewACLs().Topics("team-secret").ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:ana").Operations(kadm.OpRead),
		kadm.NewACLs().Topics("*").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:ana").Operations(kadm.OpWrite),
		kadm.NewACLs().Topics("oth").ResourcePatternType(kadm.ACLPatternPrefixed).Deny("User:ana").Operations(kadm.OpWrite),
		kadm.NewACLs().Topics("hosted").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:ana").AllowHosts("127.0.0.1").Operations(kadm.OpRead),
		kadm.NewACLs().Topics("hosted").ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:ana").DenyHosts("10.9.9.9").Operations(kadm.OpRead),
		kadm.NewACLs().Topics("hosted").ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:ana").DenyHosts("127.0.0.1").Operations(kadm.OpWrite),
		kadm.NewACLs().Topics("ana-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:ana").Operations(kadm.OpCreate, kadm.OpDelete, kadm.OpAlter,
			kadm.OpAlterConfigs),
		kadm.NewACLs().Groups("ana-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:ana").Operations(kadm.OpRead, kadm.OpDelete),
		kadm.NewACLs().Groups("ana-private").ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:ana").Operations(kadm.OpRead),
		kadm.NewACLs().Groups("ana-keep").ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:ana").Operations(kadm.OpDelete),
		kadm.NewACLs().TransactionalIDs("ana-tx").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:ana").Operations(kadm.OpWrite),
	} {
		testkit.Eventually(t, 30*time.Second, func() error {
			rs, err := adm.CreateACLs(ctx, b)
			if err == nil && rs[0].Err != nil {
				err = rs[0].Err
			}
			return err
		})
	}
	testkit.Eventually(t, 30*time.Second, func() error { // the frontend answers from its model, which follows metadata
		described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("team-secret").ResourcePatternType(kadm.ACLPatternMatch).
			Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
		if err != nil {
			return err
		}
		var bindings []string
		for _, r := range described {
			for _, d := range r.Described {
				bindings = append(bindings, fmt.Sprintf("%s/%s/%s", d.Name, d.Pattern, d.Permission))
			}
		}
		slices.Sort(bindings)
		if want := []string{"*/LITERAL/ALLOW", "team-/PREFIXED/ALLOW", "team-secret/LITERAL/DENY"}; !slices.Equal(bindings, want) {
			return fmt.Errorf("DescribeAcls MATCH team-secret: %v, want %v (every binding that applies to it)", bindings, want)
		}
		return nil
	})
	if out := itest.MustSluicectl(t, c, append(certs("node"), "acl", "list")...); !strings.Contains(out, "prefixed") || !strings.Contains(out, "deny") {
		t.Fatalf("sluicectl acl list:\n%s", out)
	}

	https := &http.Client{Transport: &http.Transport{TLSClientConfig: caOnly.Clone()}}
	httpAs := func(token, method, path, body string) (int, string) {
		req, err := http.NewRequest(method, c.FrontendURL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := https.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	httpCall := func(method, path, body string) int {
		status, _ := httpAs(ana, method, path, body)
		return status
	}
	kafkaRead := func(topic string) error {
		cl := kafkaAs("ana", ana, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
		defer pcancel()
		for {
			fs := cl.PollFetches(pctx)
			if errs := fs.Errors(); len(errs) > 0 && !errors.Is(errs[0].Err, context.DeadlineExceeded) {
				return errs[0].Err
			}
			if fs.NumRecords() > 0 {
				return nil
			}
			if pctx.Err() != nil {
				return pctx.Err()
			}
		}
	}
	for _, tc := range []struct {
		topic, op string
		allowed   bool
	}{
		{"team-a", "consume", true},
		{"team-secret", "consume", false}, // the literal deny wins over the prefixed allow
		{"other", "consume", false},       // no allow
		{"team-a", "produce", true},
		{"team-secret", "produce", true}, // the deny is of consume only
		{"other", "produce", false},      // the prefixed deny of oth
		{"hosted", "consume", true},      // allowed from 127.0.0.1, where the clients are; denied from 10.9.9.9
		{"hosted", "produce", false},     // denied from 127.0.0.1, over the allow of *
	} {
		name := tc.op + " " + tc.topic
		testkit.Eventually(t, 30*time.Second, func() error { // every service learns the ACLs from its watch
			var kafkaErr error
			var status int
			var sdkCode int
			var sdkErr string
			if tc.op == "consume" {
				kafkaErr = kafkaRead(tc.topic)
				status = httpCall(http.MethodGet, "/v1/topics/"+tc.topic+"/partitions/0/records?offset=earliest&max_wait_ms=0", "")
				_, sdkErr, sdkCode = as(ana, "", "consume", tc.topic, "--from-beginning", "--exit-at-end")
			} else {
				kafkaErr = kafkaAs("ana", ana).ProduceSync(ctx, &kgo.Record{Topic: tc.topic, Value: []byte("k")}).FirstErr()
				status = httpCall(http.MethodPost, "/v1/topics/"+tc.topic+"/records", `{"records":[{"value":"h"}]}`)
				_, sdkErr, sdkCode = as(ana, "s\n", "produce", tc.topic)
			}
			if tc.allowed {
				if kafkaErr != nil || status != http.StatusOK || sdkCode != 0 {
					return fmt.Errorf("%s allowed: Kafka %v, HTTP %d, SDK exit %d %s", name, kafkaErr, status, sdkCode, sdkErr)
				}
				return nil
			}
			if !errors.Is(kafkaErr, kerr.TopicAuthorizationFailed) || status != http.StatusForbidden || sdkCode == 0 || !strings.Contains(sdkErr, "TOPIC_AUTHORIZATION_FAILED") {
				return fmt.Errorf("%s refused: Kafka %v, HTTP %d, SDK exit %d %s", name, kafkaErr, status, sdkCode, sdkErr)
			}
			return nil
		})
	}

	// Groups: ana may use the groups starting with ana-, but not
	// ana-private, over Kafka, HTTP and the SDK; transactional ids: ana-tx
	// alone.
	for _, tc := range []struct {
		group   string
		allowed bool
	}{{"ana-readers", true}, {"ana-private", false}, {"bob-readers", false}} {
		testkit.Eventually(t, 30*time.Second, func() error {
			committed, kafkaErr := kadm.NewClient(kafkaAs("ana", ana)).CommitOffsets(ctx, tc.group, kadm.OffsetsFromRecords(kgo.Record{Topic: "team-a"}))
			if kafkaErr == nil {
				kafkaErr = committed.Error()
			}
			status := httpCall(http.MethodPost, "/v1/groups/"+tc.group+"/offsets", `{"offsets":[{"topic":"team-a","partition":0,"offset":1}]}`)
			_, sdkErr, sdkCode := as(ana, "", "consume", "team-a", "--group", tc.group, "--from-beginning", "--exit-at-end")
			if tc.allowed {
				if kafkaErr != nil || status != http.StatusOK || sdkCode != 0 {
					return fmt.Errorf("group %s allowed: Kafka %v, HTTP %d, SDK exit %d %s", tc.group, kafkaErr, status, sdkCode, sdkErr)
				}
				return nil
			}
			if !errors.Is(kafkaErr, kerr.GroupAuthorizationFailed) || status != http.StatusForbidden || sdkCode == 0 || !strings.Contains(sdkErr, "GROUP_AUTHORIZATION_FAILED") {
				return fmt.Errorf("group %s refused: Kafka %v, HTTP %d, SDK exit %d %s", tc.group, kafkaErr, status, sdkCode, sdkErr)
			}
			return nil
		})
	}
	// Her DELETE on ana- lets her describe ana-private, whose READ is
	// denied her, as Kafka's DELETE implies DESCRIBE.
	if _, err := kadm.NewClient(kafkaAs("ana", ana)).FetchOffsets(ctx, "ana-private"); err != nil {
		t.Fatalf("ana fetching the offsets of ana-private: %v", err)
	}
	// mon, with DESCRIBE on other alone, sees it (Metadata, ListOffsets)
	// but may not read it, and sees no other topic.
	mon := strings.TrimSpace(itest.MustSluicectl(t, c, append(certs("node"), "user", "create", "mon")...))
	testkit.Eventually(t, 30*time.Second, func() error {
		rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("other").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:mon").Operations(kadm.OpDescribe))
		if err == nil && rs[0].Err != nil {
			err = rs[0].Err
		}
		return err
	})
	monAdm := kadm.NewClient(kafkaAs("mon", mon))
	testkit.Eventually(t, 30*time.Second, func() error {
		topics, err := monAdm.ListTopics(ctx)
		if err != nil {
			return err
		}
		if names := topics.Names(); len(names) != 1 || names[0] != "other" {
			return fmt.Errorf("mon's Metadata lists %v, want other alone", names)
		}
		ends, err := monAdm.ListEndOffsets(ctx, "other")
		if err != nil {
			return err
		}
		if o, ok := ends.Lookup("other", 0); !ok || o.Err != nil || o.Offset < 1 {
			return fmt.Errorf("mon's ListOffsets of other: %+v", o)
		}
		hidden, err := monAdm.ListEndOffsets(ctx, "team-a")
		if o, _ := hidden.Lookup("team-a", 0); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(o.Err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("mon's ListOffsets of team-a: %v %+v", err, o)
		}
		return nil
	})
	monRead := kafkaAs("mon", mon, kgo.ConsumeTopics("other"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
	fs := monRead.PollFetches(pctx)
	pcancel()
	if errs := fs.Errors(); len(errs) == 0 || !errors.Is(errs[0].Err, kerr.TopicAuthorizationFailed) || fs.NumRecords() > 0 {
		t.Fatalf("mon reading other: %d records, errors %v; want TOPIC_AUTHORIZATION_FAILED", fs.NumRecords(), errs)
	}

	// Listing groups shows ana hers alone, over HTTP and Kafka.
	if status, body := httpAs(root, http.MethodPost, "/v1/groups/bob-readers/offsets", `{"offsets":[{"topic":"team-a","partition":0,"offset":1}]}`); status != http.StatusOK {
		t.Fatalf("root committing for bob-readers: %d %s", status, body)
	}
	if status, body := httpAs(ana, http.MethodGet, "/v1/groups", ""); status != http.StatusOK || !strings.Contains(body, `"ana-readers"`) || strings.Contains(body, "bob-readers") {
		t.Fatalf("ana listing groups over HTTP: %d %s", status, body)
	}
	listed, err := kadm.NewClient(kafkaAs("ana", ana)).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["ana-readers"]; !ok || len(listed) != 1 {
		t.Fatalf("ana listing groups over Kafka: %v, want ana-readers alone", listed.Groups())
	}
	for _, tc := range []struct {
		id      string
		allowed bool
	}{{"ana-tx", true}, {"bob-tx", false}} {
		testkit.Eventually(t, 30*time.Second, func() error {
			tx := kafkaAs("ana", ana, kgo.TransactionalID(tc.id))
			err := tx.BeginTransaction()
			if err == nil {
				err = tx.ProduceSync(ctx, &kgo.Record{Topic: "team-a", Value: []byte(tc.id)}).FirstErr()
			}
			if err == nil {
				err = tx.EndTransaction(ctx, kgo.TryCommit)
			}
			switch {
			case tc.allowed && err != nil:
				return fmt.Errorf("transactional id %s allowed: %v", tc.id, err)
			case !tc.allowed && !errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
				return fmt.Errorf("transactional id %s refused: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", tc.id, err)
			}
			return nil
		})
	}

	// DESCRIBE alone on groups and transactional ids, as monitoring tools
	// are granted: mon reads ana's groups (and, with DESCRIBE on team-a,
	// their offsets) and ana-tx's state over Kafka and HTTP, lists only
	// those, and may neither commit for the groups nor read bob's.
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Topics("team-a").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:mon").Operations(kadm.OpDescribe),
		kadm.NewACLs().Groups("ana-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:mon").Operations(kadm.OpDescribe),
		kadm.NewACLs().TransactionalIDs("ana-tx").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:mon").Operations(kadm.OpDescribe),
	} {
		if rs, err := adm.CreateACLs(ctx, b); err != nil || rs[0].Err != nil {
			t.Fatalf("granting mon DESCRIBE: %v %+v", err, rs)
		}
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		gs, err := monAdm.DescribeGroups(ctx, "ana-readers")
		if err != nil {
			return err
		}
		if g := gs["ana-readers"]; g.Err != nil || !slices.Equal(g.AuthorizedOperations, []kadm.ACLOperation{kadm.OpDescribe}) {
			return fmt.Errorf("mon describing ana-readers: %v, operations %v (want DESCRIBE alone)", g.Err, g.AuthorizedOperations)
		}
		// Refused at FindCoordinator already, as Kafka refuses it.
		if gs, err := monAdm.DescribeGroups(ctx, "bob-readers"); !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(gs["bob-readers"].Err, kerr.GroupAuthorizationFailed) {
			return fmt.Errorf("mon describing bob-readers: %v %v, want GROUP_AUTHORIZATION_FAILED", err, gs["bob-readers"].Err)
		}
		offs, err := monAdm.FetchOffsets(ctx, "ana-readers")
		if err != nil {
			return fmt.Errorf("mon fetching the offsets of ana-readers: %w", err)
		}
		if o, ok := offs.Lookup("team-a", 0); !ok || o.Err != nil || o.At < 1 {
			return fmt.Errorf("mon's offset of ana-readers on team-a: %+v", o)
		}
		if _, err := monAdm.FetchOffsets(ctx, "bob-readers"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			return fmt.Errorf("mon fetching the offsets of bob-readers: %v", err)
		}
		listed, err := monAdm.ListGroups(ctx)
		if err != nil {
			return err
		}
		for _, g := range listed.Groups() {
			if !strings.HasPrefix(g, "ana-") {
				return fmt.Errorf("mon's ListGroups shows %s", g)
			}
		}
		if _, ok := listed["ana-readers"]; !ok {
			return fmt.Errorf("mon's ListGroups: %v, want ana-readers among them", listed.Groups())
		}
		txs, err := monAdm.DescribeTransactions(ctx, "ana-tx")
		if err != nil {
			return err
		}
		if d := txs["ana-tx"]; d.Err != nil || d.State == "" {
			return fmt.Errorf("mon describing ana-tx: %+v", d)
		}
		if txs, err := monAdm.DescribeTransactions(ctx, "bob-tx"); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) && !errors.Is(txs["bob-tx"].Err, kerr.TransactionalIDAuthorizationFailed) {
			return fmt.Errorf("mon describing bob-tx: %v %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err, txs["bob-tx"].Err)
		}
		ltx, err := monAdm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return err
		}
		if ids := ltx.TransactionalIDs(); !slices.Equal(ids, []string{"ana-tx"}) {
			return fmt.Errorf("mon's ListTransactions: %v, want ana-tx alone", ids)
		}
		return nil
	})
	// Asked of the coordinator directly (past FindCoordinator), the
	// describes refuse what mon may not describe.
	meta, err := monAdm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	coord := kafkaAs("mon", mon).Broker(int(meta.Controller))
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"bob-readers", "ana-readers"}
	if resp, err := dg.RequestWith(ctx, coord); err != nil || len(resp.Groups) != 2 ||
		resp.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code || resp.Groups[1].ErrorCode != 0 {
		t.Fatalf("mon's DescribeGroups of bob-readers and ana-readers at the coordinator: %v %+v", err, resp)
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"bob-tx", "ana-tx"}
	if resp, err := dt.RequestWith(ctx, coord); err != nil || len(resp.TransactionStates) != 2 ||
		resp.TransactionStates[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || resp.TransactionStates[1].ErrorCode != 0 {
		t.Fatalf("mon's DescribeTransactions of bob-tx and ana-tx at the coordinator: %v %+v", err, resp)
	}
	monCommit, err := monAdm.CommitOffsets(ctx, "ana-readers", kadm.OffsetsFromRecords(kgo.Record{Topic: "team-a", Partition: 0, Offset: 0}))
	if o, _ := monCommit.Lookup("team-a", 0); !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(o.Err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("mon committing for ana-readers: %v %+v, want GROUP_AUTHORIZATION_FAILED", err, o)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/v1/groups/ana-readers", "", http.StatusOK},
		{http.MethodGet, "/v1/groups/ana-readers/offsets?topic=team-a", "", http.StatusOK},
		{http.MethodGet, "/v1/groups/bob-readers", "", http.StatusForbidden},
		{http.MethodPost, "/v1/groups/ana-readers/offsets", `{"offsets":[{"topic":"team-a","partition":0,"offset":1}]}`, http.StatusForbidden},
	} {
		if status, body := httpAs(mon, tc.method, tc.path, tc.body); status != tc.status {
			t.Fatalf("mon: %s %s: %d %s, want %d", tc.method, tc.path, status, body, tc.status)
		}
	}
	if status, body := httpAs(mon, http.MethodGet, "/v1/groups", ""); status != http.StatusOK || !strings.Contains(body, `"ana-readers"`) || strings.Contains(body, "bob-readers") {
		t.Fatalf("mon listing groups over HTTP: %d %s", status, body)
	}

	// A KIP-848 regex subscription is resolved with ana's rights: team-.*
	// reads team-a (and its records) but never team-secret.
	rx := kafkaAs("ana", ana, kgo.ConsumerGroup("ana-regex"), kgo.ConsumeRegex(), kgo.ConsumeTopics("team-.*"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	deadline := time.Now().Add(time.Minute)
	for seen["team-a"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the regex consumer read %v", seen)
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := rx.PollFetches(pctx)
		pcancel()
		fs.EachError(func(topic string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("regex consumer, %s: %v", topic, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { seen[r.Topic]++ })
	}
	if seen["team-secret"] != 0 {
		t.Fatalf("the regex consumer read %d records of team-secret", seen["team-secret"])
	}
	described, err := adm.DescribeConsumerGroups(ctx, "ana-regex")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range described["ana-regex"].Members {
		if _, ok := m.Assignment["team-secret"]; ok || slices.Contains(m.SubscribedTopics, "team-secret") {
			t.Fatalf("the regex consumer reads team-secret: subscribed to %v, assigned %v", m.SubscribedTopics, m.Assignment)
		}
	}

	// CREATE on the topics starting with ana-: ana creates them over Kafka
	// and HTTP (sluicectl with her token), and no other.
	testkit.Eventually(t, 30*time.Second, func() error {
		created, err := kadm.NewClient(kafkaAs("ana", ana)).CreateTopic(ctx, 1, 1, nil, "ana-kafka")
		if err == nil {
			err = created.Err
		}
		return err
	})
	if created, err := kadm.NewClient(kafkaAs("ana", ana)).CreateTopic(ctx, 1, 1, nil, "bob-kafka"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(created.Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("ana creating bob-kafka over Kafka: %v %v", err, created.Err)
	}
	if _, errOut, code := as(ana, "", "topic", "create", "ana-http", "--partitions", "1", "--replication-factor", "1"); code != 0 {
		t.Fatalf("ana creating ana-http over HTTP: %s", errOut)
	}
	if _, errOut, code := as(ana, "", "topic", "create", "bob-http", "--partitions", "1", "--replication-factor", "1"); code == 0 || !strings.Contains(errOut, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("ana creating bob-http over HTTP: exit %d %s", code, errOut)
	}

	// ALTER and ALTER_CONFIGS on the same prefix: ana adds partitions to her
	// topics and changes their configs over Kafka and HTTP, and no other's;
	// ALTER_CONFIGS lets her describe their configs.
	anaAdm := kadm.NewClient(kafkaAs("ana", ana))
	grown, err := anaAdm.CreatePartitions(ctx, 1, "ana-kafka", "team-a")
	if err != nil || grown["ana-kafka"].Err != nil || !errors.Is(grown["team-a"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("ana adding partitions to ana-kafka and team-a over Kafka: %v %+v", err, grown)
	}
	retention := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")}}
	altered, err := anaAdm.AlterTopicConfigs(ctx, retention, "ana-kafka", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range altered {
		if want := r.Name == "ana-kafka"; (r.Err == nil) != want || !want && !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("ana altering the configs of %s over Kafka: %v %s", r.Name, r.Err, r.ErrMessage)
		}
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		rcs, err := anaAdm.DescribeTopicConfigs(ctx, "ana-kafka")
		if err != nil {
			return err
		}
		rc, err := rcs.On("ana-kafka", nil)
		if err == nil {
			err = rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.MaybeValue() != "3600000" {
				return fmt.Errorf("retention.ms of ana-kafka is %q", c.MaybeValue())
			}
		}
		return err
	})
	if _, errOut, code := as(ana, "", "topic", "alter", "ana-http", "--config", "retention.ms=3600000"); code != 0 {
		t.Fatalf("ana altering ana-http over HTTP: %s", errOut)
	}
	if _, errOut, code := as(ana, "", "topic", "add-partitions", "ana-http", "--partitions", "2"); code != 0 {
		t.Fatalf("ana adding a partition to ana-http over HTTP: %s", errOut)
	}
	for _, args := range [][]string{{"topic", "alter", "team-a", "--config", "retention.ms=3600000"}, {"topic", "add-partitions", "team-a", "--partitions", "9"}} {
		if _, errOut, code := as(ana, "", args...); code == 0 || !strings.Contains(errOut, "TOPIC_AUTHORIZATION_FAILED") {
			t.Fatalf("ana: sluicectl %v: exit %d %s", args, code, errOut)
		}
	}

	// CLUSTER ACLs: without one ana may neither list the ACLs nor change
	// quotas; with DESCRIBE and ALTER_CONFIGS on the cluster she lists the
	// ACLs and changes quotas over Kafka and HTTP, and still may not change
	// ACLs (ALTER).
	describeACLs := func() error {
		rs, err := anaAdm.DescribeACLs(ctx, kadm.NewACLs().Topics("team-secret").ResourcePatternType(kadm.ACLPatternMatch).
			Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
		if err == nil && len(rs) == 0 {
			err = errors.New("no answer")
		}
		for _, r := range rs {
			err = errors.Join(err, r.Err)
		}
		return err
	}
	if err := describeACLs(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("ana describing the ACLs without a cluster ACL: %v", err)
	}
	if _, errOut, code := as(ana, "", "quota", "set", "--client-id", "ana-app", "--produce-bytes-per-sec", "1000000"); code == 0 ||
		!strings.Contains(errOut, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("ana setting a quota without a cluster ACL: exit %d %s", code, errOut)
	}
	clusterACLs := kadm.NewACLs().Clusters().Allow("User:ana").Operations(kadm.OpDescribe, kadm.OpAlterConfigs)
	if rs, err := adm.CreateACLs(ctx, clusterACLs); err != nil || rs[0].Err != nil || rs[1].Err != nil {
		t.Fatalf("granting ana DESCRIBE and ALTER_CONFIGS on the cluster: %v %+v", err, rs)
	}
	testkit.Eventually(t, 30*time.Second, describeACLs)
	quota := []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("ana-app")}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1_000_000}}}}
	// The grant reaches each broker when its model catches up: the broker
	// that answered the listing above may not be the one asked here.
	testkit.Eventually(t, 30*time.Second, func() error {
		res, err := anaAdm.AlterClientQuotas(ctx, quota)
		switch {
		case err == nil && len(res) == 1 && errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed):
			return res[0].Err
		case err != nil || len(res) != 1 || res[0].Err != nil:
			t.Fatalf("ana setting a quota over Kafka with ALTER_CONFIGS on the cluster: %v %+v", err, res)
		}
		return nil
	})
	if _, errOut, code := as(ana, "", "quota", "set", "--client-id", "ana-app", "--produce-bytes-per-sec", "2000000"); code != 0 {
		t.Fatalf("ana setting a quota over HTTP with ALTER_CONFIGS on the cluster: %s", errOut)
	}
	if out, errOut, code := as(ana, "", "acl", "list"); code != 0 || !strings.Contains(out, "kafka-cluster") {
		t.Fatalf("ana listing the ACLs over HTTP with DESCRIBE on the cluster: exit %d %s %s", code, out, errOut)
	}
	if rs, err := anaAdm.CreateACLs(ctx, kadm.NewACLs().Topics("x").Allow("User:ana").Operations(kadm.OpRead)); err == nil && (len(rs) == 0 || !errors.Is(rs[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("ana creating an ACL without ALTER on the cluster: %+v", rs)
	}
	if _, errOut, code := as(ana, "", "acl", "add", "--user", "ana", "--topic", "x", "--operation", "consume"); code == 0 ||
		!strings.Contains(errOut, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("ana adding an ACL over HTTP without ALTER on the cluster: exit %d %s", code, errOut)
	}

	// DELETE on groups starting with ana-: ana deletes her groups (without
	// members) over Kafka and HTTP, and not root's.
	var committed kadm.Offsets
	committed.Add(kadm.Offset{Topic: "team-a", Partition: 0, At: 1, LeaderEpoch: -1})
	for _, g := range []struct {
		adm   *kadm.Client
		group string
	}{{anaAdm, "ana-old"}, {anaAdm, "ana-old-http"}, {anaAdm, "ana-keep"}, {adm, "root-g"}} {
		testkit.Eventually(t, 30*time.Second, func() error {
			rs, err := g.adm.CommitOffsets(ctx, g.group, committed)
			if err == nil {
				err = rs.Error()
			}
			return err
		})
	}
	if gone, err := anaAdm.DeleteGroups(ctx, "ana-old"); err != nil || gone["ana-old"].Err != nil {
		t.Fatalf("ana deleting ana-old over Kafka: %v %+v", err, gone)
	}
	// A group she uses but may not delete; FindCoordinator already refuses
	// her root's group, as Kafka's does.
	if gone, err := anaAdm.DeleteGroups(ctx, "ana-keep"); err != nil || !errors.Is(gone["ana-keep"].Err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("ana deleting ana-keep over Kafka: %v %+v", err, gone)
	}
	if gone, err := anaAdm.DeleteGroups(ctx, "root-g"); !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(gone["root-g"].Err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("ana deleting root-g over Kafka: %v %+v", err, gone)
	}
	if _, errOut, code := as(ana, "", "group", "delete", "ana-old-http"); code != 0 {
		t.Fatalf("ana deleting ana-old-http over HTTP: %s", errOut)
	}
	if _, errOut, code := as(ana, "", "group", "delete", "root-g"); code == 0 || !strings.Contains(errOut, "GROUP_AUTHORIZATION_FAILED") {
		t.Fatalf("ana deleting root-g over HTTP: exit %d %s", code, errOut)
	}

	// DELETE on the same prefix: ana deletes her topics over Kafka and HTTP,
	// and no other.
	deleted, err := kadm.NewClient(kafkaAs("ana", ana)).DeleteTopics(ctx, "ana-kafka", "team-a")
	if err != nil || deleted["ana-kafka"].Err != nil || !errors.Is(deleted["team-a"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("ana deleting ana-kafka and team-a over Kafka: %v %+v", err, deleted)
	}
	if _, errOut, code := as(ana, "", "topic", "delete", "ana-http"); code != 0 {
		t.Fatalf("ana deleting ana-http over HTTP: %s", errOut)
	}
	if _, errOut, code := as(ana, "", "topic", "delete", "team-a"); code == 0 || !strings.Contains(errOut, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("ana deleting team-a over HTTP: exit %d %s", code, errOut)
	}
}
