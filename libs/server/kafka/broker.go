package kafka

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Model is the cluster model as a broker holds it: the frontend's metadata
// cache, a storage node's membership.
type Model interface {
	// Snapshot returns the newest model held, nil before the first.
	Snapshot() *cluster.Snapshot
	// Refresh reads the model from the metadata service now.
	Refresh(ctx context.Context) (*cluster.Snapshot, error)
}

// Admin is the metadata service's API the admin requests go to;
// *cluster.Client is one.
type Admin interface {
	CreateTopic(ctx context.Context, req cluster.CreateTopicRequest) (*cluster.Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	AlterTopicConfig(ctx context.Context, name string, req cluster.AlterTopicConfigRequest) (*cluster.Topic, error)
	// DescribeTopic reads one topic from the metadata leader
	// (linearizable), fresher than the watched model.
	DescribeTopic(ctx context.Context, name string) (*cluster.Topic, error)
	AddPartitions(ctx context.Context, name string, req cluster.AddPartitionsRequest) (*cluster.Topic, error)
	InitProducerID(ctx context.Context) (cluster.InitProducerIDResponse, error)
	SetClusterConfig(ctx context.Context, req cluster.AlterTopicConfigRequest) (map[string]string, error)
	SetACL(ctx context.Context, a cluster.ACL, delete bool) error
	SetQuota(ctx context.Context, q cluster.Quota) error
	SetPrincipal(ctx context.Context, p cluster.Principal, delete bool) error
	ElectLeaders(ctx context.Context, req cluster.ElectRequest) ([]cluster.ElectResult, error)
	ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) (*cluster.Partition, error)
	CancelReassignment(ctx context.Context, topic string, partition int32) (*cluster.Partition, error)
}

// BrokerConfig configures the requests every broker answers alike.
type BrokerConfig struct {
	// Authorize checks every request against the ACLs of the model, the
	// connection's principal being the SASL user or the certificate name.
	Authorize bool
	// Services are the principals of the cluster's own services, which may
	// do everything (Kafka's super.users).
	Services []string
	// AdminTimeout bounds a request forwarded to the metadata service.
	AdminTimeout time.Duration
	// Groups keeps groups' configs (Kafka's GROUP config resources); nil
	// where the host has no group coordinator to ask.
	Groups GroupConfigs
}

// GroupConfigs keeps groups' configs, which Kafka clients describe and
// alter as GROUP config resources.
type GroupConfigs interface {
	// GroupConfig returns a group's configs, those not set on the group
	// at their defaults.
	GroupConfig(ctx context.Context, c *Conn, group string) ([]GroupConfigEntry, error)
	// AlterGroupConfig makes a change to a group's configs.
	AlterGroupConfig(ctx context.Context, c *Conn, group string, ch GroupConfigChange) error
}

// GroupConfigChange is a change to a group's configs: Set sets configs and
// Delete returns configs to their defaults; with Replace, every config not
// in Set returns to its default. ValidateOnly checks the change and makes
// none.
type GroupConfigChange struct {
	Set                   map[string]string
	Delete                []string
	Replace, ValidateOnly bool
}

// GroupConfigEntry is one config of a group.
type GroupConfigEntry struct {
	Name, Value, Doc string
	Type             kmsg.ConfigType
	Default          bool
}

// Broker answers the requests every broker of the cluster answers alike,
// from the cluster model and the metadata service.
type Broker struct {
	cfg   BrokerConfig
	self  func() int32
	model Model
	admin Admin
	log   *slog.Logger
}

// NewBroker returns a Broker; self returns this broker's Kafka node id (-1
// while it has none).
func NewBroker(cfg BrokerConfig, self func() int32, model Model, admin Admin, log *slog.Logger) *Broker {
	if cfg.AdminTimeout <= 0 {
		cfg.AdminTimeout = 30 * time.Second
	}
	return &Broker{cfg: cfg, self: self, model: model, admin: admin, log: log}
}

