// Package kafkaapi is a storage node's Kafka listener: the broker a Kafka
// consumer is sent to by a frontend (KIP-392's preferred read replica) for
// the partitions this node leads, so that record bytes go from the segment
// file to the client socket with sendfile and never through a frontend.
//
// The node appears in Kafka Metadata as a broker that leads nothing; it
// serves Fetch, ListOffsets and OffsetForLeaderEpoch for the partitions it
// leads, and, as every broker of the cluster does, the requests a client
// sends to any broker (Metadata, admin, ACLs, producer ids) through
// libs/server/kafka's Broker. A fetch for a partition it does not lead is answered
// NOT_LEADER_OR_FOLLOWER naming the frontend Kafka clients see as leader, so
// the client goes back there and is sent to the new storage leader.
package kafkaapi

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/server/quota"
	"github.com/sluicemq/sluice/libs/server/zerocopy"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
	"github.com/sluicemq/sluice/services/storage/internal/server"
	"github.com/sluicemq/sluice/services/storage/internal/tier"
)

// Config configures the storage node's Kafka listener.
type Config struct {
	Listener kafka.Config
	// Authorize checks requests against the ACLs (the node's -authorize);
	// Services are the principals that may do everything.
	Authorize bool
	Services  []string
	// MaxFetchWait caps a fetch's long-poll.
	MaxFetchWait time.Duration
	// Groups keeps groups' configs (nil: none are kept here).
	Groups kafka.GroupConfigs
}

// Service is the storage node's Kafka listener.
type Service struct {
	cfg     Config
	mgr     *replica.Manager
	model   kafka.Model
	broker  *kafka.Broker
	server  *kafka.Server
	metrics *server.Metrics
	quotas  *quota.Limiter
	remote  *tier.Tier // reads below the local log's start (nil: no tiered storage)
	log     *slog.Logger
	// sessions are the listener's fetch sessions (KIP-227).
	sessions *kafka.FetchSessions
}

// Deps is what the listener serves from: the node's replicas, its cluster
// model, the metadata service (admin requests), the node's client quota
// buckets (server.Server.Quotas) and metrics, the Kafka metrics and the
// log.
type Deps struct {
	Replicas     *replica.Manager
	Model        kafka.Model
	Admin        kafka.Admin
	Quotas       *quota.Limiter
	Metrics      *server.Metrics
	KafkaMetrics *kafka.Metrics
	// Remote serves reads below the local log's start (nil: no tiered
	// storage).
	Remote *tier.Tier
	Log    *slog.Logger
}

// New builds the listener (it listens at once; Start serves).
func New(cfg Config, d Deps) (*Service, error) {
	mgr, model, admin, log := d.Replicas, d.Model, d.Admin, d.Log
	if cfg.MaxFetchWait <= 0 {
		cfg.MaxFetchWait = 30 * time.Second
	}
	s := &Service{cfg: cfg, mgr: mgr, model: model, metrics: d.Metrics, quotas: d.Quotas, remote: d.Remote, log: log, sessions: kafka.NewFetchSessions(cfg.Listener.FetchSessions, d.KafkaMetrics)}
	s.broker = kafka.NewBroker(kafka.BrokerConfig{Authorize: cfg.Authorize, Services: cfg.Services, Groups: cfg.Groups}, mgr.Self, model, admin, log)
	routes := s.broker.Routes()
	// Produce is advertised as on every broker (librdkafka takes a broker
	// without it for one that predates RecordBatch v2 and will not fetch
	// from it), and answered NOT_LEADER_OR_FOLLOWER: frontends lead.
	kafka.DataPath{Produce: s.produce, Fetch: s.fetch, ListOffsets: s.listOffsets, OffsetForLeaderEpoch: s.offsetForLeaderEpoch}.AddTo(routes)
	routes[kmsg.DescribeLogDirs.Int16()] = kafka.Route{Min: 1, Max: 4, Handle: s.describeLogDirs}
	srv, err := kafka.NewServer(cfg.Listener, routes, model.Snapshot, d.KafkaMetrics, log)
	if err != nil {
		return nil, err
	}
	s.server = srv
	return s, nil
}

// Start serves connections.
func (s *Service) Start() { s.server.Start() }

// Stop closes the listener and its connections.
func (s *Service) Stop(ctx context.Context) error { return s.server.Stop(ctx) }

// Addr is the listener's address.
func (s *Service) Addr() string { return s.server.Addr() }

// leader returns the replica of a partition this node leads, checking the
// client's leader epoch (-1: no check), or the Kafka error code: a
// partition of the model that this node holds no replica of is
// NOT_LEADER_OR_FOLLOWER, as for one it follows.
func (s *Service) leader(snap *cluster.Snapshot, topic string, partition, epoch int32) (*replica.Replica, int16) {
	r, err := s.mgr.Leader(topic, partition)
	if err == nil {
		err = r.CheckFetcherEpoch(epoch)
	}
	if err == nil {
		return r, 0
	}
	code := codeOf(err)
	if code == int16(protocol.UnknownTopicOrPartition) && snap != nil {
		if t, ok := snap.Topic(topic); ok && partition >= 0 && int(partition) < len(t.Partitions) {
			code = int16(protocol.NotLeaderOrFollower)
		}
	}
	return nil, code
}

