// Package api is the offsets service's HTTP API (fasthttp, JSON):
//
//	POST   /v1/groups/{group}/offsets   {"offsets":[{"topic":"t","partition":0,"offset":42,"metadata":""}]}
//	GET    /v1/groups/{group}/offsets[?topic=t]
//	GET    /v1/groups
//	DELETE /v1/groups/{group}
//
// Errors are JSON {"error_code":N,"error":"reason"} with the wire codes of
// libs/protocol.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/service"
	"github.com/sluicemq/sluice/services/offsets/internal/store"
)

// CommitRequest is the body of a commit.
type CommitRequest struct {
	Offsets []store.Committed `json:"offsets"`
}

// OffsetsResponse lists a group's committed offsets.
type OffsetsResponse struct {
	Group   string            `json:"group"`
	Offsets []store.Committed `json:"offsets"`
}

// Server serves the API.
type Server struct {
	st   *store.Store
	log  *slog.Logger
	http *service.HTTPServer
}

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 4 << 20

// New listens on addr.
func New(addr string, st *store.Store, log *slog.Logger) (*Server, error) {
	s := &Server{st: st, log: log}
	var err error
	s.http, err = service.ListenHTTP(addr, &fasthttp.Server{Handler: s.handle, MaxRequestBodySize: MaxBodyBytes, Name: "sluice-offsets", NoDefaultServerHeader: true}, log)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Addr returns the listen address.
func (s *Server) Addr() string { return s.http.Addr() }

// Start serves in a goroutine that Stop waits for.
func (s *Server) Start() { s.http.Start() }

// Stop shuts the server down.
func (s *Server) Stop(ctx context.Context) error { return s.http.Stop(ctx) }

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	path := strings.Trim(string(ctx.Path()), "/")
	parts := strings.Split(path, "/")
	method := string(ctx.Method())
	switch {
	case len(parts) == 2 && parts[0] == "v1" && parts[1] == "groups" && method == "GET":
		groups, err := s.st.Groups()
		if err != nil {
			s.fail(ctx, err)
			return
		}
		if groups == nil {
			groups = []string{}
		}
		writeJSON(ctx, fasthttp.StatusOK, map[string][]string{"groups": groups})
	case len(parts) == 3 && parts[0] == "v1" && parts[1] == "groups" && method == "DELETE":
		if err := s.st.DeleteGroup(parts[2]); err != nil {
			s.fail(ctx, err)
			return
		}
		writeJSON(ctx, fasthttp.StatusOK, struct{}{})
	case len(parts) == 4 && parts[0] == "v1" && parts[1] == "groups" && parts[3] == "offsets":
		s.offsets(ctx, parts[2], method)
	default:
		writeErr(ctx, fasthttp.StatusNotFound, protocol.InvalidRequest, fmt.Sprintf("no route %s /%s", method, path))
	}
}

func (s *Server) offsets(ctx *fasthttp.RequestCtx, group, method string) {
	switch method {
	case "GET":
		offs, err := s.st.Fetch(group, string(ctx.QueryArgs().Peek("topic")))
		if err != nil {
			s.fail(ctx, err)
			return
		}
		if offs == nil {
			offs = []store.Committed{}
		}
		writeJSON(ctx, fasthttp.StatusOK, OffsetsResponse{Group: group, Offsets: offs})
	case "POST":
		var req CommitRequest
		if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
			writeErr(ctx, fasthttp.StatusBadRequest, protocol.InvalidRequest, "malformed commit body: "+err.Error())
			return
		}
		for _, c := range req.Offsets {
			if err := cluster.ValidateTopicName(c.Topic); err != nil {
				writeErr(ctx, fasthttp.StatusBadRequest, protocol.InvalidTopic, err.Error())
				return
			}
		}
		if err := s.st.Commit(group, req.Offsets); err != nil {
			s.fail(ctx, err)
			return
		}
		writeJSON(ctx, fasthttp.StatusOK, struct{}{})
	default:
		writeErr(ctx, fasthttp.StatusMethodNotAllowed, protocol.InvalidRequest, "method "+method+" not allowed")
	}
}

func (s *Server) fail(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, store.ErrInvalid) {
		writeErr(ctx, fasthttp.StatusBadRequest, protocol.InvalidRequest, err.Error())
		return
	}
	s.log.Error("offsets request failed", "path", string(ctx.Path()), "err", err)
	writeErr(ctx, fasthttp.StatusInternalServerError, protocol.UnknownServerError, err.Error())
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func writeErr(ctx *fasthttp.RequestCtx, status int, code protocol.Code, msg string) {
	writeJSON(ctx, status, cluster.ErrorBody{ErrorCode: int16(code), Error: msg})
}