// Routes returns the broker's routes; the caller adds its data path.
func (b *Broker) Routes() map[int16]Route {
	return map[int16]Route{
		kmsg.Metadata.Int16():                     {Min: 0, Max: 12, Handle: b.metadata},
		kmsg.DescribeCluster.Int16():              {Min: 0, Max: 2, Handle: b.describeCluster},
		kmsg.DescribeTopicPartitions.Int16():      {Min: 0, Max: 0, Handle: b.describeTopicPartitions},
		kmsg.DescribeClientQuotas.Int16():         {Min: 0, Max: 1, Handle: b.describeClientQuotas},
		kmsg.AlterClientQuotas.Int16():            {Min: 0, Max: 1, Handle: b.alterClientQuotas},
		kmsg.DescribeUserSCRAMCredentials.Int16(): {Min: 0, Max: 0, Handle: b.describeUserScramCredentials},
		kmsg.ElectLeaders.Int16():                 {Min: 0, Max: 2, Handle: b.electLeaders},
		kmsg.AlterPartitionAssignments.Int16():    {Min: 0, Max: 1, Handle: b.alterPartitionReassignments},
		kmsg.ListPartitionReassignments.Int16():   {Min: 0, Max: 0, Handle: b.listPartitionReassignments},
		kmsg.AlterUserSCRAMCredentials.Int16():    {Min: 0, Max: 0, Handle: b.alterUserScramCredentials},
		kmsg.InitProducerID.Int16():               {Min: 0, Max: 5, Handle: b.initProducerID},
		kmsg.CreateTopics.Int16():                 {Min: 2, Max: 7, Handle: b.createTopics},
		kmsg.DeleteTopics.Int16():                 {Min: 1, Max: 6, Handle: b.deleteTopics},
		kmsg.CreatePartitions.Int16():             {Min: 0, Max: 3, Handle: b.createPartitions},
		kmsg.DescribeConfigs.Int16():              {Min: 1, Max: 4, Handle: b.describeConfigs},
		kmsg.AlterConfigs.Int16():                 {Min: 0, Max: 2, Handle: b.alterConfigs},
		kmsg.IncrementalAlterConfigs.Int16():      {Min: 0, Max: 1, Handle: b.incrementalAlterConfigs},
		kmsg.DescribeACLs.Int16():                 {Min: 1, Max: 3, Handle: b.describeACLs},
		kmsg.CreateACLs.Int16():                   {Min: 1, Max: 3, Handle: b.createACLs},
		kmsg.DeleteACLs.Int16():                   {Min: 1, Max: 3, Handle: b.deleteACLs},
		kmsg.FindCoordinator.Int16():              {Min: 0, Max: 6, Handle: b.findCoordinator},
		kmsg.ListGroups.Int16():                   {Min: 0, Max: 5, Handle: b.listNoGroups},
		kmsg.ListTransactions.Int16():             {Min: 0, Max: 1, Handle: b.listNoTransactions},
	}
}

// Snapshot returns the newest model, reading it from metadata when none is
// held yet; nil when there is none to be had.
func (b *Broker) Snapshot(ctx context.Context) *cluster.Snapshot {
	if s := b.model.Snapshot(); s != nil {
		return s
	}
	s, err := b.model.Refresh(ctx)
	if err != nil {
		return nil
	}
	return s
}

// who is a connection's principal as the model knows it.
type who struct {
	check bool // false: authorization is off, or a service acts
	name  string
	p     *cluster.Principal // nil: no principal has the name
	snap  *cluster.Snapshot
}

// Who returns what the connection's principal may do in snap.
func (b *Broker) who(c *Conn, snap *cluster.Snapshot) who {
	name, _ := c.Principal()
	if !b.cfg.Authorize || name != "" && slices.Contains(b.cfg.Services, name) {
		return who{name: name, snap: snap}
	}
	p, _ := snap.Principal(name)
	return who{check: true, name: name, p: p.At(c.Host()), snap: snap}
}

// may reports whether the principal may do op on topic.
func (w who) may(op, topic string) bool {
	return !w.check || w.p != nil && w.snap.Allowed(w.p, op, topic)
}

// describe reports whether the principal may see topic: any right on it.
func (w who) describe(topic string) bool {
	return !w.check || w.p != nil && w.snap.Describes(w.p, topic)
}

// uses reports whether the principal may use the group or transactional
// id (cluster.Snapshot.AllowedResource).
func (w who) uses(resource, name string) bool {
	return !w.check || w.p != nil && w.snap.AllowedResource(w.p, resource, name)
}

// describes reports whether the principal may describe the group or
// transactional id (cluster.Snapshot.DescribesResource).
func (w who) describes(resource, name string) bool {
	return !w.check || w.p != nil && w.snap.DescribesResource(w.p, resource, name)
}

// admin reports whether the principal may change the cluster.
func (w who) admin() bool { return !w.check || w.p != nil && w.p.Admin }

