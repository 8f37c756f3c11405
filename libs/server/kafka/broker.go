package kafka

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
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
