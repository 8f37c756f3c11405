package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// fakeModel is a Model holding one snapshot; it counts the refreshes.
type fakeModel struct {
	snap      *cluster.Snapshot
	refreshes int
}

func (m *fakeModel) Snapshot() *cluster.Snapshot { return m.snap }
func (m *fakeModel) Refresh(context.Context) (*cluster.Snapshot, error) {
	m.refreshes++
	return m.snap, nil
}

// fakeAdmin records what reaches the metadata service.
type fakeAdmin struct {
	created    []cluster.CreateTopicRequest
	altered    map[string]cluster.AlterTopicConfigRequest
	acls       []cluster.ACL
	quotas     []cluster.Quota
	principals []cluster.Principal
	elections  []cluster.ElectRequest
	reassigned []string
	topics     map[string]*cluster.Topic // what DescribeTopic reads, as the metadata leader has it
}

func (a *fakeAdmin) CreateTopic(_ context.Context, req cluster.CreateTopicRequest) (*cluster.Topic, error) {
	a.created = append(a.created, req)
	return &cluster.Topic{Name: req.Name, ReplicationFactor: req.ReplicationFactor, Config: req.Config, Partitions: make([]cluster.Partition, req.Partitions)}, nil
}
func (a *fakeAdmin) DeleteTopic(context.Context, string) error { return nil }
func (a *fakeAdmin) DescribeTopic(_ context.Context, name string) (*cluster.Topic, error) {
	if t, ok := a.topics[name]; ok {
		return t, nil
	}
	return nil, protocol.UnknownTopicOrPartition.Err("no topic %q", name)
}
func (a *fakeAdmin) AlterTopicConfig(_ context.Context, name string, req cluster.AlterTopicConfigRequest) (*cluster.Topic, error) {
	if a.altered == nil {
		a.altered = map[string]cluster.AlterTopicConfigRequest{}
	}
	a.altered[name] = req
	return &cluster.Topic{Name: name}, nil
}
func (a *fakeAdmin) AddPartitions(context.Context, string, cluster.AddPartitionsRequest) (*cluster.Topic, error) {
	return &cluster.Topic{}, nil
}
func (a *fakeAdmin) InitProducerID(context.Context) (cluster.InitProducerIDResponse, error) {
	return cluster.InitProducerIDResponse{ProducerID: 1000}, nil
}
func (a *fakeAdmin) SetClusterConfig(_ context.Context, req cluster.AlterTopicConfigRequest) (map[string]string, error) {
	return req.Set, nil
}
func (a *fakeAdmin) SetPrincipal(_ context.Context, p cluster.Principal, del bool) error {
	if !del {
		a.principals = append(a.principals, p)
	}
	return nil
}
func (a *fakeAdmin) ElectLeaders(_ context.Context, req cluster.ElectRequest) ([]cluster.ElectResult, error) {
	a.elections = append(a.elections, req)
	if req.Topic == "nope" {
		return nil, protocol.UnknownTopicOrPartition.Err("no topic %q", req.Topic)
	}
	parts := req.Partitions
	if len(parts) == 0 {
		parts = []int32{0, 1}
	}
	var out []cluster.ElectResult
	for _, p := range parts {
		r := cluster.ElectResult{Partition: p, Leader: 1}
		if p == 1 {
			r.Code, r.Error = protocol.ElectionNotNeeded, "led already"
		}
		out = append(out, r)
	}
	return out, nil
}
func (a *fakeAdmin) ReassignPartition(_ context.Context, topic string, partition int32, replicas []int32) (*cluster.Partition, error) {
	if topic == "audit" {
		return nil, protocol.ReassignmentInProgress.Err("audit-%d is moving", partition)
	}
	a.reassigned = append(a.reassigned, fmt.Sprintf("%s-%d:%v", topic, partition, replicas))
	return &cluster.Partition{ID: partition, Replicas: replicas}, nil
}
func (a *fakeAdmin) CancelReassignment(_ context.Context, topic string, partition int32) (*cluster.Partition, error) {
	a.reassigned = append(a.reassigned, fmt.Sprintf("%s-%d:cancel", topic, partition))
	return &cluster.Partition{ID: partition}, nil
}
func (a *fakeAdmin) SetQuota(_ context.Context, q cluster.Quota) error {
	a.quotas = append(a.quotas, q)
	return nil
}
func (a *fakeAdmin) SetACL(_ context.Context, acl cluster.ACL, del bool) error {
	if !del {
		a.acls = append(a.acls, acl)
	}
	return nil
}