// cluster reports whether the principal may do op on the cluster
// (cluster.Snapshot.AllowedCluster: an admin may).
func (w who) cluster(op string) bool {
	return !w.check || w.p != nil && w.snap.AllowedCluster(w.p, op)
}

// deletesGroup reports whether the principal may delete the group
// (cluster.Snapshot.DeletesGroup: an admin may).
func (w who) deletesGroup(group string) bool {
	return !w.check || w.p != nil && w.snap.DeletesGroup(w.p, group)
}

// producerID reports whether the principal may get an idempotent producer
// id: produce on some topic, or idempotent_write on the cluster.
func (w who) producerID() bool {
	return w.some(cluster.OpProduce) || w.cluster(cluster.OpIdempotentWrite)
}

// some reports whether the principal may do op on some topic.
func (w who) some(op string) bool { return !w.check || w.p != nil && w.snap.AllowedSome(w.p, op) }

// Allowed reports whether the connection's principal may do op on topic in
// the newest model, logging a refusal: the data paths (produce, fetch,
// offsets) ask it for each topic.
func (b *Broker) Allowed(c *Conn, op, topic string) bool {
	return b.permits(c, op, topic, func(w who) bool { return w.may(op, topic) })
}

// Describes reports whether the connection's principal may see topic
// (cluster.Snapshot.Describes), logging a refusal: ListOffsets and
// OffsetForLeaderEpoch ask it, as Kafka asks DESCRIBE.
func (b *Broker) Describes(c *Conn, api, topic string) bool {
	return b.permits(c, api, topic, func(w who) bool { return w.describe(topic) })
}

// UsesGroups reports whether the connection's principal may use the
// consumer group ("" for groups in general: ListGroups), logging a
// refusal: cluster.Snapshot.AllowedResource, the rule of the HTTP path's
// group calls.
func (b *Broker) UsesGroups(c *Conn, api, group string) bool {
	return b.permits(c, api, "group "+group, func(w who) bool { return w.uses(cluster.ResourceGroup, group) })
}

// Transacts reports whether the connection's principal may use the
// transactional id, logging a refusal (cluster.Snapshot.AllowedResource,
// as the transaction coordinator's API checks).
func (b *Broker) Transacts(c *Conn, api, id string) bool {
	return b.permits(c, api, "transactional id "+id, func(w who) bool { return w.uses(cluster.ResourceTransactionalID, id) })
}

// DescribesGroup reports whether the connection's principal may describe
// the group (cluster.Snapshot.DescribesResource), logging a refusal of api
// (none when api is ""): DescribeGroups, OffsetFetch and the group
// describes ask it, as Kafka asks DESCRIBE on the group.
func (b *Broker) DescribesGroup(c *Conn, api, group string) bool {
	return b.permits(c, api, "group "+group, func(w who) bool { return w.describes(cluster.ResourceGroup, group) })
}

// DescribesTransaction reports whether the connection's principal may
// describe the transactional id, logging a refusal of api (none when api
// is ""): DescribeTransactions asks it, ListTransactions lists only those.
func (b *Broker) DescribesTransaction(c *Conn, api, id string) bool {
	return b.permits(c, api, "transactional id "+id, func(w who) bool { return w.describes(cluster.ResourceTransactionalID, id) })
}

// ListsGroup reports whether ListGroups shows the connection's principal
// the group (cluster.Snapshot.ListsGroup), without logging.
func (b *Broker) ListsGroup(c *Conn, group string) bool {
	return b.permits(c, "", "", func(w who) bool { return !w.check || w.p != nil && w.snap.ListsGroup(w.p, group) })
}

// GroupOperations is the authorized-operations field of a group for the
// connection's principal: READ when it may use the group, DESCRIBE when it
// may describe it, DELETE when it may delete it.
func (b *Broker) GroupOperations(c *Conn, group string) int32 {
	if !b.cfg.Authorize {
		return opBits(opRead, opDescribe, opDelete)
	}
	snap := b.model.Snapshot()
	if snap == nil {
		return 0
	}
	w, v := b.who(c, snap), int32(0)
	if w.uses(cluster.ResourceGroup, group) {
		v |= opBits(opRead)
	}
	if w.describes(cluster.ResourceGroup, group) {
		v |= opBits(opDescribe)
	}
	if w.deletesGroup(group) {
		v |= opBits(opDelete)
	}
	return v
}

// Admin reports whether the connection's principal is an admin (or
// authorization is off), logging a refusal.
func (b *Broker) Admin(c *Conn, api string) bool {
	return b.permits(c, api, "the cluster (an admin principal is needed)", who.admin)
}

