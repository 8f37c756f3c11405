package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/shares"
)

// pathGroups is the prefix of the consumer group routes relayed to the
// offsets service; suffixRecords ends a produce route's path.
const (
	pathGroups      = "/v1/groups"
	pathShareGroups = "/v1/share-groups"
	suffixRecords   = "/records"
)

// headerRequestID carries the request id in both directions.
const headerRequestID = "X-Request-Id"

// handle is the fasthttp handler: it sets the request id, routes, and logs.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	id := s.ids.take(ctx.Request.Header.Peek(headerRequestID))
	ctx.Response.Header.Set(headerRequestID, id)
	defer func() {
		if v := recover(); v != nil {
			// A bug, not input: every input error is a value. Answer rather
			// than take the whole server down (fasthttp does not recover).
			s.log.Error("handler panic", "request_id", id, "panic", fmt.Sprint(v))
			service.WriteCode(ctx, protocol.UnknownServerError, "internal error")
		}
		s.logRequest(ctx, id, start)
	}()
	if s.cfg.RequireAuth && !s.authenticate(ctx, id) {
		return
	}
	release, ok := s.admitBody(ctx)
	if !ok {
		return
	}
	defer release()
	s.route(ctx)
}

// route dispatches a request by the route table.
func (s *Server) route(ctx *fasthttp.RequestCtx) {
	r, params, allowed := s.routes.Lookup(string(ctx.Method()), string(ctx.Path()))
	if r == nil {
		service.Refuse(ctx, allowed)
		return
	}
	if s.cfg.RequireAuth && !s.authorize(ctx, r.NeedFor(ctx, params)) {
		return
	}
	r.Handle(ctx, params)
}

// requestID is the id handle gave the request.
func requestID(ctx *fasthttp.RequestCtx) string {
	return string(ctx.Response.Header.Peek(headerRequestID))
}

// The needs of most routes; auth.go says what each route needs.
var (
	needRead  = cluster.Need{Read: true}
	needAdmin = cluster.Need{Admin: true}
)

// newRoutes is the frontend API's route table.
func (s *Server) newRoutes() *service.Router {
	partition := func(h func(*fasthttp.RequestCtx, string, string)) func(*fasthttp.RequestCtx, service.Params) {
		return func(ctx *fasthttp.RequestCtx, p service.Params) { h(ctx, p.Get("topic"), p.Get("partition")) }
	}
	decommission := func(on bool) func(*fasthttp.RequestCtx, service.Params) {
		return func(ctx *fasthttp.RequestCtx, p service.Params) { s.decommission(ctx, p.Get("node"), on) }
	}
	groupsNeed := func(ctx *fasthttp.RequestCtx, _ service.Params) cluster.Need {
		return groups.NeedOf(string(ctx.Method()), string(ctx.Path()), string(ctx.QueryArgs().Peek("topic")), ctx.PostBody())
	}
	forward := func(ctx *fasthttp.RequestCtx, _ service.Params) { s.forwardGroups(ctx, requestID(ctx), pathGroups) }
	sharesNeed := func(ctx *fasthttp.RequestCtx, _ service.Params) cluster.Need {
		return shares.NeedOf(string(ctx.Method()), string(ctx.Path()), ctx.PostBody())
	}
	forwardShares := func(ctx *fasthttp.RequestCtx, _ service.Params) {
		s.forwardGroups(ctx, requestID(ctx), pathShareGroups)
	}
	const (
		get, post, put, patch, del = fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodPatch, fasthttp.MethodDelete
	)
	routes := []service.Route{
		{Method: get, Pattern: "/v1/cluster", Need: needRead, Handle: service.Plain(s.getCluster)},
		{Method: get, Pattern: "/v1/topics", Need: needRead, Handle: service.Plain(s.listTopics)},
		{Method: post, Pattern: "/v1/topics", NeedOf: func(ctx *fasthttp.RequestCtx, _ service.Params) cluster.Need {
			return cluster.CreateTopicNeed(ctx.PostBody())
		},
			Handle: service.Plain(s.createTopic)},
		{Method: get, Pattern: "/v1/topics/{topic}", Need: needRead, Handle: service.Named("topic", s.describeTopic)},
		{Method: del, Pattern: "/v1/topics/{topic}", NeedOf: service.OnTopic(cluster.OpDelete), Handle: service.Named("topic", s.deleteTopic)},
		{Method: patch, Pattern: "/v1/topics/{topic}/config", NeedOf: service.OnTopic(cluster.OpAlterConfigs), Handle: service.Named("topic", s.alterTopicConfig)},
		{Method: post, Pattern: "/v1/topics/{topic}/partitions", NeedOf: service.OnTopic(cluster.OpAlter), Handle: service.Named("topic", s.addPartitions)},
		{Method: post, Pattern: "/v1/topics/{topic}/partitions/{partition}/reassignment", Need: cluster.Need{Cluster: cluster.OpAlter}, Handle: partition(s.reassignPartition)},
		{Method: del, Pattern: "/v1/topics/{topic}/partitions/{partition}/reassignment", Need: cluster.Need{Cluster: cluster.OpAlter}, Handle: partition(s.cancelReassignment)},
		{Method: post, Pattern: "/v1/topics/{topic}" + suffixRecords, NeedOf: service.OnTopic(cluster.OpProduce),
			Handle: func(ctx *fasthttp.RequestCtx, p service.Params) { s.produce(ctx, requestID(ctx), p.Get("topic")) }},
		{Method: get, Pattern: "/v1/topics/{topic}/partitions/{partition}" + suffixRecords, NeedOf: service.OnTopic(cluster.OpConsume), Handle: partition(s.fetchRecords)},
		{Method: post, Pattern: "/v1/nodes/{node}/decommission", Need: cluster.Need{Cluster: cluster.OpAlter}, Handle: decommission(true)},
		{Method: del, Pattern: "/v1/nodes/{node}/decommission", Need: cluster.Need{Cluster: cluster.OpAlter}, Handle: decommission(false)},
		{Method: put, Pattern: "/v1/quotas", Need: cluster.Need{Cluster: cluster.OpAlterConfigs}, Handle: service.Plain(s.setQuota)},
		{Method: post, Pattern: "/v1/producers", Need: cluster.Need{Op: cluster.OpProduce}, Handle: service.Plain(s.initProducerID)},
		// Every method: the offsets service answers for its routes.
		{Pattern: pathGroups, NeedOf: groupsNeed, Handle: forward},
		{Pattern: pathGroups + "/{rest...}", NeedOf: groupsNeed, Handle: forward},
		{Method: post, Pattern: pathShareGroups + "/{group}" + suffixRecords, NeedOf: func(ctx *fasthttp.RequestCtx, _ service.Params) cluster.Need {
			return cluster.Need{Op: cluster.OpConsume, Group: true, Topics: []string{string(ctx.QueryArgs().Peek("topic"))}}
		}, Handle: service.Named("group", s.shareRecords)},
		{Pattern: pathShareGroups, NeedOf: sharesNeed, Handle: forwardShares},
		{Pattern: pathShareGroups + "/{rest...}", NeedOf: sharesNeed, Handle: forwardShares},
	}
	// HTML pages with their own 404 and 405 answers; admin only.
	console := func(ctx *fasthttp.RequestCtx, _ service.Params) {
		if s.console == nil {
			service.NotFound(ctx)
			return
		}
		s.console(ctx)
	}
	routes = append(routes,
		service.Route{Pattern: "/console", Need: needAdmin, Handle: console},
		service.Route{Pattern: "/console/{page...}", Need: needAdmin, Handle: console})
	return service.NewRouter(routes...)
}