// testModel is two frontends, two storage nodes (one without a Kafka
// listener), topics "orders" (2 partitions, one without a leader) and
// "audit", alice may produce to orders, root is an admin.
func testModel() *cluster.Snapshot {
	return &cluster.Snapshot{
		ClusterID: "c1",
		Frontends: []cluster.Frontend{{ID: cluster.FrontendIDBase, KafkaAddr: "fe1:9092"}, {ID: cluster.FrontendIDBase + 1, KafkaAddr: "fe2:9092", Rack: "r2"}},
		Nodes:     []cluster.Node{{ID: 1, Alive: true, KafkaAddr: "s1:9121"}, {ID: 2, Alive: true}},
		Topics: []cluster.Topic{
			{Name: "audit", ID: "00112233445566778899aabbccddeeff", ReplicationFactor: 1, Partitions: []cluster.Partition{{ID: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}},
			{Name: "orders", ReplicationFactor: 2, Config: map[string]string{"retention.ms": "1000"}, Partitions: []cluster.Partition{
				{ID: 0, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
				{ID: 1, Leader: -1, LeaderEpoch: 2, Replicas: []int32{2, 1}, ISR: []int32{}},
			}},
		},
		Principals: []cluster.Principal{{Name: "alice"}, {Name: "root", Admin: true}},
		ACLs:       []cluster.ACL{{Principal: "alice", Topic: "orders", Operation: cluster.OpProduce}},
	}
}

func testBroker(authorize bool) (*Broker, *fakeModel, *fakeAdmin) {
	m, a := &fakeModel{snap: testModel()}, &fakeAdmin{}
	return NewBroker(BrokerConfig{Authorize: authorize}, func() int32 { return 1 }, m, a, slog.New(slog.DiscardHandler)), m, a
}

// connAs is a connection authenticated as principal.
func connAs(principal string) *Conn {
	return &Conn{s: &Server{log: slog.New(slog.DiscardHandler)}, principal: principal, authenticated: true}
}

// TestMetadataAnswer checks brokers, leaders, epochs and visibility.
func TestMetadataAnswer(t *testing.T) {
	b, _, _ := testBroker(true)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := b.metadata(context.Background(), connAs("alice"), req).Msg.(*kmsg.MetadataResponse)
	var ids []int32
	for _, br := range resp.Brokers {
		ids = append(ids, br.NodeID)
	}
	if !slices.Equal(ids, []int32{cluster.FrontendIDBase, cluster.FrontendIDBase + 1, 1}) || *resp.ClusterID != "c1" || resp.ControllerID != cluster.FrontendIDBase {
		t.Fatalf("brokers %v, cluster %q, controller %d", ids, *resp.ClusterID, resp.ControllerID)
	}
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "orders" {
		t.Fatalf("alice sees %d topics; want orders alone", len(resp.Topics))
	}
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.Leader < cluster.FrontendIDBase || p0.LeaderEpoch != 4 || !slices.Equal(p0.Replicas, []int32{1, 2}) || len(p0.OfflineReplicas) != 0 {
		t.Fatalf("partition 0: %+v", p0)
	}
	if p1.Leader != -1 || p1.ErrorCode != int16(protocol.LeaderNotAvailable) {
		t.Fatalf("a partition without a storage leader: %+v", p1)
	}
	// The leader is the same frontend on every broker answering.
	again := b.metadata(context.Background(), connAs("root"), req).Msg.(*kmsg.MetadataResponse)
	for _, tp := range again.Topics {
		if *tp.Topic == "orders" && tp.Partitions[0].Leader != p0.Leader {
			t.Fatal("two answers name different leaders")
		}
	}
	if len(again.Topics) != 3 {
		t.Fatalf("root sees %d topics, want 2 and __consumer_offsets", len(again.Topics))
	}
	internal := again.Topics[2]
	if *internal.Topic != groups.OffsetsLogTopic || !internal.IsInternal || len(internal.Partitions) != groups.OffsetsLogPartitions ||
		internal.TopicID != OffsetsLogTopicID(testModel()) || internal.Partitions[7].Leader < cluster.FrontendIDBase {
		t.Fatalf("the internal topic: %+v", internal)
	}
	byID := kmsg.NewPtrMetadataRequest()
	byID.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = internal.TopicID
	byID.Topics = append(byID.Topics, rt)
	if resp := b.metadata(context.Background(), connAs("root"), byID).Msg.(*kmsg.MetadataResponse); len(resp.Topics) != 1 || !resp.Topics[0].IsInternal {
		t.Fatalf("__consumer_offsets by id: %+v", resp.Topics)
	}

	// Asking by name: a hidden topic and a missing one.
	named := kmsg.NewPtrMetadataRequest()
	named.Version = 12
	for _, n := range []string{"audit", "nope"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		named.Topics = append(named.Topics, rt)
	}
	resp = b.metadata(context.Background(), connAs("alice"), named).Msg.(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != int16(protocol.TopicAuthorizationFailed) || resp.Topics[1].ErrorCode != int16(protocol.TopicAuthorizationFailed) {
		t.Fatalf("alice asking for audit and nope: %d %d, want TOPIC_AUTHORIZATION_FAILED for both", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
	}
	resp = b.metadata(context.Background(), connAs("root"), named).Msg.(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || TopicID(&testModel().Topics[0]) != resp.Topics[0].TopicID || resp.Topics[1].ErrorCode != int16(protocol.UnknownTopicOrPartition) {
		t.Fatalf("root asking for audit and nope: %+v", resp.Topics)
	}
	// v0: an empty list is every topic.
	v0 := kmsg.NewPtrMetadataRequest()
	if resp := b.metadata(context.Background(), connAs("root"), v0).Msg.(*kmsg.MetadataResponse); len(resp.Topics) != 3 {
		t.Fatalf("Metadata v0 with no topics lists %d", len(resp.Topics))
	}
}

// TestMetadataAutoCreate checks that a missing topic is created with the
// cluster's defaults only when the cluster setting and the request allow
// it.
func TestMetadataAutoCreate(t *testing.T) {
	b, m, a := testBroker(false)
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = 12, true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("fresh")
	req.Topics = append(req.Topics, rt)
	resp := b.metadata(context.Background(), connAs(""), req).Msg.(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != int16(protocol.UnknownTopicOrPartition) || len(a.created) != 0 {
		t.Fatalf("auto-creation off by default: %d, created %v", resp.Topics[0].ErrorCode, a.created)
	}
	m.snap.Config = map[string]string{cluster.SettingAutoCreateTopics: "true", cluster.SettingNumPartitions: "4"}
	resp = b.metadata(context.Background(), connAs(""), req).Msg.(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != int16(protocol.LeaderNotAvailable) || len(a.created) != 1 || a.created[0].Partitions != 4 {
		t.Fatalf("auto-creation on: %d, created %+v", resp.Topics[0].ErrorCode, a.created)
	}
	// The replication factor is left to metadata, which knows the live
	// storage nodes: the cluster's default, at most one per node.
	if rf := a.created[0].ReplicationFactor; rf != cluster.DefaultRF {
		t.Fatalf("auto-created with replication factor %d, want the cluster default (%d)", rf, cluster.DefaultRF)
	}
	req.AllowAutoTopicCreation = false
	b.metadata(context.Background(), connAs(""), req)
	if len(a.created) != 1 {
		t.Fatal("a request that did not allow auto-creation created a topic")
	}
}

// TestTopicConfigMapping checks Kafka's config names against Sluice's.
func TestTopicConfigMapping(t *testing.T) {
	s := func(v string) *string { return &v }
	got, err := toTopicConfig(map[string]*string{"unclean.leader.election.enable": s("true"), "retention.ms": s("5"), "cleanup.policy": s("compact,delete"),
		"compression.type": s("producer"), "min.cleanable.dirty.ratio": s("0.1")})
	if err != nil || got[cluster.ConfigUncleanElection] != "true" || got["retention.ms"] != "5" || got[cluster.ConfigCleanupPolicy] != "compact,delete" ||
		got[cluster.ConfigMinCleanableDirtyRatio] != "0.1" || len(got) != 4 {
		t.Fatalf("mapped %v, %v", got, err)
	}
	for _, bad := range []map[string]*string{{"message.timestamp.type": s("LogAppendTime")}, {"compression.type": s("zstd")}, {"no.such": s("1")}, {"retention.ms": nil}} {
		if _, err := toTopicConfig(bad); protocol.CodeOf(err) != protocol.InvalidConfig {
			t.Errorf("%v: %v, want INVALID_CONFIG", bad, err)
		}
	}
	model := testModel()
	topic := model.Topics[1]
	entries := describeTopicConfig(model, &topic, []string{"retention.ms", "segment.bytes", "cleanup.policy", "delete.retention.ms"}, true, true)
	if len(entries) != 4 {
		t.Fatalf("described %+v", entries)
	}
	byName := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	if e := byName["retention.ms"]; *e.Value != "1000" || e.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms %+v", e)
	}
	if e := byName["segment.bytes"]; e.Source != kmsg.ConfigSourceDefaultConfig || !e.IsDefault || e.Documentation == nil {
		t.Fatalf("segment.bytes %+v", e)
	}
	if e := byName["cleanup.policy"]; *e.Value != "delete" || e.ReadOnly || e.ConfigType != kmsg.ConfigTypeList {
		t.Fatalf("cleanup.policy %+v", e)
	}
	if e := byName["delete.retention.ms"]; *e.Value != "86400000" || !e.IsDefault {
		t.Fatalf("delete.retention.ms %+v", e)
	}

	// min.insync.replicas unset on a topic is the cluster's for its
	// replication factor: 2 for 3 replicas by default, a cluster-wide
	// dynamic default once the setting is set, 1 below 3 replicas.
	minISR := func(snap *cluster.Snapshot, topic *cluster.Topic) kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		e := describeTopicConfig(snap, topic, []string{"min.insync.replicas"}, false, false)
		if len(e) != 1 {
			t.Fatalf("described %+v", e)
		}
		return e[0]
	}
	rf3 := &cluster.Topic{Name: "rf3", ReplicationFactor: 3}
	if e := minISR(model, rf3); *e.Value != "2" || e.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("RF=3 by default: %s from %v, want 2 from DEFAULT_CONFIG", *e.Value, e.Source)
	}
	if e := minISR(model, &topic); *e.Value != "1" {
		t.Fatalf("RF=2: %s, want 1", *e.Value)
	}
	set := testModel()
	set.Config = map[string]string{cluster.SettingMinInsyncReplicas: "3"}
	if e := minISR(set, rf3); *e.Value != "3" || e.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("RF=3 with the cluster's 3: %s from %v", *e.Value, e.Source)
	}
	brokers := describeClusterConfig(set, []string{"default.replication.factor", "min.insync.replicas"}, false)
	if len(brokers) != 2 || *brokers[0].Value != "3" || !brokers[0].IsDefault || *brokers[1].Value != "3" || brokers[1].IsDefault {
		t.Fatalf("cluster settings described as %+v", brokers)
	}
}

// TestAlterConfigsReplacesOrChanges checks AlterConfigs (replace the set)
// and IncrementalAlterConfigs (set and delete) against what reaches
// metadata, and that only admins may.
func TestAlterConfigsReplacesOrChanges(t *testing.T) {
	b, _, a := testBroker(true)
	s := func(v string) *string { return &v }
	if err := b.alterResource(context.Background(), connAs("alice"), testModel(), configAlter{typ: kmsg.ConfigResourceTypeTopic, name: "orders",
		set: map[string]*string{"segment.ms": s("10")}}); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed {
		t.Fatalf("alice altering: %v", err)
	}
	// The metadata leader has a key this frontend's model has not seen
	// yet (a change answered just before): replacing the set deletes it
	// too.
	a.topics = map[string]*cluster.Topic{"orders": {Name: "orders", ReplicationFactor: 2,
		Config: map[string]string{"retention.ms": "1000", "max.message.bytes": "2000"}}}
	if err := b.alterResource(context.Background(), connAs("root"), testModel(), configAlter{typ: kmsg.ConfigResourceTypeTopic, name: "orders",
		set: map[string]*string{"segment.ms": s("10")}, replace: true}); err != nil {
		t.Fatal(err)
	}
	if req := a.altered["orders"]; req.Set["segment.ms"] != "10" || !slices.Equal(slices.Sorted(slices.Values(req.Delete)), []string{"max.message.bytes", "retention.ms"}) {
		t.Fatalf("AlterConfigs sent %+v, want segment.ms set and retention.ms and max.message.bytes back to default", req)
	}
	if err := b.alterResource(context.Background(), connAs("root"), testModel(), configAlter{typ: kmsg.ConfigResourceTypeTopic, name: "orders",
		del: []string{"retention.ms", "cleanup.policy"}}); err != nil {
		t.Fatal(err)
	}
	if req := a.altered["orders"]; len(req.Set) != 0 || !slices.Equal(req.Delete, []string{"retention.ms", "cleanup.policy"}) {
		t.Fatalf("IncrementalAlterConfigs sent %+v", req)
	}
	if err := b.alterResource(context.Background(), connAs("root"), testModel(), configAlter{typ: kmsg.ConfigResourceTypeBroker, name: "1",
		set: map[string]*string{"num.partitions": s("3")}}); protocol.CodeOf(err) != protocol.InvalidRequest {
		t.Fatalf("a per-broker config: %v, want INVALID_REQUEST", err)
	}
}

// TestACLMapping checks which Kafka bindings Sluice's ACLs express.
func TestACLMapping(t *testing.T) {
	binding := func(mod func(*kmsg.CreateACLsRequestCreation)) *kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
		if mod != nil {
			mod(&c)
		}
		return &c
	}
	if acls, err := toACLs(binding(nil)); err != nil || len(acls) != 1 || acls[0] != (cluster.ACL{Principal: "alice", Topic: "orders", Operation: cluster.OpProduce}) {
		t.Fatalf("WRITE: %+v %v", acls, err)
	}
	if acls, err := toACLs(binding(func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationAll })); err != nil || len(acls) != 8 {
		t.Fatalf("ALL: %+v %v", acls, err)
	}
	if acls, err := toACLs(binding(func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationDescribe })); err != nil || len(acls) != 1 || acls[0].Operation != cluster.OpDescribe {
		t.Fatalf("DESCRIBE: %+v %v", acls, err)
	}
	for k, op := range map[kmsg.ACLOperation]string{kmsg.ACLOperationAlter: cluster.OpAlter, kmsg.ACLOperationAlterConfigs: cluster.OpAlterConfigs,
		kmsg.ACLOperationDescribeConfigs: cluster.OpDescribeConfigs} {
		acls, err := toACLs(binding(func(c *kmsg.CreateACLsRequestCreation) { c.Operation = k }))
		if err != nil || len(acls) != 1 || acls[0].Operation != op {
			t.Fatalf("%v: %+v %v", k, acls, err)
		}
		if _, acl := aclOf(acls[0]); acl.Operation != k {
			t.Fatalf("%s described as %v, want %v", op, acl.Operation, k)
		}
	}
	onCluster := func(op kmsg.ACLOperation) func(*kmsg.CreateACLsRequestCreation) {
		return func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourceType, c.ResourceName, c.Operation = kmsg.ACLResourceTypeCluster, cluster.ClusterName, op
		}
	}
	if acls, err := toACLs(binding(onCluster(kmsg.ACLOperationAlter))); err != nil || len(acls) != 1 ||
		acls[0] != (cluster.ACL{Principal: "alice", Resource: cluster.ResourceCluster, Topic: cluster.ClusterName, Operation: cluster.OpAlter}) {
		t.Fatalf("CLUSTER ALTER: %+v %v", acls, err)
	} else if res, acl := aclOf(acls[0]); res.ResourceType != kmsg.ACLResourceTypeCluster || res.ResourceName != cluster.ClusterName || acl.Operation != kmsg.ACLOperationAlter {
		t.Fatalf("CLUSTER ALTER described as %+v %+v", res, acl)
	}
	onGroup := func(op kmsg.ACLOperation) func(*kmsg.CreateACLsRequestCreation) {
		return func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourceType, c.ResourceName, c.Operation = kmsg.ACLResourceTypeGroup, "g", op
		}
	}
	if acls, err := toACLs(binding(onGroup(kmsg.ACLOperationDelete))); err != nil || len(acls) != 1 || acls[0].Operation != cluster.OpDelete ||
		acls[0].Resource != cluster.ResourceGroup {
		t.Fatalf("GROUP DELETE: %+v %v", acls, err)
	}
	if acls, err := toACLs(binding(onGroup(kmsg.ACLOperationAll))); err != nil || len(acls) != 3 {
		t.Fatalf("GROUP ALL: %+v %v", acls, err)
	}
	if acls, err := toACLs(binding(onGroup(kmsg.ACLOperationDescribe))); err != nil || len(acls) != 1 || acls[0].Operation != cluster.OpDescribe {
		t.Fatalf("GROUP DESCRIBE: %+v %v", acls, err)
	} else if res, acl := aclOf(acls[0]); res.ResourceType != kmsg.ACLResourceTypeGroup || acl.Operation != kmsg.ACLOperationDescribe {
		t.Fatalf("GROUP DESCRIBE described as %+v %+v", res, acl)
	}
	if _, err := toACLs(binding(onGroup(kmsg.ACLOperationAlter))); err == nil {
		t.Fatal("GROUP ALTER accepted")
	}
	onTxn := func(op kmsg.ACLOperation) func(*kmsg.CreateACLsRequestCreation) {
		return func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourceType, c.ResourceName, c.Operation = kmsg.ACLResourceTypeTransactionalId, "tx", op
		}
	}
	if acls, err := toACLs(binding(onTxn(kmsg.ACLOperationDescribe))); err != nil || len(acls) != 1 ||
		acls[0] != (cluster.ACL{Principal: "alice", Resource: cluster.ResourceTransactionalID, Topic: "tx", Operation: cluster.OpDescribe}) {
		t.Fatalf("TRANSACTIONAL_ID DESCRIBE: %+v %v", acls, err)
	}
	if acls, err := toACLs(binding(onTxn(kmsg.ACLOperationAll))); err != nil || len(acls) != 2 {
		t.Fatalf("TRANSACTIONAL_ID ALL: %+v %v", acls, err)
	}
	if _, err := toACLs(binding(onTxn(kmsg.ACLOperationRead))); err == nil {
		t.Fatal("TRANSACTIONAL_ID READ accepted")
	}
	if acls, err := toACLs(binding(onCluster(kmsg.ACLOperationAll))); err != nil || len(acls) != 6 {
		t.Fatalf("CLUSTER ALL: %+v %v", acls, err)
	}
	if acls, err := toACLs(binding(func(c *kmsg.CreateACLsRequestCreation) { c.Host = "10.0.0.1" })); err != nil || len(acls) != 1 || acls[0].Host != "10.0.0.1" {
		t.Fatalf("an ACL of one host: %+v %v", acls, err)
	}
	if acls, err := toACLs(binding(func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationAll })); err != nil || acls[0].Host != "" || acls[1].Host != "" {
		t.Fatalf("host * is every host, stored as none: %+v %v", acls, err)
	}
	deny := binding(func(c *kmsg.CreateACLsRequestCreation) {
		c.PermissionType, c.ResourcePatternType, c.ResourceName = kmsg.ACLPermissionTypeDeny, kmsg.ACLResourcePatternTypePrefixed, "ord"
	})
	if acls, err := toACLs(deny); err != nil || len(acls) != 1 || acls[0] != (cluster.ACL{Principal: "alice", Topic: "ord", Operation: cluster.OpProduce, Pattern: cluster.PatternPrefixed, Deny: true}) {
		t.Fatalf("a prefixed DENY: %+v %v", acls, err)
	}
	for name, mod := range map[string]func(*kmsg.CreateACLsRequestCreation){
		"prefixed *": func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourcePatternType, c.ResourceName = kmsg.ACLResourcePatternTypePrefixed, "*"
		},
		"match":               func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch },
		"unknown permission":  func(c *kmsg.CreateACLsRequestCreation) { c.PermissionType = kmsg.ACLPermissionTypeAny },
		"bad host":            func(c *kmsg.CreateACLsRequestCreation) { c.Host = "10.0.0.0/8" },
		"group":               func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeGroup },
		"cluster action":      func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationClusterAction },
		"CLUSTER_ACTION":      onCluster(kmsg.ACLOperationClusterAction),
		"READ on the cluster": onCluster(kmsg.ACLOperationRead),
		"another cluster's name": func(c *kmsg.CreateACLsRequestCreation) {
			onCluster(kmsg.ACLOperationAlter)(c)
			c.ResourceName = "other"
		},
		"IDEMPOTENT_WRITE on a topic": func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationIdempotentWrite },
		"alter of a group": func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourceType, c.Operation = kmsg.ACLResourceTypeGroup, kmsg.ACLOperationAlter
		},
		"principal": func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "Group:ops" },
		"bad topic": func(c *kmsg.CreateACLsRequestCreation) { c.ResourceName = "no spaces" },
	} {
		if _, err := toACLs(binding(mod)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	f := aclFilter{typ: kmsg.ACLResourceTypeAny, pattern: kmsg.ACLResourcePatternTypeMatch, name: kmsg.StringPtr("orders"), op: kmsg.ACLOperationAny, perm: kmsg.ACLPermissionTypeAny}
	if !f.matches(cluster.ACL{Principal: "a", Topic: "orders", Operation: cluster.OpConsume}) || !f.matches(cluster.ACL{Principal: "a", Topic: "*", Operation: cluster.OpConsume}) ||
		f.matches(cluster.ACL{Principal: "a", Topic: "audit", Operation: cluster.OpConsume}) ||
		!f.matches(cluster.ACL{Principal: "a", Topic: "ord", Pattern: cluster.PatternPrefixed, Operation: cluster.OpConsume}) ||
		f.matches(cluster.ACL{Principal: "a", Topic: "orders-", Pattern: cluster.PatternPrefixed, Operation: cluster.OpConsume}) {
		t.Fatal("a MATCH filter on orders selects the wrong ACLs")
	}
	lit := aclFilter{typ: kmsg.ACLResourceTypeAny, pattern: kmsg.ACLResourcePatternTypeLiteral, name: kmsg.StringPtr("ord"), op: kmsg.ACLOperationAny, perm: kmsg.ACLPermissionTypeDeny}
	if lit.matches(cluster.ACL{Principal: "a", Topic: "ord", Pattern: cluster.PatternPrefixed, Operation: cluster.OpConsume, Deny: true}) ||
		!lit.matches(cluster.ACL{Principal: "a", Topic: "ord", Operation: cluster.OpConsume, Deny: true}) ||
		lit.matches(cluster.ACL{Principal: "a", Topic: "ord", Operation: cluster.OpConsume}) {
		t.Fatal("a LITERAL DENY filter on ord selects the wrong ACLs")
	}
	f.op = kmsg.ACLOperationWrite
	if f.matches(cluster.ACL{Principal: "a", Topic: "orders", Operation: cluster.OpConsume}) {
		t.Fatal("a WRITE filter selects a consume ACL")
	}
}

// TestInitProducerID checks the producer id path and its refusals.
func TestInitProducerID(t *testing.T) {
	b, _, _ := testBroker(true)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	resp := b.initProducerID(context.Background(), connAs("alice"), req).Msg.(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID != 1000 || resp.ProducerEpoch != 0 {
		t.Fatalf("alice (produce ACL): %+v", resp)
	}
	resp = b.initProducerID(context.Background(), connAs("nobody"), req).Msg.(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != int16(protocol.ClusterAuthorizationFailed) {
		t.Fatalf("a principal without produce rights: %+v", resp)
	}
	// A transactional id is its coordinator's (a frontend's own route).
	req.TransactionalID = kmsg.StringPtr("tx")
	resp = b.initProducerID(context.Background(), connAs("alice"), req).Msg.(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != int16(protocol.NotCoordinator) {
		t.Fatalf("a transactional producer: %+v", resp)
	}
}

// TestCreateTopicsWithoutReplicationFactor: CreateTopics with -1 leaves the
// replication factor to metadata (the cluster's default, at most one per
// live node); validate_only answers what that would be here (2 live nodes).
func TestCreateTopicsWithoutReplicationFactor(t *testing.T) {
	b, _, a := testBroker(false)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fresh", 2, -1
	req.Topics = append(req.Topics, rt)
	req.ValidateOnly = true
	resp := b.createTopics(context.Background(), connAs(""), req).Msg.(*kmsg.CreateTopicsResponse)
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.ReplicationFactor != 2 || len(a.created) != 0 {
		t.Fatalf("validate only: code %d, replication factor %d, created %v", got.ErrorCode, got.ReplicationFactor, a.created)
	}
	req.ValidateOnly = false
	resp = b.createTopics(context.Background(), connAs(""), req).Msg.(*kmsg.CreateTopicsResponse)
	if resp.Topics[0].ErrorCode != 0 || len(a.created) != 1 || a.created[0].ReplicationFactor != cluster.DefaultRF {
		t.Fatalf("create: code %d, sent %+v", resp.Topics[0].ErrorCode, a.created)
	}
}

// TestDescribeTopicPartitions: topics by name with Metadata's partitions,
// paged by the partition limit and the cursor; hidden and missing topics
// asked for answer their errors; a cursor outside the topics asked for is
// INVALID_REQUEST; the internal __consumer_offsets is listed, as internal.
func TestDescribeTopicPartitions(t *testing.T) {
	b, _, _ := testBroker(true)
	ask := func(who string, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		for _, n := range topics {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = n
			req.Topics = append(req.Topics, rt)
		}
		return b.describeTopicPartitions(context.Background(), connAs(who), req).Msg.(*kmsg.DescribeTopicPartitionsResponse)
	}
	// summary is "topic:code:partitions..." per topic, then ">topic/partition" for the cursor.
	summary := func(resp *kmsg.DescribeTopicPartitionsResponse) string {
		var out []string
		for _, rt := range resp.Topics {
			s := fmt.Sprintf("%s:%d:", *rt.Topic, rt.ErrorCode)
			for _, p := range rt.Partitions {
				s += fmt.Sprint(p.Partition)
			}
			out = append(out, s)
		}
		if c := resp.NextCursor; c != nil {
			out = append(out, fmt.Sprintf(">%s/%d", c.Topic, c.Partition))
		}
		return strings.Join(out, " ")
	}
	cursor := func(topic string, p int32) *kmsg.DescribeTopicPartitionsRequestCursor {
		return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: p}
	}
	internal := "" // the internal topic's partitions, 0 to 49
	for p := range groups.OffsetsLogPartitions {
		internal += fmt.Sprint(p)
	}
	for _, tc := range []struct {
		name string
		resp *kmsg.DescribeTopicPartitionsResponse
		want string
	}{
		{"every topic", ask("root", 0, nil), "__consumer_offsets:0:" + internal + " audit:0:0 orders:0:01"},
		{"a page of two", ask("root", 2, nil), "__consumer_offsets:0:01 >__consumer_offsets/2"},
		{"a page of two from audit", ask("root", 2, cursor("audit", 0)), "audit:0:0 orders:0:0 >orders/1"},
		{"the next page", ask("root", 2, cursor("orders", 1)), "orders:0:1"},
		{"a page ending with a topic", ask("root", 1, cursor("audit", 0)), "audit:0:0 >orders/0"},
		{"hidden and missing", ask("alice", 0, nil, "orders", "nope", "audit"), "audit:29: nope:29: orders:0:01"},
		{"missing", ask("root", 0, nil, "nope"), "nope:3:"},
		{"a cursor not asked for", ask("root", 0, cursor("audit", 0), "orders"), "orders:42:"},
		{"alice's every topic", ask("alice", 0, nil), "orders:0:01"},
	} {
		if got := summary(tc.resp); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if resp := ask("root", 0, nil, groups.OffsetsLogTopic); !resp.Topics[0].IsInternal || len(resp.Topics[0].Partitions) != groups.OffsetsLogPartitions {
		t.Fatalf("__consumer_offsets: %+v", resp.Topics[0])
	}
	// The partitions are Metadata's: leader, epoch, replicas, ISR.
	resp := ask("root", 0, nil, "orders")
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.LeaderID < cluster.FrontendIDBase || p0.LeaderEpoch != 4 || !slices.Equal(p0.Replicas, []int32{1, 2}) || !slices.Equal(p0.ISR, []int32{1, 2}) ||
		p1.LeaderID != -1 || p1.ErrorCode != int16(protocol.LeaderNotAvailable) || resp.Topics[0].AuthorizedOperations == opsNotRequested {
		t.Fatalf("orders: %+v %+v", p0, p1)
	}
}

// TestRoutesServeTheAdminAPIs: every broker advertises the admin APIs it
// answers (ApiVersions lists the routes).
func TestRoutesServeTheAdminAPIs(t *testing.T) {
	b, _, _ := testBroker(false)
	routes := b.Routes()
	for _, k := range []kmsg.Key{kmsg.ElectLeaders, kmsg.AlterPartitionAssignments, kmsg.ListPartitionReassignments, kmsg.DescribeClientQuotas,
		kmsg.AlterClientQuotas, kmsg.DescribeUserSCRAMCredentials, kmsg.AlterUserSCRAMCredentials, kmsg.DescribeTopicPartitions} {
		if r, ok := routes[k.Int16()]; !ok || r.Handle == nil {
			t.Errorf("%s (%d) is not routed", k.Name(), k)
		}
	}
}

// TestACLChangesRefreshTheModel: CreateAcls and DeleteAcls that change
// something refresh the broker's model, so that the client's next
// DescribeAcls at the same broker sees the change; a refused one does not.
func TestACLChangesRefreshTheModel(t *testing.T) {
	b, m, a := testBroker(true)
	create := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "audit", kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, cr)
	if resp := b.createACLs(context.Background(), connAs("alice"), create).Msg.(*kmsg.CreateACLsResponse); resp.Results[0].ErrorCode == 0 || m.refreshes != 0 {
		t.Fatalf("alice creating an ACL: error %d, %d refreshes", resp.Results[0].ErrorCode, m.refreshes)
	}
	if resp := b.createACLs(context.Background(), connAs("root"), create).Msg.(*kmsg.CreateACLsResponse); resp.Results[0].ErrorCode != 0 || len(a.acls) != 1 || m.refreshes != 1 {
		t.Fatalf("root creating an ACL: error %d, %d ACLs sent, %d refreshes", resp.Results[0].ErrorCode, len(a.acls), m.refreshes)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	if resp := b.deleteACLs(context.Background(), connAs("root"), del).Msg.(*kmsg.DeleteACLsResponse); len(resp.Results[0].MatchingACLs) != 1 || m.refreshes != 2 {
		t.Fatalf("root deleting the model's ACL: %+v, %d refreshes", resp.Results, m.refreshes)
	}
}