// produce answers a produce request sent here by a client with stale
// metadata: NOT_LEADER_OR_FOLLOWER for every partition, naming (v10+) the
// frontend that leads it for Kafka clients.
func (s *Service) produce(_ context.Context, _ *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ProduceRequest)
	if r.Acks == 0 {
		return kafka.Reply{None: true}
	}
	snap := s.model.Snapshot()
	resp := kmsg.NewPtrProduceResponse()
	for _, rt := range r.Topics {
		out := kmsg.NewProduceResponseTopic()
		out.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rp.Partition, -1, -1, -1
			p.ErrorCode = int16(protocol.NotLeaderOrFollower)
			if id, epoch, ok := kafka.LeaderHint(snap, rt.Topic, rp.Partition); ok {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = id, epoch
			}
			out.Partitions = append(out.Partitions, p)
		}
		resp.Topics = append(resp.Topics, out)
	}
	kafka.AddLeaderEndpoints(snap, resp)
	return kafka.Reply{Msg: resp}
}

// codeOf is the Kafka code of a storage error: its wire code
// (server.CodeFor) as a data answer gives it.
func codeOf(err error) int16 { return server.CodeFor(err).Kafka(protocol.DataAnswer) }

// fetchPart is one partition of a fetch being served.
type fetchPart struct {
	r         *replica.Replica
	topic     string
	offset    int64
	maxBytes  int
	isolation int8
	out       *kafka.FetchPartition
	fetched   <-chan struct{} // a remote read's fetch in flight (readPart)
}

// fetch answers Fetch from the partitions' logs: it long-polls until
// MinBytes are below the high watermarks or MaxWait passes, then sends the
// batches by sendfile (through the TLS layer under TLS).
func (s *Service) fetch(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	principal, _ := c.Principal()
	r, session, refused := s.sessions.Begin(req.(*kmsg.FetchRequest), principal)
	if refused != nil {
		return *refused
	}
	body := &kafka.FetchBody{Version: r.Version}
	snap := s.model.Snapshot()
	var parts []*fetchPart
	for _, rt := range r.Topics {
		ft := kafka.FetchTopic{Topic: rt.Topic, TopicID: rt.TopicID, Partitions: make([]kafka.FetchPartition, len(rt.Partitions))}
		name := rt.Topic
		if r.Version >= 13 {
			name = ""
			if t, ok := kafka.TopicByID(snap, rt.TopicID); ok {
				name = t.Name
			}
		}
		body.Topics = append(body.Topics, ft)
		outs := body.Topics[len(body.Topics)-1].Partitions
		for i, rp := range rt.Partitions {
			outs[i] = kafka.NewFetchPartition(rp.Partition)
			out := &outs[i]
			epoch := rp.CurrentLeaderEpoch
			if r.Version < 9 {
				epoch = -1
			}
			switch {
			case name == "":
				out.ErrorCode = int16(protocol.UnknownTopicID)
			case r.ReplicaID >= 0 || r.ReplicaState.ID >= 0:
				out.ErrorCode = int16(protocol.NotLeaderOrFollower) // followers replicate over the storage protocol
			case !s.broker.Allowed(c, cluster.OpConsume, name):
				out.ErrorCode = int16(protocol.TopicAuthorizationFailed)
			default:
				rep, code := s.leader(snap, name, rp.Partition, epoch)
				if code != 0 {
					out.ErrorCode = code
					s.leaderHint(snap, name, out)
					continue
				}
				parts = append(parts, &fetchPart{r: rep, topic: name, offset: rp.FetchOffset, maxBytes: int(rp.PartitionMaxBytes),
					isolation: r.IsolationLevel, out: out})
			}
		}
	}
	wait := min(time.Duration(r.MaxWaitMillis)*time.Millisecond, s.cfg.MaxFetchWait)
	sent := s.poll(ctx, parts, wait, int(r.MinBytes), int(r.MaxBytes))
	body.ThrottleMillis = int32(s.chargeFetch(c, sent) / time.Millisecond)
	session.Finish(body)
	body.Encode()
	return kafka.Reply{Body: body, Throttle: time.Duration(body.ThrottleMillis) * time.Millisecond}
}