// DeletesGroup reports whether the connection's principal may delete the
// group (an admin, or a delete ACL on it), logging a refusal.
func (b *Broker) DeletesGroup(c *Conn, group string) bool {
	return b.permits(c, "DeleteGroups", "group "+group, func(w who) bool { return w.deletesGroup(group) })
}

// OnCluster reports whether the connection's principal may do op on the
// cluster (an admin, or a cluster ACL allowing it; always with
// authorization off), logging a refusal.
func (b *Broker) OnCluster(c *Conn, api, op string) bool {
	return b.permits(c, api, "the cluster ("+op+" on it is needed)", func(w who) bool { return w.cluster(op) })
}

// permits reports whether the connection's principal passes ok in the
// newest model (always with authorization off, never without a model),
// logging a refusal of api on what (none when api is "").
func (b *Broker) permits(c *Conn, api, what string, ok func(who) bool) bool {
	if !b.cfg.Authorize {
		return true
	}
	if snap := b.model.Snapshot(); snap != nil && ok(b.who(c, snap)) {
		return true
	}
	if api != "" {
		b.denied(c, api, what)
	}
	return false
}

// adminContext bounds a forwarded admin request by the client's timeout,
// at most the broker's AdminTimeout (which a timeout of 0 or less takes).
func (b *Broker) adminContext(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	timeout := time.Duration(timeoutMs) * time.Millisecond
	if timeout <= 0 || timeout > b.cfg.AdminTimeout {
		timeout = b.cfg.AdminTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// clusterSnapshot is the model for an api that needs op on the cluster:
// nil with CLUSTER_AUTHORIZATION_FAILED for a principal not allowed it, or
// with BROKER_NOT_AVAILABLE while there is no model.
func (b *Broker) clusterSnapshot(ctx context.Context, c *Conn, api, op string) (*cluster.Snapshot, protocol.Code) {
	if !b.OnCluster(c, api, op) {
		return nil, protocol.ClusterAuthorizationFailed
	}
	snap := b.Snapshot(ctx)
	if snap == nil {
		return nil, protocol.BrokerNotAvailable
	}
	return snap, protocol.None
}

// denied logs a refusal and returns its code.
func (b *Broker) denied(c *Conn, api, what string) int16 {
	c.Log().Warn("kafka request denied", "api", api, "what", what)
	return int16(protocol.TopicAuthorizationFailed)
}

// Kafka's ACL operations, as bits of authorized-operations fields.
const (
	opRead            = 3
	opWrite           = 4
	opCreate          = 5
	opDelete          = 6
	opAlter           = 7
	opDescribe        = 8
	opDescribeConfigs = 10
	opAlterConfigs    = 11
	opIdempotentWrite = 12
	// opsNotRequested is what an authorized-operations field holds when the
	// request did not ask for it.
	opsNotRequested = int32(-2147483648)
)

func opBits(ops ...int) int32 {
	var v int32
	for _, o := range ops {
		v |= 1 << o
	}
	return v
}

// topicOps is the authorized-operations field of a topic.
func (w who) topicOps(topic string) int32 {
	if w.admin() {
		return opBits(opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs)
	}
	var v int32
	if w.describe(topic) {
		v |= opBits(opDescribe, opDescribeConfigs)
	}
	if w.may(cluster.OpConsume, topic) {
		v |= opBits(opRead, opDescribe, opDescribeConfigs)
	}
	if w.may(cluster.OpProduce, topic) {
		v |= opBits(opWrite, opDescribe, opDescribeConfigs)
	}
	if w.may(cluster.OpCreate, topic) {
		v |= opBits(opCreate)
	}
	if w.may(cluster.OpDelete, topic) {
		v |= opBits(opDelete, opDescribe)
	}
	if w.may(cluster.OpAlter, topic) {
		v |= opBits(opAlter, opDescribe)
	}
	if w.may(cluster.OpDescribeConfigs, topic) { // alter_configs implies it
		v |= opBits(opDescribeConfigs)
	}
	if w.may(cluster.OpAlterConfigs, topic) {
		v |= opBits(opAlterConfigs)
	}
	return v
}

// clusterOps is the authorized-operations field of the cluster: DESCRIBE
// for every principal (Sluice answers DescribeCluster to all), the rest as
// the principal's rights on the cluster say.
func (w who) clusterOps() int32 {
	v := opBits(opDescribe)
	for op, bit := range map[string]int{cluster.OpCreate: opCreate, cluster.OpAlter: opAlter, cluster.OpDescribeConfigs: opDescribeConfigs,
		cluster.OpAlterConfigs: opAlterConfigs} {
		if w.cluster(op) {
			v |= opBits(bit)
		}
	}
	if w.producerID() {
		v |= opBits(opIdempotentWrite)
	}
	return v
}

// Brokers lists the brokers of snap as Kafka clients see them: the
// registered frontends, then the alive storage nodes with a Kafka listener.
func Brokers(snap *cluster.Snapshot) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	add := func(id int32, addr, rack string) {
		hp, err := splitHostPort(addr)
		if err != nil {
			return
		}
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = id, hp.host, hp.port
		if rack != "" {
			br.Rack = &rack
		}
		out = append(out, br)
	}
	for _, f := range snap.Frontends {
		add(f.ID, f.KafkaAddr, f.Rack)
	}
	for _, n := range snap.Nodes {
		if n.Alive && n.KafkaAddr != "" {
			add(n.ID, n.KafkaAddr, n.Rack)
		}
	}
	return out
}

// controllerID is the broker admin clients send controller requests to: the
// first frontend, or without one the first storage node with a listener.
func controllerID(snap *cluster.Snapshot) int32 {
	if len(snap.Frontends) > 0 {
		return snap.Frontends[0].ID
	}
	for _, n := range snap.Nodes {
		if n.Alive && n.KafkaAddr != "" {
			return n.ID
		}
	}
	return -1
}

// TopicID returns a topic's id as Kafka's 16-byte UUID (zero for topics
// made before ids existed).
func TopicID(t *cluster.Topic) [16]byte {
	var id [16]byte
	if b, err := hex.DecodeString(t.ID); err == nil && len(b) == 16 {
		copy(id[:], b)
	}
	return id
}

// TopicByID finds a topic by its Kafka UUID (none in a nil model, none for
// the zero id).
func TopicByID(snap *cluster.Snapshot, id [16]byte) (*cluster.Topic, bool) {
	if snap == nil || id == ([16]byte{}) {
		return nil, false
	}
	for i := range snap.Topics {
		if TopicID(&snap.Topics[i]) == id {
			return &snap.Topics[i], true
		}
	}
	return nil, false
}

// topicOf finds a topic a request names: by name, or without one by id.
func topicOf(snap *cluster.Snapshot, name *string, id [16]byte) (*cluster.Topic, bool) {
	if name != nil {
		return snap.Topic(*name)
	}
	return TopicByID(snap, id)
}

// LeaderHint is the leader Kafka clients are told to go to for a partition
// (KIP-951's current leader in NOT_LEADER_OR_FOLLOWER answers): the
// frontend snap names as its Kafka leader, at the storage leader's epoch.
// It is false when snap has no such partition or no frontend.
func LeaderHint(snap *cluster.Snapshot, topic string, partition int32) (id, epoch int32, ok bool) {
	if snap == nil {
		return -1, -1, false
	}
	t, found := snap.Topic(topic)
	if !found || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1, false
	}
	f, found := snap.KafkaLeader(topic, partition)
	if !found {
		return -1, -1, false
	}
	return f.ID, t.Partitions[partition].LeaderEpoch, true
}

