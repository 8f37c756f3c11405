package service

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Route is one route of a service's HTTP API: the one place that says which
// method and path it answers, whether the Raft leader must serve it, and what
// the principal needs.
type Route struct {
	Method string // "" matches every method
	// Pattern is the path, one segment at a time: "{name}" matches one
	// non-empty segment and names it, a last "{name...}" matches the rest of
	// the path (any number of segments, none included).
	Pattern string
	// Leader: the Raft group's leader serves the route; another replica
	// relays it there.
	Leader bool
	// Need is what the principal needs, when authorization is on. NeedOf,
	// when set, decides instead (a need that depends on the path's names or
	// the body).
	Need   cluster.Need
	NeedOf func(ctx *fasthttp.RequestCtx, p Params) cluster.Need
	Handle func(ctx *fasthttp.RequestCtx, p Params)

	segs []string
}

// NeedFor returns what the principal needs for this request.
func (r *Route) NeedFor(ctx *fasthttp.RequestCtx, p Params) cluster.Need {
	if r.NeedOf != nil {
		return r.NeedOf(ctx, p)
	}
	return r.Need
}

// OnTopic is a NeedOf: op on the topic the path's {topic} names.
func OnTopic(op string) func(*fasthttp.RequestCtx, Params) cluster.Need {
	return func(_ *fasthttp.RequestCtx, p Params) cluster.Need {
		return cluster.Need{Op: op, Topics: []string{p.Get("topic")}}
	}
}

// Params are the names a matched pattern gave to path segments.
type Params []Param

// Param is one named segment.
type Param struct{ Name, Value string }

// Get returns the named segment ("" when the pattern has no such name).
func (p Params) Get(name string) string {
	for _, kv := range p {
		if kv.Name == name {
			return kv.Value
		}
	}
	return ""
}

// Plain adapts a handler that needs none of the path's names.
func Plain(h fasthttp.RequestHandler) func(*fasthttp.RequestCtx, Params) {
	return func(ctx *fasthttp.RequestCtx, _ Params) { h(ctx) }
}

// Named adapts a handler of the path's one named segment name.
func Named(name string, h func(*fasthttp.RequestCtx, string)) func(*fasthttp.RequestCtx, Params) {
	return func(ctx *fasthttp.RequestCtx, p Params) { h(ctx, p.Get(name)) }
}

// Router is a service's route table.
type Router struct{ routes []Route }

// NewRouter checks the routes' patterns; a bad one is a programming error.
func NewRouter(routes ...Route) *Router {
	for i := range routes {
		r := &routes[i]
		if !strings.HasPrefix(r.Pattern, "/") || r.Handle == nil {
			panic(fmt.Sprintf("service: route %s %q: a pattern starts with / and a route has a handler", r.Method, r.Pattern))
		}
		r.segs = strings.Split(r.Pattern[1:], "/")
		for j, s := range r.segs {
			named := strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && len(s) > 2
			if strings.ContainsAny(s, "{}") && !named || strings.HasSuffix(s, "...}") && j != len(r.segs)-1 {
				panic(fmt.Sprintf("service: route %q: a segment is a word, {name}, or a last {name...}", r.Pattern))
			}
		}
	}
	return &Router{routes: routes}
}

// Routes returns the table, for documentation and tests.
func (rt *Router) Routes() []Route { return rt.routes }

// Lookup finds the route of method and path. With none, allowed lists the
// methods the path has routes for (none: the path is unknown).
func (rt *Router) Lookup(method, path string) (r *Route, p Params, allowed []string) {
	if !strings.HasPrefix(path, "/") {
		return nil, nil, nil
	}
	for i := range rt.routes {
		c := &rt.routes[i]
		params, ok := match(c.segs, path[1:])
		if !ok {
			continue
		}
		if c.Method == "" || c.Method == method {
			return c, params, nil
		}
		if !slices.Contains(allowed, c.Method) {
			allowed = append(allowed, c.Method)
		}
	}
	return nil, nil, allowed
}

// match matches path (without its leading "/") against a pattern's segments.
func match(segs []string, path string) (Params, bool) {
	var params Params
	for i, s := range segs {
		if name, ok := strings.CutSuffix(s, "...}"); ok {
			return append(params, Param{name[1:], path}), true
		}
		seg, rest, more := strings.Cut(path, "/")
		switch {
		case strings.HasPrefix(s, "{"):
			if seg == "" {
				return nil, false
			}
			params = append(params, Param{s[1 : len(s)-1], seg})
		case s != seg:
			return nil, false
		}
		if i == len(segs)-1 || !more {
			return params, i == len(segs)-1 && !more
		}
		path = rest
	}
	return params, false
}

// NotFound answers a path no route has.
func NotFound(ctx *fasthttp.RequestCtx) {
	WriteStatus(ctx, http.StatusNotFound, protocol.InvalidRequest, fmt.Sprintf("no route for %s %s", ctx.Method(), ctx.Path()))
}

// MethodNotAllowed answers a method the path has no route for.
func MethodNotAllowed(ctx *fasthttp.RequestCtx, allowed []string) {
	allow := strings.Join(allowed, ", ")
	ctx.Response.Header.Set("Allow", allow)
	WriteStatus(ctx, http.StatusMethodNotAllowed, protocol.InvalidRequest,
		fmt.Sprintf("method %s not allowed on %s (allowed: %s)", ctx.Method(), ctx.Path(), allow))
}

// Refuse answers a request Lookup found no route for: 405 when the path has
// routes for other methods, else 404.
func Refuse(ctx *fasthttp.RequestCtx, allowed []string) {
	if len(allowed) > 0 {
		MethodNotAllowed(ctx, allowed)
		return
	}
	NotFound(ctx)
}
