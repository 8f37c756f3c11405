// Package api is the offsets service's HTTP API (fasthttp, JSON), the
// contract of package libs/groups:
//
//	GET    /v1/groups                          list groups
//	GET    /v1/groups/{group}                  describe: members, assignment, offsets and lag
//	DELETE /v1/groups/{group}                  delete a group without members
//	POST   /v1/groups/{group}/heartbeat        member heartbeat (join, renew, leave)
//	POST   /v1/groups/{group}/offsets          commit, fenced by member
//	GET    /v1/groups/{group}/offsets[?topic=] committed offsets
//	POST   /v1/groups/{group}/reset-offsets    reset a group without members
//	POST   /v1/groups/{group}/delete-offsets   delete a topic's offsets (OffsetDelete)
//	POST   /v1/groups/{group}/classic/{op}     Kafka's classic protocol: join, sync, heartbeat, leave
//	POST   /v1/txns/{id}/{op}                  the transaction coordinator (txns.go)
//	GET    /v1/txns[/{id}]                     transactions' states
//	.../v1/share-groups...                     share groups (shares.go)
//	GET    /v1/offsets-log/{partition}?from=&limit= the groups' change log, as Kafka's __consumer_offsets
//
// Every route runs on the Raft leader, where the coordinator lives; any other
// replica relays the request to the leader (once: a relayed request reaching a
// non-leader answers NOT_COORDINATOR so clients try another replica). Errors
// are JSON {"error_code":N,"error":"reason"} with the codes of libs/protocol.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/sharecoord"
	"github.com/sluicemq/sluice/services/offsets/internal/txncoord"
)

// Node is what the API needs of the Raft node.
type Node interface {
	ID() string
	// Forward relays a request to the leader and returns its answer.
	Forward(ctx context.Context, method, pathQuery string, body []byte) (int, string, []byte, error)
	// Leader returns the leader's id and HTTP address.
	Leader() (id, httpAddr string)
	// Linearize confirms leadership and waits for every committed entry.
	Linearize(ctx context.Context) error
}

// LogOffsets looks up a partition's log start offset, high watermark and the
// first offset at or after a timestamp (-1 when none).
type LogOffsets interface {
	ListOffset(ctx context.Context, topic string, partition int32, ts int64) (int64, error)
	// LastStable returns a partition's last stable offset.
	LastStable(ctx context.Context, topic string, partition int32) (int64, error)
	// Topic returns a topic's partition count from the latest metadata.
	Topic(name string) (int32, bool)
	// Access returns the latest metadata's principals and ACLs (an empty
	// model before the first).
	Access() *cluster.Snapshot
}

// Config configures the API.
type Config struct {
	Addr string
	// RequestTimeout bounds one request's work, relaying included.
	RequestTimeout time.Duration
	MaxBodyBytes   int
	// LongPoll is how much longer than RequestTimeout a classic join or
	// sync may wait (the coordinator's longest rebalance timeout).
	LongPoll time.Duration
	// TLS, when set, makes the API serve HTTPS.
	TLS *tls.Config
	// Authz, when on, checks every request against the ACLs, the client
	// certificate's common name being the principal: the cluster's
	// services may do everything, others what groups.NeedOf says. The
	// replica a request reaches first checks it; relays carry the replica's
	// own certificate.
	Authz service.CertAuthz
}

// Server serves the API.
type Server struct {
	cfg    Config
	node   Node
	coord  *coordinator.Coordinator
	txns   *txncoord.Coordinator // nil: no transaction coordinator
	shares *sharecoord.Coordinator
	fsm    *fsm.FSM
	ends   LogOffsets
	log    *slog.Logger
	http   *service.HTTPServer
	routes *service.Router

	base   context.Context // cancelled by Stop
	cancel context.CancelFunc
}

// Deps is what the API serves from: the Raft node (relays to the leader,
// linearizable reads), the group, transaction and share-group
// coordinators, the FSM's state, the partitions' log offsets (lag) and the
// log.
type Deps struct {
	Node   Node
	Groups *coordinator.Coordinator
	Txns   *txncoord.Coordinator
	Shares *sharecoord.Coordinator
	FSM    *fsm.FSM
	Ends   LogOffsets
	Log    *slog.Logger
}

