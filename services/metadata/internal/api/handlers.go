package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/placement"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// consistent handles ?consistent=true: on the leader it linearizes (and
// returns true to go on serving); elsewhere it relays the request and returns
// false.
func (s *Server) consistent(ctx *fasthttp.RequestCtx, extra time.Duration) bool {
	v := string(ctx.QueryArgs().Peek("consistent"))
	if v == "" || v == "false" {
		return true
	}
	if v != "true" {
		writeError(ctx, bad(protocol.InvalidRequest, "consistent=%q: want true or false", v))
		return false
	}
	if !s.node.IsLeader() {
		s.relay(ctx, s.cfg.RequestTimeout+extra)
		return false
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	if err := s.node.Linearize(rctx); err != nil {
		writeError(ctx, err)
		return false
	}
	return true
}

// getCluster answers the snapshot, long-polling when since is given.
func (s *Server) getCluster(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	var since uint64
	var wait time.Duration
	if v := args.Peek("since"); len(v) > 0 {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			writeError(ctx, bad(protocol.InvalidRequest, "since=%q is not a version", v))
			return
		}
		since = n
		if w := args.Peek("wait_ms"); len(w) > 0 {
			ms, err := strconv.ParseInt(string(w), 10, 64)
			if err != nil || ms < 0 {
				writeError(ctx, bad(protocol.InvalidRequest, "wait_ms=%q is not a non-negative integer", w))
				return
			}
			wait = min(time.Duration(ms)*time.Millisecond, s.cfg.MaxWait)
		}
	}
	if !s.consistent(ctx, wait) {
		return
	}
	if wait > 0 {
		wctx, cancel := context.WithTimeout(s.base, wait)
		s.waiting.Add(1)
		_, _ = s.fsm.WaitNewer(wctx, since) // a timeout answers the current state
		s.waiting.Add(-1)
		cancel()
	}
	snap := s.fsm.Cluster()
	_, snap.Leader = s.node.Leader()
	service.WriteJSON(ctx, http.StatusOK, view(ctx, snap))
}

func (s *Server) listTopics(ctx *fasthttp.RequestCtx) {
	if !s.consistent(ctx, 0) {
		return
	}
	service.WriteJSON(ctx, http.StatusOK, struct {
		Topics []cluster.Topic `json:"topics"`
	}{s.fsm.Topics()})
}

func (s *Server) describeTopic(ctx *fasthttp.RequestCtx, name string) {
	if !s.consistent(ctx, 0) {
		return
	}
	t, ok := s.fsm.Topic(name)
	if !ok {
		writeError(ctx, bad(protocol.UnknownTopicOrPartition, "topic %q does not exist", name))
		return
	}
	service.WriteJSON(ctx, http.StatusOK, t)
}