// AddLeaderEndpoints adds to a produce answer (v10+) the node endpoints of
// the leaders its partitions' hints name, so the client reaches them
// without a metadata round trip.
func AddLeaderEndpoints(snap *cluster.Snapshot, resp *kmsg.ProduceResponse) {
	if snap == nil {
		return
	}
	named := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.CurrentLeader.LeaderID >= 0 {
				named[p.CurrentLeader.LeaderID] = true
			}
		}
	}
	for _, b := range Brokers(snap) {
		if named[b.NodeID] {
			pb := kmsg.NewProduceResponseBroker()
			pb.NodeID, pb.Host, pb.Port, pb.Rack = b.NodeID, b.Host, b.Port, b.Rack
			resp.Brokers = append(resp.Brokers, pb)
		}
	}
}

// metadata answers Metadata: brokers, cluster and controller ids, and the
// topics asked for (every topic the principal may see when none are named),
// creating missing ones when the cluster allows it.
func (b *Broker) metadata(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	resp.ControllerID = -1
	snap := b.Snapshot(ctx)
	if snap == nil {
		for _, t := range r.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = t.Topic, t.TopicID, int16(protocol.LeaderNotAvailable)
			resp.Topics = append(resp.Topics, mt)
		}
		return Reply{Msg: resp}
	}
	w := b.who(c, snap)
	resp.Brokers = Brokers(snap)
	resp.ClusterID = &snap.ClusterID
	resp.ControllerID = controllerID(snap)
	if r.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = w.clusterOps()
	} else {
		resp.AuthorizedOperations = opsNotRequested
	}
	if r.Topics == nil || r.Version == 0 && len(r.Topics) == 0 { // v0 has no null: empty is every topic
		resp.Topics = b.everyTopicMetadata(snap, w, r.IncludeTopicAuthorizedOperations)
		return Reply{Msg: resp}
	}
	for _, rt := range r.Topics {
		resp.Topics = append(resp.Topics, b.namedTopicMetadata(ctx, c, snap, w, r, rt))
	}
	return Reply{Msg: resp}
}