// New listens on cfg.Addr.
func New(cfg Config, d Deps) (*Server, error) {
	s := &Server{cfg: cfg, node: d.Node, coord: d.Groups, txns: d.Txns, shares: d.Shares, fsm: d.FSM, ends: d.Ends, log: d.Log}
	s.routes = s.newRoutes()
	s.base, s.cancel = context.WithCancel(context.Background())
	var err error
	s.http, err = service.ListenHTTPTLS(cfg.Addr, &fasthttp.Server{Handler: s.handle, MaxRequestBodySize: cfg.MaxBodyBytes,
		Name: "sluice-offsets", NoDefaultServerHeader: true, ErrorHandler: s.protocolError}, d.Log, cfg.TLS)
	if err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// Addr returns the listen address.
func (s *Server) Addr() string { return s.http.Addr() }

// Start serves in a goroutine that Stop waits for.
func (s *Server) Start() { s.http.Start() }

// Stop cancels requests in progress and shuts the server down.
func (s *Server) Stop(ctx context.Context) error {
	s.cancel()
	return s.http.Stop(ctx)
}

// routeHandler serves one route on the coordinator.
type routeHandler func(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error

// newRoutes is the offsets API's route table. Every route is the
// coordinator's: the Raft leader serves it, other replicas relay it there.
// What a request needs is groups.NeedOf's rule (shared with the frontends'
// relay), and consume on the group's own topics (groupAccess).
func (s *Server) newRoutes() *service.Router {
	need := func(ctx *fasthttp.RequestCtx, p service.Params) cluster.Need {
		if p.Get("txn") != "" || string(ctx.Path()) == "/v1/txns" {
			return txns.NeedOf(string(ctx.Method()), string(ctx.Path()), ctx.PostBody())
		}
		if strings.HasPrefix(string(ctx.Path()), "/v1/offsets-log/") {
			return cluster.Need{Op: cluster.OpConsume, Topics: []string{groups.OffsetsLogTopic}}
		}
		if strings.HasPrefix(string(ctx.Path()), "/v1/share-groups") {
			return shares.NeedOf(string(ctx.Method()), string(ctx.Path()), ctx.PostBody())
		}
		return groups.NeedOf(string(ctx.Method()), string(ctx.Path()), string(ctx.QueryArgs().Peek("topic")), ctx.PostBody())
	}
	route := func(method, pattern string, h routeHandler) service.Route {
		return service.Route{Method: method, Pattern: pattern, Leader: true, NeedOf: need,
			Handle: func(ctx *fasthttp.RequestCtx, p service.Params) { s.serve(ctx, p, h) }}
	}
	group := func(h func(context.Context, *fasthttp.RequestCtx, string) error) routeHandler {
		return func(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error {
			return h(c, ctx, p.Get("group"))
		}
	}
	routes := []service.Route{
		route(http.MethodGet, "/v1/groups", func(c context.Context, ctx *fasthttp.RequestCtx, _ service.Params) error { return s.list(c, ctx) }),
		route(http.MethodGet, "/v1/groups/{group}", group(s.describe)),
		route(http.MethodDelete, "/v1/groups/{group}", group(s.delete)),
		route(http.MethodPost, "/v1/groups/{group}/heartbeat", group(s.heartbeat)),
		route(http.MethodPost, "/v1/groups/{group}/offsets", group(s.commit)),
		route(http.MethodGet, "/v1/groups/{group}/offsets", group(s.offsets)),
		route(http.MethodPost, "/v1/groups/{group}/reset-offsets", group(s.reset)),
		route(http.MethodPost, "/v1/groups/{group}/delete-offsets", group(s.deleteOffsets)),
		route(http.MethodPost, "/v1/groups/{group}/classic/{op}", func(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error {
			return s.classic(c, ctx, p.Get("group"), p.Get("op"))
		}),
	}
	routes = append(routes, route(http.MethodGet, "/v1/offsets-log/{partition}", s.offsetsLog))
	routes = append(routes, s.txnRoutes(route)...)
	return service.NewRouter(append(routes, s.shareRoutes(route)...)...)
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	r, params, allowed := s.routes.Lookup(string(ctx.Method()), string(ctx.Path()))
	if r == nil {
		service.Refuse(ctx, allowed)
		return
	}
	if g := params.Get("group"); g != "" {
		if err := groups.ValidateGroupID(g); err != nil {
			service.WriteCode(ctx, protocol.InvalidGroupID, err.Error())
			return
		}
	}
	if id := params.Get("txn"); id != "" {
		if err := txns.ValidateID(id); err != nil {
			service.WriteCode(ctx, protocol.InvalidRequest, err.Error())
			return
		}
	}
	if !s.authorize(ctx, r.NeedFor(ctx, params), params.Get("group")) {
		return
	}
	r.Handle(ctx, params)
}

// serve runs h on the coordinator, or relays the request to it.
func (s *Server) serve(ctx *fasthttp.RequestCtx, p service.Params, h routeHandler) {
	timeout := s.cfg.RequestTimeout
	if op := p.Get("op"); op == "join" || op == "sync" {
		// A classic join or sync waits for the rebalance, up to the longest
		// rebalance timeout a member may ask for.
		timeout += s.cfg.LongPoll
	}
	rctx, cancel := context.WithTimeout(s.base, timeout)
	defer cancel()
	if !s.coord.Ready() {
		s.relay(rctx, ctx)
		return
	}
	if err := h(rctx, ctx, p); err != nil {
		if errors.Is(err, coordinator.ErrNotLeader) {
			s.relay(rctx, ctx) // lost leadership meanwhile
			return
		}
		s.fail(ctx, err)
	}
}

// relay forwards the request to the leader unless it was already relayed.
func (s *Server) relay(rctx context.Context, ctx *fasthttp.RequestCtx) {
	if by := ctx.Request.Header.Peek(raftgroup.ForwardedHeader); len(by) > 0 {
		service.WriteCode(ctx, protocol.NotCoordinator, fmt.Sprintf("replica %s is not the coordinator (request relayed by replica %s)", s.node.ID(), by))
		return
	}
	var body []byte
	if b := ctx.PostBody(); len(b) > 0 {
		body = append([]byte(nil), b...)
	}
	status, ctype, out, err := s.node.Forward(service.RelayContext(ctx, rctx), string(ctx.Method()), string(ctx.RequestURI()), body)
	if err != nil {
		service.WriteCode(ctx, protocol.NotCoordinator, fmt.Sprintf("replica %s is not the coordinator and could not relay: %v", s.node.ID(), err))
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

func (s *Server) protocolError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		service.WriteStatus(ctx, http.StatusRequestEntityTooLarge, protocol.InvalidRequest, fmt.Sprintf("request body is too large: the limit is %d bytes", s.cfg.MaxBodyBytes))
		return
	}
	service.WriteStatus(ctx, http.StatusBadRequest, protocol.InvalidRequest, "malformed HTTP request: "+err.Error())
}

// authorize checks the request's principal, when there is one to check: the
// certificate's under Config.Authz (the cluster's services pass), or the one
// a frontend names in service.PrincipalHeader for a token principal. It
// answers the request itself and returns false when it may not go on.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, need cluster.Need, group string) bool {
	access, p, name, check := s.caller(ctx)
	if !check {
		return true
	}
	err := access.Authorize(p, name, need)
	if err == nil && group != "" {
		err = s.groupAccess(access, p, name, group, need.Describe)
	}
	if err == nil {
		// A relay to the leader names the principal: the leader checks the
		// group against its own state, which a follower's may trail.
		service.RelayFor(ctx, name, s.cfg.Authz.ClientHost(ctx))
		return true
	}
	s.log.Warn("request denied", "principal", name, "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err, "remote", ctx.RemoteAddr().String())
	s.fail(ctx, err)
	return false
}

// groupAccess refuses a group to a principal that may not consume every
// topic the group reads (describe, for a read of the group): those its
// members subscribe to and those it has offsets committed for. This keeps
// one principal out of the groups of topics it cannot read or see (their
// members, lag and offsets), whatever its group ACLs. A group that does
// not exist yet is open.
func (s *Server) groupAccess(access *cluster.Snapshot, p *cluster.Principal, name, group string, describe bool) error {
	if p != nil && p.Admin {
		return nil
	}
	topics := map[string]bool{}
	if g, ok := s.fsm.Group(group); ok {
		for _, m := range g.Members {
			for _, t := range m.Topics {
				topics[t] = true
			}
		}
	}
	offs, err := s.fsm.Offsets(group, "")
	if err != nil {
		return err
	}
	for _, o := range offs {
		topics[o.Topic] = true
	}
	need := cluster.Need{Op: cluster.OpConsume, Group: true}
	if describe {
		need = cluster.Need{Describe: true, Group: true}
	}
	for t := range topics {
		need.Topics = append(need.Topics, t)
	}
	sort.Strings(need.Topics)
	if len(need.Topics) == 0 {
		return nil
	}
	if err := access.Authorize(p, name, need); err != nil {
		return protocol.GroupAuthorizationFailed.Err("%s (group %s reads it)", protocol.MessageOf(err), group)
	}
	return nil
}

// shows is what a listing shows the request's principal: the names ok
// allows it in the newest access model (every name when no principal is
// checked).
func (s *Server) shows(ctx *fasthttp.RequestCtx, ok func(access *cluster.Snapshot, p *cluster.Principal, name string) bool) func(string) bool {
	access, p, _, check := s.caller(ctx)
	if !check {
		return func(string) bool { return true }
	}
	return func(n string) bool { return p != nil && ok(access, p, n) }
}

// caller is the request's principal, when there is one to check (check):
// its name, and its entry in the newest access model at the client's host
// (nil for a name no principal has).
func (s *Server) caller(ctx *fasthttp.RequestCtx) (access *cluster.Snapshot, p *cluster.Principal, name string, check bool) {
	if name, check = s.cfg.Authz.Principal(ctx); !check {
		return nil, nil, name, false
	}
	access = s.ends.Access()
	p, _ = access.Principal(name)
	return access, p.At(s.cfg.Authz.ClientHost(ctx)), name, true
}

// fail answers err with its status and wire code.
func (s *Server) fail(ctx *fasthttp.RequestCtx, err error) {
	if protocol.HTTPStatusOf(err) == http.StatusInternalServerError {
		s.log.Error("offsets request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
	}
	service.WriteError(ctx, err)
}

// postOp serves a POST route whose path parameter param names what it acts
// on: decode the body into a fresh In, run op, answer its result (or {}).
func postOp[In any](param string, op func(c context.Context, key string, req In) (any, error)) routeHandler {
	return func(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error {
		var req In
		if err := decode(ctx, &req); err != nil {
			return err
		}
		out, err := op(c, p.Get(param), req)
		if err != nil {
			return err
		}
		if out == nil {
			out = struct{}{}
		}
		service.WriteJSON(ctx, http.StatusOK, out)
		return nil
	}
}

// decode parses a JSON body into v.
func decode(ctx *fasthttp.RequestCtx, v any) error { return service.DecodeJSON(ctx, v) }