// createTopic validates, places and commits a topic. Runs on the leader. A
// request without a replication factor (0, or Kafka's -1) gets the
// cluster's default, lowered to the live storage nodes (with a warning)
// when there are fewer.
func (s *Server) createTopic(ctx *fasthttp.RequestCtx) {
	var req cluster.CreateTopicRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	live := placement.LiveNodes(s.fsm.Nodes())
	if req.ReplicationFactor == cluster.DefaultRF || req.ReplicationFactor == 0 {
		settings := s.fsm.Settings()
		rf, short := settings.DefaultReplicationFactor(len(live))
		if short {
			s.log.Warn("topic created with fewer replicas than default.replication.factor: too few live storage nodes",
				"topic", req.Name, "replication_factor", rf, "default_replication_factor", settings.ReplicationFactor, "live_storage_nodes", len(live))
		}
		req.ReplicationFactor = rf
	}
	if err := validateCreate(req); err != nil {
		writeError(ctx, err)
		return
	}
	if _, ok := s.fsm.Topic(req.Name); ok {
		writeError(ctx, bad(protocol.TopicAlreadyExists, "topic %q already exists", req.Name))
		return
	}
	replicas, err := s.placing.place(req.Name, live, s.fsm.Topics, req.Partitions, req.ReplicationFactor)
	if err != nil {
		writeError(ctx, err)
		return
	}
	defer s.placing.done(req.Name)
	rctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.node.Propose(rctx, fsm.Command{Type: fsm.TypeCreateTopic, CreateTopic: &fsm.CreateTopic{
		Name: req.Name, ID: newTopicID(), ReplicationFactor: req.ReplicationFactor, Config: req.Config, Replicas: replicas,
	}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		writeError(ctx, err)
		return
	}
	s.log.Info("topic created", "topic", req.Name, "partitions", req.Partitions, "replication_factor", req.ReplicationFactor, "version", res.Index)
	service.WriteJSON(ctx, http.StatusCreated, res.Topic)
}

// validateCreate checks a create request with the wire code of each problem.
func validateCreate(req cluster.CreateTopicRequest) error {
	if err := cluster.ValidateTopicName(req.Name); err != nil {
		return bad(protocol.InvalidTopic, "%v", err)
	}
	if req.Name == groups.OffsetsLogTopic {
		return bad(protocol.TopicAlreadyExists, "%s is Kafka's internal topic, served from the offsets service", req.Name)
	}
	if req.Partitions < 1 || req.Partitions > cluster.MaxPartitions {
		return bad(protocol.InvalidPartitions, "partitions must be within 1..%d, got %d", cluster.MaxPartitions, req.Partitions)
	}
	if req.ReplicationFactor < 1 {
		return bad(protocol.InvalidReplicationFactor, "replication_factor must be at least 1, got %d", req.ReplicationFactor)
	}
	if _, err := cluster.ParseTopicConfig(req.Config, req.ReplicationFactor); err != nil {
		return bad(protocol.InvalidConfig, "%v", err)
	}
	return nil
}

// deleteTopic commits a topic's deletion. Runs on the leader.
func (s *Server) deleteTopic(ctx *fasthttp.RequestCtx, name string) {
	if _, ok := s.fsm.Topic(name); !ok {
		writeError(ctx, bad(protocol.UnknownTopicOrPartition, "topic %q does not exist", name))
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.node.Propose(rctx, fsm.Command{Type: fsm.TypeDeleteTopic, DeleteTopic: &fsm.DeleteTopic{Name: name}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		writeError(ctx, err)
		return
	}
	s.log.Info("topic deleted", "topic", name, "version", res.Index)
	service.WriteJSON(ctx, http.StatusOK, struct{}{})
}

// alterTopicConfig commits a change of a topic's configuration. Runs on the
// leader; storage nodes apply the new configuration when they see it.
func (s *Server) alterTopicConfig(ctx *fasthttp.RequestCtx, name string) {
	var req cluster.AlterTopicConfigRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	if len(req.Set) == 0 && len(req.Delete) == 0 {
		writeError(ctx, bad(protocol.InvalidRequest, "nothing to change: give set and/or delete"))
		return
	}
	for _, k := range req.Delete {
		if _, set := req.Set[k]; set {
			writeError(ctx, bad(protocol.InvalidRequest, "%q is both set and deleted", k))
			return
		}
	}
	cmd := fsm.AlterTopicConfig{Name: name, Set: req.Set, Delete: req.Delete}
	if err := s.fsm.CheckAlterTopicConfig(cmd); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.node.Propose(rctx, fsm.Command{Type: fsm.TypeAlterTopicConfig, AlterTopicConfig: &cmd})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		writeError(ctx, err)
		return
	}
	s.log.Info("topic config altered", "topic", name, "set", req.Set, "delete", req.Delete, "version", res.Index)
	service.WriteJSON(ctx, http.StatusOK, res.Topic)
}

// addPartitions places and commits new partitions of a topic. Runs on the
// leader.
func (s *Server) addPartitions(ctx *fasthttp.RequestCtx, name string) {
	var req cluster.AddPartitionsRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	t, ok := s.fsm.Topic(name)
	if !ok {
		writeError(ctx, bad(protocol.UnknownTopicOrPartition, "topic %q does not exist", name))
		return
	}
	have := len(t.Partitions)
	if req.Partitions <= have || req.Partitions > cluster.MaxPartitions {
		writeError(ctx, bad(protocol.InvalidPartitions, "topic %q has %d partitions: the new count must be within %d..%d, got %d",
			name, have, have+1, cluster.MaxPartitions, req.Partitions))
		return
	}
	replicas, err := placement.Assign(placement.LiveNodes(s.fsm.Nodes()), s.fsm.Topics(), req.Partitions-have, t.ReplicationFactor)
	if err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.node.Propose(rctx, fsm.Command{Type: fsm.TypeAddPartitions, AddPartitions: &fsm.AddPartitions{
		Name: name, From: have, Replicas: replicas}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		writeError(ctx, err)
		return
	}
	s.log.Info("partitions added", "topic", name, "from", have, "to", req.Partitions, "version", res.Index)
	service.WriteJSON(ctx, http.StatusOK, res.Topic)
}

// register commits a storage node's registration. Runs on the leader.
func (s *Server) register(ctx *fasthttp.RequestCtx) {
	var req cluster.RegisterRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	if err := validateRegister(req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	epoch, err := s.ctrl.Register(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, cluster.RegisterResponse{Epoch: epoch})
}

func validateRegister(req cluster.RegisterRequest) error {
	if req.ID < 0 {
		return bad(protocol.InvalidRequest, "node id must not be negative, got %d", req.ID)
	}
	if err := hostPort("addr", req.Addr); err != nil {
		return err
	}
	if req.AdvertisedAddr != "" {
		if err := hostPort("advertised_addr", req.AdvertisedAddr); err != nil {
			return err
		}
	}
	if req.KafkaAddr != "" {
		return hostPort("kafka_addr", req.KafkaAddr)
	}
	return nil
}

func hostPort(field, addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return bad(protocol.InvalidRequest, "%s %q is not host:port", field, addr)
	}
	return nil
}

// heartbeat renews a storage node's session. Runs on the leader.
func (s *Server) heartbeat(ctx *fasthttp.RequestCtx) {
	var req cluster.HeartbeatRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	if err := s.ctrl.Heartbeat(req); err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, struct{}{})
}

// alterPartition commits an ISR change asked by a partition leader. Runs on
// the leader.
func (s *Server) alterPartition(ctx *fasthttp.RequestCtx) {
	var req cluster.AlterPartitionRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	p, err := s.ctrl.AlterPartition(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, p)
}

// shutdown runs a storage node's controlled shutdown. Runs on the leader.
func (s *Server) shutdown(ctx *fasthttp.RequestCtx) {
	var req cluster.ShutdownRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	remaining, err := s.ctrl.ControlledShutdown(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, cluster.ShutdownResponse{Remaining: remaining})
}

// initProducerID hands out a new idempotent producer id, at epoch 0. Runs on
// the leader. The body is a JSON object, {} today; unknown fields are ignored.
func (s *Server) initProducerID(ctx *fasthttp.RequestCtx) {
	var req struct{}
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	id, err := s.ctrl.InitProducerID(rctx)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, cluster.InitProducerIDResponse{ProducerID: id, ProducerEpoch: 0})
}

// applyForwarded commits a command another member's raftnode.Apply relayed.
// It never relays further: only the leader applies.
func (s *Server) applyForwarded(ctx *fasthttp.RequestCtx) {
	if !s.node.IsLeader() {
		writeError(ctx, raftnode.ErrNotLeader)
		return
	}
	body := ctx.PostBody()
	if _, err := fsm.DecodeCommand(body); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.node.ApplyLocal(rctx, append([]byte(nil), body...))
	if err != nil {
		writeError(ctx, err)
		return
	}
	out := raftnode.ApplyResponse{Index: res.Index, Epoch: res.Epoch, Topic: res.Topic, Partition: res.Partition, ProducerID: res.ProducerID,
		Dropped: res.Dropped}
	if res.Err != nil {
		eb := errorBody(res.Err)
		out.Rejected = &eb
	}
	service.WriteJSON(ctx, http.StatusOK, out)
}

// newTopicID returns a random 128-bit id in hex; a topic created again under
// the same name gets a new one.
func newTopicID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