func (s *Server) logRequest(ctx *fasthttp.RequestCtx, id string, start time.Time) {
	status := ctx.Response.StatusCode()
	args := []any{
		"request_id", id, "method", string(ctx.Method()), "path", string(ctx.Path()),
		"status", status, "duration_ms", float64(time.Since(start).Microseconds()) / 1000,
		"remote", ctx.RemoteAddr().String(),
	}
	switch {
	case status >= 500:
		s.log.Warn("http request", append(args, "error", errorText(ctx))...)
	default:
		s.log.Debug("http request", args...)
	}
}

// errorText returns the reason of an error response, for the log line.
func errorText(ctx *fasthttp.RequestCtx) string {
	b := ctx.Response.Body()
	if len(b) > 512 {
		b = b[:512]
	}
	return string(b)
}

// handleReadError answers requests fasthttp could not read: an oversized body
// gets 413 with the limit, a header too large 431, a slow client 408, and
// anything else 400, all with the JSON error body.
func (s *Server) handleReadError(ctx *fasthttp.RequestCtx, err error) {
	id := s.ids.take(ctx.Request.Header.Peek(headerRequestID))
	ctx.Response.Header.Set(headerRequestID, id)
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.refuseTooLarge(ctx)
	case errors.As(err, &small):
		service.WriteStatus(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, protocol.InvalidRequest, "request headers too large")
	case isTimeout(err):
		service.WriteStatus(ctx, fasthttp.StatusRequestTimeout, protocol.RequestTimedOut, "request not read in time")
	default:
		service.WriteCode(ctx, protocol.InvalidRequest, "cannot read the request: "+err.Error())
	}
	s.log.Debug("http request refused", "request_id", id, "status", ctx.Response.StatusCode(), "err", err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// requestIDs generates request ids: a random per-process prefix and a counter,
// unique across frontends without a syscall per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail on supported platforms
	return &requestIDs{prefix: hex.EncodeToString(b[:])}
}

// take returns the client's id when it is usable (1 to 128 visible ASCII
// characters), else a new one.
func (r *requestIDs) take(client []byte) string {
	if len(client) > 0 && len(client) <= 128 {
		ok := true
		for _, c := range client {
			if c <= ' ' || c > '~' {
				ok = false
				break
			}
		}
		if ok {
			return string(client)
		}
	}
	return r.prefix + "-" + strconv.FormatUint(r.n.Add(1), 36)
}
