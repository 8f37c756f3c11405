// Package kafkaapi is the frontend's Kafka listener: the broker Kafka
// clients bootstrap from, produce to and administer through.
//
// Every frontend registers its listener with metadata (Member) and appears
// in Kafka Metadata as a broker; the frontends share the partitions'
// leadership among them (cluster.Snapshot.KafkaLeader), though each routes
// every partition. The requests every broker answers alike (Metadata,
// admin, ACLs, producer ids) are libs/server/kafka's Broker; this package adds the
// data path:
//
//   - Produce: each partition's record batches go to the partition's
//     storage leader untouched, through the producer's retry path
//     (produce.ProduceRecords); acks 0, 1 and -1 are Sluice's none, leader
//     and all. A connection's requests are served at once and answered in
//     order; per partition they queue in a lane (lanes.go) that keeps one
//     storage request in flight and joins the batches waiting meanwhile, so
//     each partition's batches reach its leader in request order.
//   - Fetch: a client that follows KIP-392 (Fetch v11+) is sent to the
//     storage node that leads the partition (its preferred read replica),
//     whose own Kafka listener sends the records with sendfile; the
//     frontend first asks the leader for one batch without waiting, so an
//     offset out of range or a stale leader epoch is answered here, where
//     the client expects such answers from a leader. Older clients, and
//     partitions whose leader has no Kafka listener, get the records
//     through the frontend.
//   - ListOffsets, OffsetForLeaderEpoch and DeleteRecords go to the
//     storage leader.
//   - Groups and transactions: the frontend is the coordinator Kafka
//     clients find for a group or a transactional id, and relays their
//     requests to the offsets service (groups.go, commits.go, txns.go).
package kafkaapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/server/quota"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
	"github.com/sluicemq/sluice/services/frontend/internal/txnjoin"
)

// Config configures the frontend's Kafka listener.
type Config struct {
	Listener kafka.Config
	// Rack is the frontend's rack, given to Kafka clients.
	Rack string
	// RequireAuth checks every request against the ACLs (the frontend's
	// -require-auth).
	RequireAuth bool
	// Heartbeat is the interval of the frontend's heartbeats to metadata.
	Heartbeat time.Duration
}

// Service is the frontend's Kafka listener and what it serves.
type Service struct {
	cfg      Config
	cache    *metacache.Cache
	producer *produce.Producer
	fetcher  *fetch.Fetcher
	member   *Member
	broker   *kafka.Broker
	server   *kafka.Server
	quotas   *quota.Limiter
	groups   *groups.Client
	txns     *txns.Client
	shares   *shares.Client
	share    shareState // Kafka share groups' members and sessions (share.go)
	sessions *kafka.FetchSessions
	joiner   *txnjoin.Joiner // brings transactional produces' partitions into their transactions
	log      *slog.Logger
	// idempotentProducerID is the broker's InitProducerId (no
	// transactional id).
	idempotentProducerID kafka.Handler
	senders              sync.WaitGroup // the lanes' senders (lanes.go)
}

// Deps is what the listener serves from: the frontend's cluster model,
// producer and fetcher (the data path), the metadata, offsets, transaction
// and share-group clients, the transactional produces' joiner, the
// listener's registration with metadata, the client quota buckets (shared
// with the HTTP API), the Kafka metrics and the log.
type Deps struct {
	Cache    *metacache.Cache
	Producer *produce.Producer
	Fetcher  *fetch.Fetcher
	Meta     *cluster.Client
	Groups   *groups.Client
	Txns     *txns.Client
	Shares   *shares.Client
	Joiner   *txnjoin.Joiner
	Member   *Member
	Quotas   *quota.Limiter
	Metrics  *kafka.Metrics
	Log      *slog.Logger
}