// topicOpsIf is the principal's operations on a topic when asked, Kafka's
// "not requested" otherwise.
func (w who) topicOpsIf(asked bool, topic string) int32 {
	if asked {
		return w.topicOps(topic)
	}
	return opsNotRequested
}

// everyTopicMetadata is the metadata of every topic the principal may see,
// the offsets log's included.
func (b *Broker) everyTopicMetadata(snap *cluster.Snapshot, w who, askedOps bool) []kmsg.MetadataResponseTopic {
	var out []kmsg.MetadataResponseTopic
	for i := range snap.Topics {
		t := &snap.Topics[i]
		if w.describe(t.Name) {
			mt := b.topicMetadata(snap, t)
			mt.AuthorizedOperations = w.topicOpsIf(askedOps, t.Name)
			out = append(out, mt)
		}
	}
	if mt, ok := offsetsLogMetadata(snap); ok && w.describe(groups.OffsetsLogTopic) {
		mt.AuthorizedOperations = w.topicOpsIf(askedOps, groups.OffsetsLogTopic)
		out = append(out, mt)
	}
	return out
}

// namedTopicMetadata is the metadata of a topic a request names, by name
// or id: the topic's, or why there is none (creating it when the request
// and the cluster allow).
func (b *Broker) namedTopicMetadata(ctx context.Context, c *Conn, snap *cluster.Snapshot, w who, r *kmsg.MetadataRequest,
	rt kmsg.MetadataRequestTopic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.AuthorizedOperations = rt.Topic, rt.TopicID, opsNotRequested
	t, ok := topicOf(snap, rt.Topic, rt.TopicID)
	switch {
	case IsOffsetsLog(snap, rt.Topic, rt.TopicID) && !w.describe(groups.OffsetsLogTopic):
		mt.ErrorCode = b.denied(c, "Metadata", groups.OffsetsLogTopic)
	case IsOffsetsLog(snap, rt.Topic, rt.TopicID):
		internal, listed := offsetsLogMetadata(snap)
		if !listed {
			mt.ErrorCode = int16(protocol.LeaderNotAvailable) // no frontend serves it yet
			break
		}
		mt = internal
		mt.AuthorizedOperations = w.topicOpsIf(r.IncludeTopicAuthorizedOperations, groups.OffsetsLogTopic)
	case ok && !w.describe(t.Name):
		mt.ErrorCode = b.denied(c, "Metadata", t.Name)
	case ok:
		mt = b.topicMetadata(snap, t)
		mt.AuthorizedOperations = w.topicOpsIf(r.IncludeTopicAuthorizedOperations, t.Name)
	case rt.Topic == nil:
		mt.ErrorCode = int16(protocol.UnknownTopicID)
	case (r.Version < 4 || r.AllowAutoTopicCreation) && snap.Settings().AutoCreateTopics &&
		(w.may(cluster.OpProduce, *rt.Topic) || w.may(cluster.OpCreate, *rt.Topic)):
		mt.ErrorCode = b.autoCreate(ctx, c, snap, *rt.Topic)
	case !w.describe(*rt.Topic):
		// Kafka answers TOPIC_AUTHORIZATION_FAILED for a topic the
		// principal may not see, whether or not it exists.
		mt.ErrorCode = int16(protocol.TopicAuthorizationFailed)
	default:
		mt.ErrorCode = int16(protocol.UnknownTopicOrPartition)
	}
	return mt
}

