package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/service"
)

// Routes, matched by hand over the decoded path.
const (
	pathTopics      = "/v1/topics"
	pathTopicPrefix = "/v1/topics/"
	pathCluster     = "/v1/cluster"
	pathProducers   = "/v1/producers"
	pathQuotas      = "/v1/quotas"
	pathGroups      = "/v1/groups"
	pathConsole     = "/console"
	suffixRecords   = "/records"

	pathNodePrefix     = "/v1/nodes/"
	suffixDecommission = "/decommission"
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
	s.route(ctx, id)
}

func (s *Server) route(ctx *fasthttp.RequestCtx, id string) {
	path := string(ctx.Path())
	method := string(ctx.Method())
	if s.cfg.RequireAuth && !s.authorize(ctx, id, method, path) {
		return
	}
	switch {
	case path == pathTopics:
		switch method {
		case fasthttp.MethodGet:
			s.listTopics(ctx)
		case fasthttp.MethodPost:
			s.createTopic(ctx)
		default:
			methodNotAllowed(ctx, "GET, POST")
		}
	case path == pathCluster:
		if method != fasthttp.MethodGet {
			methodNotAllowed(ctx, "GET")
			return
		}
		s.getCluster(ctx)
	case path == pathQuotas:
		if method != fasthttp.MethodPut {
			methodNotAllowed(ctx, "PUT")
			return
		}
		s.setQuota(ctx)
	case path == pathProducers:
		if method != fasthttp.MethodPost {
			methodNotAllowed(ctx, "POST")
			return
		}
		s.initProducerID(ctx)
	case path == pathGroups || strings.HasPrefix(path, pathGroups+"/"):
		s.forwardGroups(ctx, id)
	case strings.HasPrefix(path, pathNodePrefix) && strings.HasSuffix(path, suffixDecommission):
		id := strings.TrimSuffix(strings.TrimPrefix(path, pathNodePrefix), suffixDecommission)
		switch method {
		case fasthttp.MethodPost:
			s.decommission(ctx, id, true)
		case fasthttp.MethodDelete:
			s.decommission(ctx, id, false)
		default:
			methodNotAllowed(ctx, "POST, DELETE")
		}
	case strings.HasPrefix(path, pathTopicPrefix):
		s.routeTopic(ctx, id, method, path)
	case s.console != nil && (path == pathConsole || strings.HasPrefix(path, pathConsole+"/")):
		s.console(ctx) // HTML pages with their own 404 and 405 answers
	default:
		notFound(ctx, method, path)
	}
}

// routeTopic routes the paths under /v1/topics/: {topic}, {topic}/config,
// {topic}/partitions, {topic}/records, {topic}/partitions/{p}/records and
// {topic}/partitions/{p}/reassignment. Topic names hold no "/".
func (s *Server) routeTopic(ctx *fasthttp.RequestCtx, id, method, path string) {
	parts := strings.Split(path[len(pathTopicPrefix):], "/")
	if parts[0] == "" {
		notFound(ctx, method, path)
		return
	}
	topic := parts[0]
	switch {
	case len(parts) == 1:
		switch method {
		case fasthttp.MethodGet:
			s.describeTopic(ctx, topic)
		case fasthttp.MethodDelete:
			s.deleteTopic(ctx, topic)
		default:
			methodNotAllowed(ctx, "GET, DELETE")
		}
	case len(parts) == 2 && parts[1] == "config":
		if method != fasthttp.MethodPatch {
			methodNotAllowed(ctx, "PATCH")
			return
		}
		s.alterTopicConfig(ctx, topic)
	case len(parts) == 2 && parts[1] == "partitions":
		if method != fasthttp.MethodPost {
			methodNotAllowed(ctx, "POST")
			return
		}
		s.addPartitions(ctx, topic)
	case len(parts) == 4 && parts[1] == "partitions" && parts[3] == "reassignment":
		switch method {
		case fasthttp.MethodPost:
			s.reassignPartition(ctx, topic, parts[2])
		case fasthttp.MethodDelete:
			s.cancelReassignment(ctx, topic, parts[2])
		default:
			methodNotAllowed(ctx, "POST, DELETE")
		}
	case len(parts) == 2 && parts[1] == "records":
		if method != fasthttp.MethodPost {
			methodNotAllowed(ctx, "POST")
			return
		}
		s.produce(ctx, id, topic)
	case len(parts) == 4 && parts[1] == "partitions" && parts[3] == "records":
		if method != fasthttp.MethodGet {
			methodNotAllowed(ctx, "GET")
			return
		}
		s.fetchRecords(ctx, topic, parts[2])
	default:
		notFound(ctx, method, path)
	}
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

func notFound(ctx *fasthttp.RequestCtx, method, path string) {
	service.WriteStatus(ctx, fasthttp.StatusNotFound, protocol.InvalidRequest, fmt.Sprintf("no route for %s %s", method, path))
}

func methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	ctx.Response.Header.Set("Allow", allow)
	service.WriteStatus(ctx, fasthttp.StatusMethodNotAllowed, protocol.InvalidRequest,
		fmt.Sprintf("method %s not allowed here (allowed: %s)", ctx.Method(), allow))
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
