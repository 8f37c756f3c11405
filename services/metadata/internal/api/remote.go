package api

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/server/service"
)

// Tiered storage: the partitions' remote logs (see libs/cluster's
// remote.go for the contract and fsm/remote.go for the rules).

// addRemoteSegment commits a segment a partition leader uploaded and
// answers the remote log's summary after it. Runs on the leader.
func (s *Server) addRemoteSegment(ctx *fasthttp.RequestCtx) {
	var req cluster.AddRemoteSegmentRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	sum, err := s.ctrl.AddRemoteSegment(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, sum)
}

// dropRemoteSegments drops the segments below a bound from the front of a
// partition's remote log and answers them. Runs on the leader.
func (s *Server) dropRemoteSegments(ctx *fasthttp.RequestCtx) {
	var req cluster.DropRemoteSegmentsRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	dropped, err := s.ctrl.DropRemoteSegments(rctx, req)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, cluster.DropRemoteSegmentsResponse{Dropped: dropped})
}

// remoteLog answers a partition's remote log from this member's state
// (linearizable with consistent=true).
func (s *Server) remoteLog(ctx *fasthttp.RequestCtx, topic string, partition int32) {
	if !s.consistent(ctx, 0) {
		return
	}
	l, err := s.fsm.RemoteLog(topic, partition)
	if err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, l)
}

// remoteGarbage answers the segments of deleted topics whose objects are
// still to be deleted, from this member's state (linearizable with
// consistent=true).
func (s *Server) remoteGarbage(ctx *fasthttp.RequestCtx) {
	if !s.consistent(ctx, 0) {
		return
	}
	g := s.fsm.RemoteGarbage()
	if g == nil {
		g = []cluster.RemoteLog{}
	}
	service.WriteJSON(ctx, http.StatusOK, g)
}

// clearRemoteGarbage takes deleted objects out of the remote garbage. Runs
// on the leader.
func (s *Server) clearRemoteGarbage(ctx *fasthttp.RequestCtx) {
	var req cluster.ClearRemoteGarbageRequest
	if err := decode(ctx, &req); err != nil {
		writeError(ctx, err)
		return
	}
	rctx, cancel := s.requestContext()
	defer cancel()
	if err := s.ctrl.ClearRemoteGarbage(rctx, req); err != nil {
		writeError(ctx, err)
		return
	}
	service.WriteJSON(ctx, http.StatusOK, struct{}{})
}