// autoCreate creates a topic a Metadata request named, with the cluster's
// default shape; the answer is LEADER_NOT_AVAILABLE (the client asks again
// until leaders are elected), or why it could not be created.
func (b *Broker) autoCreate(ctx context.Context, c *Conn, snap *cluster.Snapshot, name string) int16 {
	if err := cluster.ValidateTopicName(name); err != nil {
		return int16(protocol.InvalidTopic)
	}
	set := snap.Settings()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	t, err := b.admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: name, Partitions: set.NumPartitions, ReplicationFactor: cluster.DefaultRF})
	switch {
	case err != nil && protocol.CodeOf(err) != protocol.TopicAlreadyExists:
		c.Log().Warn("kafka topic auto-creation failed", "topic", name, "err", err)
		return protocol.KafkaOf(err, protocol.AdminAnswer)
	case err == nil:
		c.Log().Info("kafka topic auto-created", "topic", name, "partitions", set.NumPartitions, "replication_factor", t.ReplicationFactor)
	}
	_, _ = b.model.Refresh(ctx)
	return int16(protocol.LeaderNotAvailable)
}

// topicMetadata describes a topic: each partition led, for Kafka clients,
// by the frontend cluster.Snapshot.KafkaLeader names, at the storage
// leader's epoch, with the storage replicas and ISR.
func (b *Broker) topicMetadata(snap *cluster.Snapshot, t *cluster.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID = &name, TopicID(t)
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.LeaderEpoch = p.ID, p.LeaderEpoch
		mp.Replicas, mp.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		mp.OfflineReplicas = []int32{}
		for _, id := range p.Replicas {
			if n, ok := snap.Node(id); !ok || !n.Alive {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		mp.Leader = -1
		if f, ok := snap.KafkaLeader(t.Name, p.ID); ok && p.Leader >= 0 {
			mp.Leader = f.ID
		} else {
			mp.ErrorCode = int16(protocol.LeaderNotAvailable)
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// kafkaTopic describes a topic as Metadata does: a data topic, or the
// internal __consumer_offsets when a frontend serves it.
func (b *Broker) kafkaTopic(snap *cluster.Snapshot, name string) (kmsg.MetadataResponseTopic, bool) {
	if name == groups.OffsetsLogTopic {
		return offsetsLogMetadata(snap)
	}
	t, ok := snap.Topic(name)
	if !ok {
		return kmsg.MetadataResponseTopic{}, false
	}
	return b.topicMetadata(snap, t), true
}

// maxDescribedPartitions bounds the partitions one DescribeTopicPartitions
// answer holds (Kafka's max.request.partition.size.limit).
const maxDescribedPartitions = 2000

// describeTopicPartitions answers DescribeTopicPartitions (KIP-966's paged
// Metadata, which the Java admin client's describeTopics uses): the topics
// asked for, or every topic the principal may describe, by name, with the
// partitions as Metadata shows them, at most ResponsePartitionLimit
// partitions (2000 at most) from the cursor on, and the cursor to go on
// from. A cursor naming a topic that was not asked for is INVALID_REQUEST
// on every topic asked for, as in Kafka.
func (b *Broker) describeTopicPartitions(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeTopicPartitionsRequest)
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	failAll := func(code protocol.Code) Reply {
		for _, rt := range r.Topics {
			out := kmsg.NewDescribeTopicPartitionsResponseTopic()
			out.Topic, out.ErrorCode = kmsg.StringPtr(rt.Topic), int16(code)
			resp.Topics = append(resp.Topics, out)
		}
		return Reply{Msg: resp}
	}
	snap := b.Snapshot(ctx)
	if snap == nil {
		return failAll(protocol.LeaderNotAvailable)
	}
	w := b.who(c, snap)
	names := describedTopics(snap, w, r)
	from, fromPartition := "", int32(0)
	if cur := r.Cursor; cur != nil {
		if cur.Partition < 0 || len(r.Topics) > 0 && !slices.Contains(names, cur.Topic) {
			return failAll(protocol.InvalidRequest)
		}
		from, fromPartition = cur.Topic, cur.Partition
	}
	left := r.ResponsePartitionLimit
	if left <= 0 || left > maxDescribedPartitions {
		left = maxDescribedPartitions
	}
	for i, name := range names {
		if name < from {
			continue
		}
		out := kmsg.NewDescribeTopicPartitionsResponseTopic()
		out.Topic = kmsg.StringPtr(name)
		mt, ok := b.kafkaTopic(snap, name)
		switch {
		case !w.describe(name):
			out.ErrorCode = b.denied(c, "DescribeTopicPartitions", name)
		case !ok:
			out.ErrorCode = int16(protocol.UnknownTopicOrPartition)
		default:
			out.TopicID, out.IsInternal, out.AuthorizedOperations = mt.TopicID, mt.IsInternal, w.topicOps(name)
			for _, mp := range mt.Partitions {
				if name == from && mp.Partition < fromPartition {
					continue
				}
				if left == 0 {
					resp.Topics = append(resp.Topics, out)
					resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: mp.Partition}
					return Reply{Msg: resp}
				}
				left--
				out.Partitions = append(out.Partitions, describedPartition(mp))
			}
		}
		resp.Topics = append(resp.Topics, out)
		if left == 0 && i+1 < len(names) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: names[i+1], Partition: 0}
			return Reply{Msg: resp}
		}
	}
	return Reply{Msg: resp}
}