// New builds the listener (it listens at once; Start serves).
func New(cfg Config, d Deps) (*Service, error) {
	s := &Service{cfg: cfg, cache: d.Cache, producer: d.Producer, fetcher: d.Fetcher, member: d.Member, quotas: d.Quotas, groups: d.Groups,
		txns: d.Txns, shares: d.Shares, joiner: d.Joiner, log: d.Log, sessions: kafka.NewFetchSessions(cfg.Listener.FetchSessions, d.Metrics),
		share: shareState{members: map[shareMemberKey]*shareMember{}, sessions: map[shareMemberKey]*shareSession{}}}
	s.broker = kafka.NewBroker(kafka.BrokerConfig{Authorize: cfg.RequireAuth, Groups: kafka.ShareGroupConfigs{Client: d.Shares}}, d.Member.ID, d.Cache, d.Meta, d.Log)
	routes := s.broker.Routes()
	s.idempotentProducerID = routes[kmsg.InitProducerID.Int16()].Handle
	routes[kmsg.InitProducerID.Int16()] = kafka.Route{Min: 0, Max: 5, Handle: s.initProducerID}
	routes[kmsg.AddPartitionsToTxn.Int16()] = kafka.Route{Min: 0, Max: 3, Handle: s.addPartitionsToTxn}
	routes[kmsg.AddOffsetsToTxn.Int16()] = kafka.Route{Min: 0, Max: 4, Handle: s.addOffsetsToTxn}
	routes[kmsg.TxnOffsetCommit.Int16()] = kafka.Route{Min: 0, Max: 5, Handle: s.txnOffsetCommit}
	routes[kmsg.EndTxn.Int16()] = kafka.Route{Min: 0, Max: 5, Handle: s.endTxn}
	routes[kmsg.DescribeTransactions.Int16()] = kafka.Route{Min: 0, Max: 0, Handle: s.describeTransactions}
	routes[kmsg.ListTransactions.Int16()] = kafka.Route{Min: 0, Max: 1, Handle: s.listTransactions}
	kafka.DataPath{Produce: s.produce, Fetch: s.fetch, ListOffsets: s.listOffsets, OffsetForLeaderEpoch: s.offsetForLeaderEpoch}.AddTo(routes)
	routes[kmsg.DescribeLogDirs.Int16()] = kafka.Route{Min: 1, Max: 4, Handle: s.describeLogDirs}
	routes[kmsg.DeleteRecords.Int16()] = kafka.Route{Min: 0, Max: 2, Handle: s.deleteRecords}
	routes[kmsg.DescribeProducers.Int16()] = kafka.Route{Min: 0, Max: 0, Handle: s.describeProducers}
	routes[kmsg.JoinGroup.Int16()] = kafka.Route{Min: 0, Max: 9, Handle: s.joinGroup}
	routes[kmsg.SyncGroup.Int16()] = kafka.Route{Min: 0, Max: 5, Handle: s.syncGroup}
	routes[kmsg.Heartbeat.Int16()] = kafka.Route{Min: 0, Max: 4, Handle: s.heartbeat}
	routes[kmsg.LeaveGroup.Int16()] = kafka.Route{Min: 0, Max: 5, Handle: s.leaveGroup}
	routes[kmsg.OffsetCommit.Int16()] = kafka.Route{Min: 2, Max: 10, Handle: s.offsetCommit}
	routes[kmsg.OffsetFetch.Int16()] = kafka.Route{Min: 1, Max: 10, Handle: s.offsetFetch}
	routes[kmsg.OffsetDelete.Int16()] = kafka.Route{Min: 0, Max: 0, Handle: s.offsetDelete}
	routes[kmsg.ListGroups.Int16()] = kafka.Route{Min: 0, Max: 5, Handle: s.listGroups}
	routes[kmsg.DescribeGroups.Int16()] = kafka.Route{Min: 0, Max: 6, Handle: s.describeGroups}
	routes[kmsg.DeleteGroups.Int16()] = kafka.Route{Min: 0, Max: 2, Handle: s.deleteGroups}
	routes[kmsg.ConsumerGroupHeartbeat.Int16()] = kafka.Route{Min: 0, Max: 1, Handle: s.consumerGroupHeartbeat}
	routes[kmsg.ConsumerGroupDescribe.Int16()] = kafka.Route{Min: 0, Max: 1, Handle: s.consumerGroupDescribe}
	routes[kmsg.ShareGroupHeartbeat.Int16()] = kafka.Route{Min: 1, Max: 1, Handle: s.shareGroupHeartbeat}
	routes[kmsg.ShareGroupDescribe.Int16()] = kafka.Route{Min: 1, Max: 1, Handle: s.shareGroupDescribe}
	routes[kmsg.ShareFetch.Int16()] = kafka.Route{Min: 1, Max: 2, Handle: s.shareFetch}
	routes[kmsg.ShareAcknowledge.Int16()] = kafka.Route{Min: 1, Max: 2, Handle: s.shareAcknowledge}
	routes[kmsg.DescribeShareGroupOffsets.Int16()] = kafka.Route{Min: 0, Max: 1, Handle: s.describeShareGroupOffsets}
	routes[kmsg.AlterShareGroupOffsets.Int16()] = kafka.Route{Min: 0, Max: 0, Handle: s.alterShareGroupOffsets}
	routes[kmsg.DeleteShareGroupOffsets.Int16()] = kafka.Route{Min: 0, Max: 0, Handle: s.deleteShareGroupOffsets}
	srv, err := kafka.NewServer(cfg.Listener, routes, d.Cache.Snapshot, d.Metrics, d.Log)
	if err != nil {
		return nil, err
	}
	s.server = srv
	return s, nil
}

// Start serves connections.
func (s *Service) Start() { s.server.Start() }

// Stop closes the listener and its connections, and waits for the lanes'
// senders (the connections' ends stop them).
func (s *Service) Stop(ctx context.Context) error {
	err := s.server.Stop(ctx)
	s.senders.Wait()
	return err
}

// Addr is the listener's address.
func (s *Service) Addr() string { return s.server.Addr() }

// describeLogDirs answers DescribeLogDirs: a frontend holds no logs.
func (s *Service) describeLogDirs(_ context.Context, _ *kafka.Conn, _ kmsg.Request) kafka.Reply {
	return kafka.Reply{Msg: kmsg.NewPtrDescribeLogDirsResponse()}
}
