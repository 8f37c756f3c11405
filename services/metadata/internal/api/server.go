package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/service"
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

	ln   net.Listener
	http *service.HTTPServer

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

// topicSub returns the topic name of /v1/topics/{name}{suffix}, "" when path
// is not of that form.
func topicSub(path, suffix string) string {
	rest, ok := strings.CutPrefix(path, "/v1/topics/")
	if !ok {
		return ""
	}
	name, ok := strings.CutSuffix(rest, suffix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return ""
	}
	return name
}

// route dispatches on path and method.
func (s *Server) route(ctx *fasthttp.RequestCtx) {
	path, method := string(ctx.Path()), string(ctx.Method())
	if s.cfg.Authz.On && !s.authorize(ctx, method, path) {
		return
	}
	switch {
	case path == "/v1/cluster":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodGet: s.getCluster})
	case path == "/v1/topics":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{
			http.MethodGet:  s.listTopics,
			http.MethodPost: s.onLeader(s.createTopic),
		})
	case strings.HasPrefix(path, "/v1/topics/") && !strings.Contains(path[len("/v1/topics/"):], "/"):
		name := path[len("/v1/topics/"):]
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{
			http.MethodGet:    func(ctx *fasthttp.RequestCtx) { s.describeTopic(ctx, name) },
			http.MethodDelete: s.onLeader(func(ctx *fasthttp.RequestCtx) { s.deleteTopic(ctx, name) }),
		})
	case topicSub(path, "/config") != "":
		name := topicSub(path, "/config")
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{
			http.MethodPatch: s.onLeader(func(ctx *fasthttp.RequestCtx) { s.alterTopicConfig(ctx, name) }),
		})
	case topicSub(path, "/partitions") != "":
		name := topicSub(path, "/partitions")
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{
			http.MethodPost: s.onLeader(func(ctx *fasthttp.RequestCtx) { s.addPartitions(ctx, name) }),
		})
	case reassignmentPath(path):
		topic, partition, err := parseReassignmentPath(path)
		if err != nil {
			writeError(ctx, err)
			return
		}
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{
			http.MethodPost:   s.onLeader(func(ctx *fasthttp.RequestCtx) { s.reassignPartition(ctx, topic, partition) }),
			http.MethodDelete: s.onLeader(func(ctx *fasthttp.RequestCtx) { s.cancelReassignment(ctx, topic, partition) }),
		})
	case strings.HasPrefix(path, "/v1/nodes/") && strings.HasSuffix(path, "/decommission"):
		id, err := parseNodeID(strings.TrimSuffix(strings.TrimPrefix(path, "/v1/nodes/"), "/decommission"))
		if err != nil {
			writeError(ctx, err)
			return
		}
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{
			http.MethodPost:   s.onLeader(func(ctx *fasthttp.RequestCtx) { s.decommission(ctx, id, true) }),
			http.MethodDelete: s.onLeader(func(ctx *fasthttp.RequestCtx) { s.decommission(ctx, id, false) }),
		})
	case path == "/v1/nodes/register":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.register)})
	case path == "/v1/nodes/heartbeat":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.heartbeat)})
	case path == "/v1/nodes/shutdown":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.shutdown)})
	case path == "/v1/frontends/register":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.registerFrontend)})
	case path == "/v1/frontends/heartbeat":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.frontendHeartbeat)})
	case path == "/v1/cluster/config":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPut: s.onLeader(s.setClusterConfig)})
	case path == "/v1/principals":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPut: s.onLeader(s.setPrincipal)})
	case path == "/v1/acls":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPut: s.onLeader(s.setACL)})
	case path == "/v1/quotas":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPut: s.onLeader(s.setQuota)})
	case path == "/v1/producers":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.initProducerID)})
	case path == "/v1/partitions/resign":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.resignLeadership)})
	case path == "/v1/partitions/alter":
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.onLeader(s.alterPartition)})
	case path == raftnode.ApplyPath:
		s.methods(ctx, method, map[string]fasthttp.RequestHandler{http.MethodPost: s.applyForwarded})
	default:
		service.WriteStatus(ctx, http.StatusNotFound, protocol.InvalidRequest, "no route "+method+" "+path)
	}
}

func (s *Server) methods(ctx *fasthttp.RequestCtx, method string, hs map[string]fasthttp.RequestHandler) {
	if h, ok := hs[method]; ok {
		h(ctx)
		return
	}
	allowed := make([]string, 0, len(hs))
	for m := range hs {
		allowed = append(allowed, m)
	}
	ctx.Response.Header.Set("Allow", strings.Join(allowed, ", "))
	service.WriteStatus(ctx, http.StatusMethodNotAllowed, protocol.InvalidRequest, "method "+method+" is not allowed on "+string(ctx.Path()))
}

// onLeader runs h on the Raft leader and relays the request to it elsewhere.
func (s *Server) onLeader(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if s.node.IsLeader() {
			h(ctx)
			return
		}
		s.relay(ctx, s.cfg.RequestTimeout)
	}
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
