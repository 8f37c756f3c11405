package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// TestKafkaSarama runs IBM/sarama, the most used Go Kafka client, against a
// cluster of two frontends: its cluster admin creates a topic with a config
// and reads the config back, lists the topics and deletes one; its
// idempotent acks=all producer writes 1,000 keyed records; a consumer group
// of two sarama members reads every record once, in per-key order, and
// commits them (the admin's ListConsumerGroupOffsets sees the commits).
func TestKafkaSarama(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := sarama.NewConfig()
	cfg.ClientID = "sarama-test"
	cfg.Version = sarama.V3_6_0_0
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	cfg.Admin.Timeout = 30 * time.Second

	admin, err := sarama.NewClusterAdmin(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	retention := "3600000"
	if err := admin.CreateTopic("sarama", &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 3,
		ConfigEntries: map[string]*string{"retention.ms": &retention}}, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if err := admin.CreateTopic("sarama-gone", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	itest.WaitLeaders(t, ctx, c, "sarama", 3)
	entries, err := describeTopicConfig(admin, "sarama")
	if err != nil {
		t.Fatalf("DescribeConfig: %v", err)
	}
	if i := slices.IndexFunc(entries, func(e sarama.ConfigEntry) bool { return e.Name == "retention.ms" }); i < 0 || entries[i].Value != retention {
		t.Fatalf("DescribeConfig retention.ms: %+v", entries)
	}
	if err := admin.DeleteTopic("sarama-gone"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if _, ok := topics["sarama"]; !ok || topics["sarama"].NumPartitions != 3 {
		t.Fatalf("ListTopics: %+v", topics)
	}
	if _, ok := topics["sarama-gone"]; ok {
		t.Fatal("ListTopics still lists the deleted topic")
	}

	saramaAdminACLsQuotasSCRAM(t, admin)

	// An idempotent producer, acks=all.
	pcfg := *cfg
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Idempotent = true
	pcfg.Producer.Return.Successes = true
	pcfg.Net.MaxOpenRequests = 1
	pcfg.Producer.Partitioner = sarama.NewHashPartitioner
	producer, err := sarama.NewSyncProducer(c.KafkaAddrs(), &pcfg)
	if err != nil {
		t.Fatal(err)
	}
	const n, keys = 1000, 10
	var msgs []*sarama.ProducerMessage
	for i := range n {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: "sarama", Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%keys)), Value: sarama.StringEncoder(fmt.Sprint(i))})
	}
	if err := producer.SendMessages(msgs); err != nil {
		t.Fatalf("SendMessages: %v", err)
	}
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}

	// A consumer group of two members reads every record once, in per-key
	// order, marking each; then a third member finds nothing left.
	gcfg := *cfg
	gcfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	gcfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	gcfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	h := &saramaHandler{last: map[string]int{}, want: n}
	gctx, gcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 2 {
		group, err := sarama.NewConsumerGroup(c.KafkaAddrs(), "sarama-readers", &gcfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer group.Close()
			for gctx.Err() == nil {
				if err := group.Consume(gctx, []string{"sarama"}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) && gctx.Err() == nil {
					t.Errorf("member %d: %v", i, err)
					return
				}
			}
		})
	}
	select {
	case <-h.done():
	case <-ctx.Done():
	}
	time.Sleep(500 * time.Millisecond) // an auto-commit interval and more, for the last marks
	gcancel()
	wg.Wait()
	if err := h.check(); err != nil {
		t.Fatal(err)
	}

	offsets, err := admin.ListConsumerGroupOffsets("sarama-readers", map[string][]int32{"sarama": {0, 1, 2}})
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets: %v", err)
	}
	var committed int64
	for _, b := range offsets.Blocks["sarama"] {
		committed += b.Offset
	}
	if committed != n {
		t.Fatalf("the group committed %d offsets in all, want %d", committed, n)
	}
}

// saramaHandler is a sarama consumer group handler that marks every
// record, counting them and checking per-key order.
type saramaHandler struct {
	mu     sync.Mutex
	last   map[string]int
	count  int
	want   int
	err    error
	closed chan struct{}
	once   sync.Once
}

func (h *saramaHandler) done() <-chan struct{} {
	h.once.Do(func() { h.closed = make(chan struct{}) })
	return h.closed
}

