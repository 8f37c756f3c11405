package httpapi

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
)

// The admin routes forward to the metadata service with the same paths,
// bodies and error bodies, so a cluster.Client works against a frontend as it
// does against metadata.

func (s *Server) adminContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.AdminTimeout)
}

// createTopic serves POST /v1/topics: 201 with the topic as placed.
func (s *Server) createTopic(ctx *fasthttp.RequestCtx) {
	var req cluster.CreateTopicRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, "create topic body: "+err.Error())
		return
	}
	actx, cancel := s.adminContext()
	defer cancel()
	t, err := s.admin.CreateTopic(actx, req)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusCreated, t)
}

// listTopics serves GET /v1/topics: {"topics":[...]}.
func (s *Server) listTopics(ctx *fasthttp.RequestCtx) {
	actx, cancel := s.adminContext()
	defer cancel()
	ts, err := s.admin.ListTopics(actx)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	if ts == nil {
		ts = []cluster.Topic{}
	}
	service.WriteJSON(ctx, fasthttp.StatusOK, struct {
		Topics []cluster.Topic `json:"topics"`
	}{ts})
}

// describeTopic serves GET /v1/topics/{topic}.
func (s *Server) describeTopic(ctx *fasthttp.RequestCtx, name string) {
	actx, cancel := s.adminContext()
	defer cancel()
	t, err := s.admin.DescribeTopic(actx, name)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	service.WriteJSON(ctx, fasthttp.StatusOK, t)
}

// deleteTopic serves DELETE /v1/topics/{topic}: 200 {}.
func (s *Server) deleteTopic(ctx *fasthttp.RequestCtx, name string) {
	actx, cancel := s.adminContext()
	defer cancel()
	if err := s.admin.DeleteTopic(actx, name); err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusOK, struct{}{})
}

// alterTopicConfig serves PATCH /v1/topics/{topic}/config.
func (s *Server) alterTopicConfig(ctx *fasthttp.RequestCtx, name string) {
	var req cluster.AlterTopicConfigRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, "alter config body: "+err.Error())
		return
	}
	actx, cancel := s.adminContext()
	defer cancel()
	t, err := s.admin.AlterTopicConfig(actx, name, req)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusOK, t)
}

// addPartitions serves POST /v1/topics/{topic}/partitions.
func (s *Server) addPartitions(ctx *fasthttp.RequestCtx, name string) {
	var req cluster.AddPartitionsRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, "add partitions body: "+err.Error())
		return
	}
	actx, cancel := s.adminContext()
	defer cancel()
	t, err := s.admin.AddPartitions(actx, name, req)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusOK, t)
}

// reassignPartition serves POST /v1/topics/{topic}/partitions/{p}/reassignment.
func (s *Server) reassignPartition(ctx *fasthttp.RequestCtx, topic, partition string) {
	p, ok := parsePartitionParam(ctx, topic, partition)
	if !ok {
		return
	}
	var req cluster.ReassignPartitionRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, "reassignment body: "+err.Error())
		return
	}
	actx, cancel := s.adminContext()
	defer cancel()
	out, err := s.admin.ReassignPartition(actx, topic, p, req.Replicas)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusOK, out)
}

// cancelReassignment serves DELETE /v1/topics/{topic}/partitions/{p}/reassignment.
func (s *Server) cancelReassignment(ctx *fasthttp.RequestCtx, topic, partition string) {
	p, ok := parsePartitionParam(ctx, topic, partition)
	if !ok {
		return
	}
	actx, cancel := s.adminContext()
	defer cancel()
	out, err := s.admin.CancelReassignment(actx, topic, p)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusOK, out)
}

// decommission serves POST (on) and DELETE (off) /v1/nodes/{id}/decommission.
func (s *Server) decommission(ctx *fasthttp.RequestCtx, node string, on bool) {
	id, ok := pathNumber(node)
	if !ok {
		service.WriteCode(ctx, protocol.InvalidRequest, "node id "+strconv.Quote(node)+" is not a non-negative number")
		return
	}
	actx, cancel := s.adminContext()
	defer cancel()
	if !on {
		if err := s.admin.RecommissionNode(actx, id); err != nil {
			writeErr(ctx, err)
			return
		}
		service.WriteJSON(ctx, fasthttp.StatusOK, struct{}{})
		return
	}
	out, err := s.admin.DecommissionNode(actx, id)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusOK, out)
}

// setQuota serves PUT /v1/quotas.
func (s *Server) setQuota(ctx *fasthttp.RequestCtx) {
	var q cluster.Quota
	if err := json.Unmarshal(ctx.PostBody(), &q); err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, "quota body: "+err.Error())
		return
	}
	actx, cancel := s.adminContext()
	defer cancel()
	if err := s.admin.SetQuota(actx, q); err != nil {
		writeErr(ctx, err)
		return
	}
	s.cache.RefreshSoon()
	service.WriteJSON(ctx, fasthttp.StatusOK, q)
}

// parsePartitionParam parses a partition number from a path; a bad one is
// answered with 404 UNKNOWN_TOPIC_OR_PARTITION.
func parsePartitionParam(ctx *fasthttp.RequestCtx, topic, partition string) (int32, bool) {
	p, ok := pathNumber(partition)
	if !ok {
		service.WriteCode(ctx, protocol.UnknownTopicOrPartition,
			"partition "+strconv.Quote(partition)+" of topic "+strconv.Quote(topic)+" is not a partition number")
		return 0, false
	}
	return p, true
}

// initProducerID serves POST /v1/producers: a new idempotent producer id
// from metadata.
func (s *Server) initProducerID(ctx *fasthttp.RequestCtx) {
	actx, cancel := s.adminContext()
	defer cancel()
	r, err := s.admin.InitProducerID(actx)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	service.WriteJSON(ctx, fasthttp.StatusOK, r)
}

// getCluster serves GET /v1/cluster. Without since it fetches the current
// snapshot from metadata (and updates the cache with it). With since (and
// wait_ms) it is the watch: it answers from the cache as soon as its version
// is above since, or with the current snapshot once wait_ms (capped) passes.
func (s *Server) getCluster(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	if !args.Has("since") {
		actx, cancel := s.adminContext()
		defer cancel()
		snap, err := s.cache.Refresh(actx)
		if err != nil {
			writeErr(ctx, err)
			return
		}
		service.WriteJSON(ctx, fasthttp.StatusOK, snap.Redacted(seesAccess(ctx, snap)))
		return
	}
	since, err := strconv.ParseUint(string(args.Peek("since")), 10, 64)
	if err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, "since must be a version number")
		return
	}
	var wait time.Duration
	if v := args.Peek("wait_ms"); len(v) > 0 {
		ms, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || ms < 0 {
			service.WriteCode(ctx, protocol.InvalidRequest, "wait_ms must be a non-negative integer")
			return
		}
		wait = min(time.Duration(ms)*time.Millisecond, s.cfg.MaxWatchWait)
	}
	wctx, cancel := context.WithTimeout(s.base, wait)
	defer cancel()
	snap, _ := s.cache.WaitNewer(wctx, since)
	if snap == nil { // nothing cached yet: ask metadata directly
		actx, cancel := s.adminContext()
		defer cancel()
		if snap, err = s.cache.Refresh(actx); err != nil {
			writeErr(ctx, err)
			return
		}
	}
	service.WriteJSON(ctx, fasthttp.StatusOK, snap.Redacted(seesAccess(ctx, snap)))
}