// describedTopics are the names of the topics a DescribeTopicPartitions
// request asks for, sorted: those it names, or every topic the principal
// may describe (the offsets log's included).
func describedTopics(snap *cluster.Snapshot, w who, r *kmsg.DescribeTopicPartitionsRequest) []string {
	var names []string
	for _, rt := range r.Topics {
		names = append(names, rt.Topic)
	}
	if len(names) == 0 {
		for i := range snap.Topics {
			if w.describe(snap.Topics[i].Name) {
				names = append(names, snap.Topics[i].Name)
			}
		}
		if _, listed := offsetsLogMetadata(snap); listed && w.describe(groups.OffsetsLogTopic) {
			names = append(names, groups.OffsetsLogTopic)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// describedPartition is a partition's answer as its metadata has it.
func describedPartition(mp kmsg.MetadataResponseTopicPartition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	p.ErrorCode, p.Partition, p.LeaderID, p.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
	p.Replicas, p.ISR, p.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
	return p
}

// describeCluster answers DescribeCluster (the Java admin client's view of
// the brokers).
func (b *Broker) describeCluster(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType = 1 // brokers
	resp.ControllerID = -1
	resp.ClusterAuthorizedOperations = opsNotRequested
	if r.Version >= 1 && r.EndpointType != 1 {
		resp.ErrorCode = int16(protocol.UnsupportedEndpointType)
		msg := "only the brokers endpoint type (1) is served"
		resp.ErrorMessage = &msg
		return Reply{Msg: resp}
	}
	snap := b.Snapshot(ctx)
	if snap == nil {
		resp.ErrorCode = int16(protocol.BrokerNotAvailable)
		return Reply{Msg: resp}
	}
	resp.ClusterID, resp.ControllerID = snap.ClusterID, controllerID(snap)
	for _, br := range Brokers(snap) {
		d := kmsg.NewDescribeClusterResponseBroker()
		d.NodeID, d.Host, d.Port, d.Rack = br.NodeID, br.Host, br.Port, br.Rack
		resp.Brokers = append(resp.Brokers, d)
	}
	if r.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.who(c, snap).clusterOps()
	}
	return Reply{Msg: resp}
}

// initProducerID hands out an idempotent producer id from the metadata
// service. Kafka does the same for producers without a transactional id:
// a new id at epoch 0 on every call (clients bump the epoch themselves
// after a failed batch, KIP-360, and ask again only when it runs out).
// A transactional id belongs to its coordinator, a frontend (whose own
// route serves it): elsewhere it is NOT_COORDINATOR.
func (b *Broker) initProducerID(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		resp.ErrorCode = int16(protocol.NotCoordinator)
		return Reply{Msg: resp}
	}
	snap := b.Snapshot(ctx)
	if snap != nil && !b.who(c, snap).producerID() {
		c.Log().Warn("kafka request denied", "api", "InitProducerId", "what", "no produce ACL on any topic")
		resp.ErrorCode = int16(protocol.ClusterAuthorizationFailed)
		return Reply{Msg: resp}
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	id, err := b.admin.InitProducerID(ctx)
	if err != nil {
		resp.ErrorCode = int16(retriableOr(err, protocol.CoordinatorNotAvailable))
		c.Log().Warn("kafka producer id not allocated", "err", err)
		return Reply{Msg: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = id.ProducerID, id.ProducerEpoch
	return Reply{Msg: resp}
}

// retriableOr returns err's code when a Kafka client knows it, and
// otherwise fallback (a transport error, a code of Sluice's own).
func retriableOr(err error, fallback protocol.Code) protocol.Code {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code < 1000 && pe.Code != protocol.UnknownServerError {
		return pe.Code
	}
	return fallback
}
