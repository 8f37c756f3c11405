package api

import (
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// parseNodeID parses a storage node id from a path.
func parseNodeID(s string) (int32, error) {
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil || id < 0 {
		return 0, bad(protocol.InvalidRequest, "node id %q is not a non-negative number", s)
	}
	return int32(id), nil
}

// reassignPartition starts a partition's reassignment. Runs on the leader;
// the controller completes it when the new replicas are in sync.
func (s *Server) reassignPartition(ctx *fasthttp.RequestCtx, topic string, partition int32) {
	var req cluster.ReassignPartitionRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	p, err := s.ctrl.ReassignPartition(rctx, topic, partition, req.Replicas)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, p)
}

// cancelReassignment stops a partition's reassignment. Runs on the leader.
func (s *Server) cancelReassignment(ctx *fasthttp.RequestCtx, topic string, partition int32) {
	rctx, cancel := s.requestContext()
	defer cancel()
	p, err := s.ctrl.CancelReassignment(rctx, topic, partition)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, p)
}

// decommission marks a node decommissioned (and starts moving its
// replicas) or lifts the mark. Runs on the leader.
func (s *Server) decommission(ctx *fasthttp.RequestCtx, id int32, on bool) {
	rctx, cancel := s.requestContext()
	defer cancel()
	r, err := s.ctrl.Decommission(rctx, id, on)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, r)
}

// setQuota commits a client quota (PUT /v1/quotas). Runs on the leader.
func (s *Server) setQuota(ctx *fasthttp.RequestCtx) {
	var q cluster.Quota
	if err := decode(ctx, &q); err != nil {
		writeError(ctx, err)
		return
	}
	s.commit(ctx, fsm.Command{Type: fsm.TypeSetQuota, SetQuota: &q}, "client quota set", "client_id", q.ClientID,
		"produce_bytes_per_sec", q.ProduceBytesPerSec, "fetch_bytes_per_sec", q.FetchBytesPerSec)
}

// electLeaders runs leader elections of a topic's partitions now (POST
// /v1/partitions/elect, Kafka's ElectLeaders). Runs on the leader.
func (s *Server) electLeaders(ctx *fasthttp.RequestCtx) {
	var req cluster.ElectRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	results, err := s.ctrl.ElectLeaders(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, cluster.ElectResponse{Results: results})
}

// resignLeadership hands a partition away from a leader with a damaged log.
// Runs on the leader.
func (s *Server) resignLeadership(ctx *fasthttp.RequestCtx) {
	var req cluster.ResignRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	p, err := s.ctrl.ResignLeadership(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, p)
}

// setPrincipal commits a principal change (PUT /v1/principals). Runs on the
// leader. The token itself never reaches metadata: only its SHA-256.
func (s *Server) setPrincipal(ctx *fasthttp.RequestCtx) {
	var c cluster.PrincipalChange
	if err := decode(ctx, &c); err != nil {
		writeError(ctx, err)
		return
	}
	if !c.Delete && (strings.TrimSpace(c.Name) != c.Name || strings.ContainsFunc(c.Name, unicode.IsControl)) {
		// Names travel in headers when requests are relayed (service.PrincipalHeader).
		writeError(ctx, bad(protocol.InvalidRequest, "principal name %q has surrounding spaces or control characters", c.Name))
		return
	}
	s.commit(ctx, fsm.Command{Type: fsm.TypeSetPrincipal, SetPrincipal: &fsm.SetPrincipal{Principal: c.Principal, Delete: c.Delete}},
		"principal changed", "principal", c.Name, "admin", c.Admin, "delete", c.Delete)
}

// setACL commits an ACL change (PUT /v1/acls). Runs on the leader.
func (s *Server) setACL(ctx *fasthttp.RequestCtx) {
	var c cluster.ACLChange
	if err := decode(ctx, &c); err != nil {
		writeError(ctx, err)
		return
	}
	s.commit(ctx, fsm.Command{Type: fsm.TypeSetACL, SetACL: &fsm.SetACL{ACL: c.ACL, Delete: c.Delete}},
		"ACL changed", "principal", c.Principal, "topic", c.Topic, "operation", c.Operation, "delete", c.Delete)
}

// commit proposes cmd and answers {} or the error, logging what changed.
func (s *Server) commit(ctx *fasthttp.RequestCtx, cmd fsm.Command, msg string, attrs ...any) {
	if s.propose(ctx, cmd, msg, attrs...) {
		service.WriteJSON(ctx, http.StatusOK, struct{}{})
	}
}

// propose proposes cmd and logs what changed; when it fails it answers the
// error and is false.
func (s *Server) propose(ctx *fasthttp.RequestCtx, cmd fsm.Command, msg string, attrs ...any) bool {
	rctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.node.Propose(rctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		writeError(ctx, err)
		return false
	}
	s.log.Info(msg, append(attrs, "version", res.Index)...)
	return true
}

// registerFrontend commits a frontend's registration (POST
// /v1/frontends/register) and answers the frontend with its id and epoch.
// Runs on the leader.
func (s *Server) registerFrontend(ctx *fasthttp.RequestCtx) {
	var req cluster.RegisterFrontendRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	if err := hostPort("kafka_addr", req.KafkaAddr); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	f, err := s.ctrl.RegisterFrontend(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, f)
}

// frontendHeartbeat renews a frontend's session. Runs on the leader.
func (s *Server) frontendHeartbeat(ctx *fasthttp.RequestCtx) {
	var req cluster.FrontendHeartbeatRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	if err := s.ctrl.FrontendHeartbeat(req); err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, struct{}{})
}

// setClusterConfig commits a change of the cluster-wide settings (PUT
// /v1/cluster/config) and answers them as they are after it. Runs on the
// leader.
func (s *Server) setClusterConfig(ctx *fasthttp.RequestCtx) {
	var req cluster.AlterTopicConfigRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	cmd := fsm.Command{Type: fsm.TypeSetClusterConfig, SetClusterConfig: &fsm.SetClusterConfig{Set: req.Set, Delete: req.Delete}}
	if s.propose(ctx, cmd, "cluster settings changed", "set", req.Set, "delete", req.Delete) {
		service.WriteJSON(ctx, http.StatusOK, map[string]any{"config": s.fsm.Cluster().Config})
	}
}