func (h *saramaHandler) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if h.count != h.want {
		return fmt.Errorf("the group read %d records, want %d", h.count, h.want)
	}
	return nil
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	h.done() // makes h.closed
	for m := range claim.Messages() {
		var v int
		if _, err := fmt.Sscan(string(m.Value), &v); err != nil && h.err == nil {
			h.err = fmt.Errorf("record %q: %v", m.Value, err)
		}
		h.mu.Lock()
		k := string(m.Key)
		if prev, ok := h.last[k]; ok && v <= prev && h.err == nil {
			h.err = fmt.Errorf("key %s: record %d after %d: order broken, or a record read twice", k, v, prev)
		}
		h.last[k] = v
		h.count++
		if h.count == h.want {
			close(h.closed)
		}
		h.mu.Unlock()
		sess.MarkMessage(m, "")
	}
	return nil
}

// saramaAdminACLsQuotasSCRAM runs sarama's cluster admin over what Kafka's
// admin tools use beside topics: a SCRAM user upserted (which makes the
// principal), described and deleted; ACLs created on a topic, a group
// prefix and a transactional id (ALLOW and DENY), listed by a filter and
// deleted by one; a client quota set, described and removed; a topic's
// config changed incrementally.
func saramaAdminACLsQuotasSCRAM(t *testing.T, admin sarama.ClusterAdmin) {
	t.Helper()
	user := "sarama-user"
	upserted, err := admin.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{{Name: user,
		Mechanism: sarama.SCRAM_MECHANISM_SHA_256, Iterations: 8192, Salt: []byte("sarama-salt"), Password: []byte("sarama-secret")}})
	if err != nil || len(upserted) != 1 || upserted[0].ErrorCode != sarama.ErrNoError {
		t.Fatalf("UpsertUserScramCredentials: %v %+v", err, upserted)
	}
	creds, err := admin.DescribeUserScramCredentials([]string{user})
	if err != nil || len(creds) != 1 || creds[0].ErrorCode != sarama.ErrNoError || len(creds[0].CredentialInfos) != 1 ||
		creds[0].CredentialInfos[0].Mechanism != sarama.SCRAM_MECHANISM_SHA_256 || creds[0].CredentialInfos[0].Iterations != 8192 {
		t.Fatalf("DescribeUserScramCredentials: %v %+v", err, creds)
	}

	principal := "User:" + user
	allow := func(op sarama.AclOperation) *sarama.Acl {
		return &sarama.Acl{Principal: principal, Host: "*", Operation: op, PermissionType: sarama.AclPermissionAllow}
	}
	bindings := []*sarama.ResourceAcls{
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "sarama", ResourcePatternType: sarama.AclPatternLiteral},
			Acls: []*sarama.Acl{allow(sarama.AclOperationRead)}},
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceGroup, ResourceName: "sarama-", ResourcePatternType: sarama.AclPatternPrefixed},
			Acls: []*sarama.Acl{allow(sarama.AclOperationRead), allow(sarama.AclOperationDescribe)}},
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceGroup, ResourceName: "sarama-private", ResourcePatternType: sarama.AclPatternLiteral},
			Acls: []*sarama.Acl{{Principal: principal, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionDeny}}},
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceTransactionalID, ResourceName: "sarama-tx", ResourcePatternType: sarama.AclPatternLiteral},
			Acls: []*sarama.Acl{allow(sarama.AclOperationWrite)}},
	}
	if err := admin.CreateACLs(bindings); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	filter := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny, Principal: &principal,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	var listed []string
	testkit.Eventually(t, 30*time.Second, func() error { // the broker answers from its model, which follows metadata
		acls, err := admin.ListAcls(filter)
		if err != nil {
			return err
		}
		listed = listed[:0]
		for _, r := range acls {
			for _, a := range r.Acls {
				listed = append(listed, fmt.Sprintf("%s:%s:%s %s %s", &r.ResourceType, &r.ResourcePatternType, r.ResourceName, &a.Operation, &a.PermissionType))
			}
		}
		slices.Sort(listed)
		if len(listed) != 5 {
			return fmt.Errorf("ListAcls of %s: %v, want the 5 bindings created", principal, listed)
		}
		return nil
	})
	want := []string{"Group:Literal:sarama-private Read Deny", "Group:Prefixed:sarama- Describe Allow", "Group:Prefixed:sarama- Read Allow",
		"Topic:Literal:sarama Read Allow", "TransactionalID:Literal:sarama-tx Write Allow"}
	if !slices.Equal(listed, want) {
		t.Fatalf("ListAcls of %s:\n%v\nwant\n%v", principal, listed, want)
	}
	groupsOnly := filter
	groupsOnly.ResourceType = sarama.AclResourceGroup
	deleted, err := admin.DeleteACL(groupsOnly, false)
	if err != nil || len(deleted) != 3 {
		t.Fatalf("DeleteACL of %s's group bindings: %v, %d deleted, want 3", principal, err, len(deleted))
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if acls, err := admin.ListAcls(groupsOnly); err != nil || len(acls) != 0 {
			return fmt.Errorf("ListAcls of the group bindings after DeleteACL: %v %+v", err, acls)
		}
		return nil
	})
	if err := admin.CreateACLs([]*sarama.ResourceAcls{{Resource: sarama.Resource{ResourceType: sarama.AclResourceGroup,
		ResourceName: "g", ResourcePatternType: sarama.AclPatternLiteral}, Acls: []*sarama.Acl{allow(sarama.AclOperationAlter)}}}); err == nil {
		t.Fatal("CreateACLs of ALTER on a group (which Sluice does not keep) succeeded")
	}

	client := []sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Name: "sarama-app"}}
	if err := admin.AlterClientQuotas(client, sarama.ClientQuotasOp{Key: "producer_byte_rate", Value: 1048576}, false); err != nil {
		t.Fatalf("AlterClientQuotas: %v", err)
	}
	match := []sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Match: "sarama-app"}}
	testkit.Eventually(t, 30*time.Second, func() error {
		quotas, err := admin.DescribeClientQuotas(match, true)
		if err != nil {
			return err
		}
		if len(quotas) != 1 || quotas[0].Values["producer_byte_rate"] != 1048576 {
			return fmt.Errorf("DescribeClientQuotas of sarama-app: %+v", quotas)
		}
		return nil
	})
	if err := admin.AlterClientQuotas(client, sarama.ClientQuotasOp{Key: "producer_byte_rate", Remove: true}, false); err != nil {
		t.Fatalf("AlterClientQuotas removing the quota: %v", err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if quotas, err := admin.DescribeClientQuotas(match, true); err != nil || len(quotas) != 0 {
			return fmt.Errorf("DescribeClientQuotas after the removal: %v %+v", err, quotas)
		}
		return nil
	})

	retention := "7200000"
	if err := admin.IncrementalAlterConfig(sarama.TopicResource, "sarama", map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &retention}}, false); err != nil {
		t.Fatalf("IncrementalAlterConfig: %v", err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		entries, err := describeTopicConfig(admin, "sarama")
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(entries, func(e sarama.ConfigEntry) bool { return e.Name == "retention.ms" }); i < 0 || entries[i].Value != retention {
			return fmt.Errorf("retention.ms after IncrementalAlterConfig: %+v", entries)
		}
		return nil
	})

	if res, err := admin.DeleteUserScramCredentials([]sarama.AlterUserScramCredentialsDelete{{Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_256}}); err != nil ||
		len(res) != 1 || res[0].ErrorCode != sarama.ErrNoError {
		t.Fatalf("DeleteUserScramCredentials: %v %+v", err, res)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		creds, err := admin.DescribeUserScramCredentials([]string{user})
		if err != nil || len(creds) != 1 || len(creds[0].CredentialInfos) != 0 {
			return fmt.Errorf("DescribeUserScramCredentials after the deletion: %v %+v", err, creds)
		}
		return nil
	})
}

// describeTopicConfig reads a topic's configs with sarama's DescribeConfigs,
// failing on the resource's own error.
func describeTopicConfig(admin sarama.ClusterAdmin, topic string) ([]sarama.ConfigEntry, error) {
	results, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	if len(results) != 1 || results[0].Name != topic {
		return nil, fmt.Errorf("DescribeConfigs of %s answered %d resources", topic, len(results))
	}
	if results[0].ErrorCode != sarama.ErrNoError {
		return nil, fmt.Errorf("DescribeConfigs of %s: %w %s", topic, results[0].ErrorCode, results[0].ErrorMsg)
	}
	return results[0].Configs, nil
}