// poll reads the partitions until minBytes are there or wait passes, and
// fills their answers; it returns the record bytes answered.
func (s *Service) poll(ctx context.Context, parts []*fetchPart, wait time.Duration, minBytes, maxBytes int) int {
	deadline := time.Now().Add(wait)
	for {
		var chans []<-chan struct{}
		for _, p := range parts {
			chans = append(chans, p.r.Log.Changed(), p.r.Changed())
		}
		got := s.read(parts, maxBytes)
		for _, p := range parts {
			if p.fetched != nil { // a remote read's fetch: read again when it is done
				chans = append(chans, p.fetched)
			}
		}
		left := time.Until(deadline)
		if got >= max(minBytes, 1) || left <= 0 || len(parts) == 0 {
			return got
		}
		for _, p := range parts {
			if p.out.Records != nil {
				p.out.Records.Release()
				p.out.Records = nil
			}
		}
		if !waitAny(ctx, chans, left) {
			if ctx.Err() != nil {
				return 0
			}
			deadline = time.Now() // answer with what there is
		}
	}
}

// read fills each partition's answer with what its log holds below the
// high watermark (the last stable offset at read_committed, with the
// aborted transactions of what it read), within the fetch's byte limits (the first partition with
// records is sent whole, as Kafka does, so a consumer always progresses).
func (s *Service) read(parts []*fetchPart, maxBytes int) int {
	got := 0
	for _, p := range parts {
		p.out.ErrorCode, p.out.Aborted = 0, nil
		view := p.r.ConsumerView(p.isolation)
		p.out.HighWatermark, p.out.LastStableOffset, p.out.LogStartOffset = view.HighWatermark, view.LastStableOffset, p.r.StartOffset()
		p.fetched = nil
		room := p.maxBytes
		if got > 0 {
			room = min(room, maxBytes-got)
		}
		if room <= 0 {
			continue
		}
		sl, aborted, err := s.readPart(p, room, view)
		if err != nil {
			p.out.ErrorCode = codeOf(err)
			continue
		}
		if sl.Size() == 0 {
			sl.Release()
			continue
		}
		got += int(sl.Size())
		p.out.Aborted = aborted
		p.out.Records = &sliceRecords{sl: sl, topic: p.topic, metrics: s.metrics}
	}
	return got
}

// readPart reads one partition of a fetch: below the local log's start
// from remote storage (tiered topics; a fetch in flight is left in
// p.fetched), else from the local log, whose damage is reported (none of
// it is sent; the replica is repaired).
func (s *Service) readPart(p *fetchPart, room int, view replica.ConsumerView) (seglog.Slice, []protocol.AbortedTxn, error) {
	cr, err := s.remote.ReadConsumer(p.r, p.offset, room, view)
	if err != nil {
		s.mgr.ReportCorrupt(p.r, err)
		return seglog.Slice{}, nil, err
	}
	p.fetched = cr.Wait
	return cr.Slice, cr.Aborted, nil
}

// waitAny waits until one of chans is closed (true), or wait passes or ctx
// ends (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)})
	for _, ch := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 2
}

// sliceRecords are a segment range sent with sendfile (copied through the
// TLS layer under TLS).
type sliceRecords struct {
	sl      seglog.Slice
	topic   string
	metrics *server.Metrics
}

func (r *sliceRecords) Len() int { return int(r.sl.Size()) }

func (r *sliceRecords) WriteTo(w *kafka.Writer) error {
	var err error
	if tcp := w.TCP(); tcp != nil {
		err = zerocopy.SendFile(tcp, r.sl.File(), r.sl.Pos(), r.sl.Size())
	} else {
		err = zerocopy.CopyRange(w.Stream(), nil, r.sl.File(), r.sl.Pos(), r.sl.Size())
	}
	if err == nil && r.metrics != nil {
		r.metrics.BytesOut.WithLabelValues(r.topic, "kafka").Add(float64(r.sl.Size()))
		r.metrics.Fetched.WithLabelValues(r.topic, "kafka").Inc()
	}
	return err
}

func (r *sliceRecords) Release() { r.sl.Release() }

// leaderHint names, in a v12+ answer, the frontend Kafka clients see as the
// partition's leader, so they go back there (KIP-951).
func (s *Service) leaderHint(snap *cluster.Snapshot, topic string, out *kafka.FetchPartition) {
	if out.ErrorCode != int16(protocol.NotLeaderOrFollower) && out.ErrorCode != int16(protocol.FencedLeaderEpoch) {
		return
	}
	if id, epoch, ok := kafka.LeaderHint(snap, topic, out.Partition); ok {
		out.Leader.LeaderID, out.Leader.LeaderEpoch = id, epoch
	}
}

// chargeFetch counts the bytes sent against the client's fetch quota and
// returns how long the client should wait before its next fetch.
func (s *Service) chargeFetch(c *kafka.Conn, n int) time.Duration {
	client := cluster.QuotaClientID(c.ClientID()) // the storage protocol's bucket of the client id
	rate := s.mgr.Quota(client).FetchBytesPerSec
	if rate <= 0 {
		return 0
	}
	s.quotas.Charge(client, rate, n)
	if wait := s.quotas.Admit(client, rate); wait > 0 {
		s.metrics.QuotaThrottled.Inc()
		return wait
	}
	return 0
}
