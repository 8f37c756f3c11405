package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/controller"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// Option adjusts New.
type Option func(*Server)

// WithListener serves on ln instead of listening on Config.Addr.
func WithListener(ln net.Listener) Option { return func(s *Server) { s.ln = ln } }

// Server is the HTTP API of one metadata member.
type Server struct {
	cfg  Config
	node *raftnode.Node
	fsm  *fsm.FSM
	ctrl *controller.Controller
	log  *slog.Logger

	ln     net.Listener
	http   *service.HTTPServer
	routes *service.Router

	placing placing // topics being created

	base        context.Context // cancelled by Stop: ends long polls and proposals
	cancel      context.CancelFunc
	waiting     atomic.Int64 // long polls waiting for a change
	authWaiting atomic.Int64 // refusals waiting for newer state (catchUp)
}

// New listens on cfg.Addr (unless WithListener) and prepares the server.
func New(cfg Config, node *raftnode.Node, f *fsm.FSM, ctrl *controller.Controller, log *slog.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, node: node, fsm: f, ctrl: ctrl, log: log}
	s.routes = s.newRoutes()
	for _, o := range opts {
		o(s)
	}
	if s.ln == nil {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("http listener: %w", err)
		}
		s.ln = ln
	}
	if cfg.TLS != nil {
		s.ln = tls.NewListener(s.ln, cfg.TLS)
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.http = service.NewHTTPServer(s.ln, &fasthttp.Server{
		Name:                  "sluice-metadata",
		Handler:               s.route,
		ErrorHandler:          s.protocolError,
		MaxRequestBodySize:    cfg.MaxBodyBytes,
		ReadTimeout:           cfg.ReadTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		NoDefaultServerHeader: true,
	}, log)
	return s, nil
}

// Waiting returns the number of watches waiting for a change.
func (s *Server) Waiting() int64 { return s.waiting.Load() }

// Addr returns the listen address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start serves in a goroutine that Stop waits for.
func (s *Server) Start() { s.http.Start() }

// Stop ends long polls, stops accepting, waits for requests in flight (up to
// ctx) and for the Serve goroutine.
func (s *Server) Stop(ctx context.Context) error {
	s.cancel()
	return s.http.Stop(ctx)
}

// route dispatches a request by the route table.
func (s *Server) route(ctx *fasthttp.RequestCtx) {
	r, params, allowed := s.routes.Lookup(string(ctx.Method()), string(ctx.Path()))
	if r == nil {
		service.Refuse(ctx, allowed)
		return
	}
	if s.cfg.Authz.On && !s.authorize(ctx, r.NeedFor(ctx, params)) {
		return
	}
	if r.Leader && !s.node.IsLeader() {
		s.relay(ctx, s.cfg.RequestTimeout)
		return
	}
	r.Handle(ctx, params)
}

// relay forwards the request to the leader unless it was already forwarded.
func (s *Server) relay(ctx *fasthttp.RequestCtx, timeout time.Duration) {
	if len(ctx.Request.Header.Peek(raftnode.ForwardedHeader)) > 0 {
		writeError(ctx, fmt.Errorf("%w (request relayed by member %s)", raftnode.ErrNotLeader, ctx.Request.Header.Peek(raftnode.ForwardedHeader)))
		return
	}
	rctx, cancel := context.WithTimeout(service.RelayContext(ctx, s.base), timeout)
	defer cancel()
	var body []byte
	if b := ctx.PostBody(); len(b) > 0 {
		body = append([]byte(nil), b...)
	}
	status, ctype, out, err := s.node.Forward(rctx, string(ctx.Method()), string(ctx.RequestURI()), body)
	if err != nil {
		writeError(ctx, err)
		return
	}
	ctx.SetStatusCode(status)
	if ctype != "" {
		ctx.SetContentType(ctype)
	}
	if _, leader := s.node.Leader(); leader != "" {
		ctx.Response.Header.Set(jsonhttp.LeaderHeader, leader)
	}
	ctx.SetBody(out)
}

// requestContext bounds one request's work and ends it at Stop.
func (s *Server) requestContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.base, s.cfg.RequestTimeout)
}

// decode parses a JSON body into v; a bad body is a 400 with the reason.
func decode(ctx *fasthttp.RequestCtx, v any) error { return service.DecodeJSON(ctx, v) }

// protocolError answers requests fasthttp could not parse.
func (s *Server) protocolError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		service.WriteStatus(ctx, http.StatusRequestEntityTooLarge, protocol.InvalidRequest, fmt.Sprintf("request body is too large: the limit is %d bytes", s.cfg.MaxBodyBytes))
		return
	}
	service.WriteStatus(ctx, http.StatusBadRequest, protocol.InvalidRequest, "malformed HTTP request: "+err.Error())
}
