package api

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/server/service"
)

// Authorization (Config.Authz). The principal of a request is the common
// name of its client certificate. The cluster's services may do everything;
// others what their route needs (needOf). A request is checked by the
// member it reaches first and again by the leader when relayed there: the
// relay carries the member's certificate and names the principal in
// raftgroup.PrincipalHeader, which is honoured from services alone.

// followerCatchUp bounds how long a follower waits for newer state before
// it refuses a request.
const followerCatchUp = time.Second

// maxAuthWaiting bounds the requests waiting in catchUp at once.
const maxAuthWaiting = 64

// viewerKey is the request user value holding who reads the model: a
// *cluster.Principal, or the service name for the cluster's services.
const viewerKey = "sluice.viewer"

// authorize checks the request's principal; it answers the request itself
// and returns false when it may not go on.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, need cluster.Need) bool {
	name, check := s.cfg.Authz.Principal(ctx)
	if !check {
		ctx.SetUserValue(viewerKey, name)
		return true
	}
	host := s.cfg.Authz.ClientHost(ctx)
	access := s.fsm.Access()
	p, _ := access.Principal(name)
	p = p.At(host)
	err := access.Authorize(p, name, need)
	if err != nil && !need.Service && !s.node.IsLeader() {
		if q, ok := s.catchUp(access.Version, name, host, need); ok {
			p, err = q, nil
		}
	}
	if err != nil {
		s.log.Warn("request denied", "principal", name, "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err, "remote", ctx.RemoteAddr().String())
		writeError(ctx, err)
		return false
	}
	ctx.SetUserValue(viewerKey, p)
	service.RelayFor(ctx, name, host)
	return true
}

// catchUp decides again, on each newer state for up to followerCatchUp, a
// request a follower would refuse: it may not have applied a principal or
// ACL change the leader acknowledged a moment ago. At most maxAuthWaiting
// requests wait at once; past that they are refused at once.
func (s *Server) catchUp(since uint64, name, host string, need cluster.Need) (*cluster.Principal, bool) {
	defer s.authWaiting.Add(-1)
	if s.authWaiting.Add(1) > maxAuthWaiting {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(s.base, followerCatchUp)
	defer cancel()
	for {
		v, err := s.fsm.WaitNewer(ctx, since)
		if err != nil {
			return nil, false
		}
		access := s.fsm.Access()
		p, _ := access.Principal(name)
		p = p.At(host)
		if access.Authorize(p, name, need) == nil {
			return p, true
		}
		since = v
	}
}

// view is the model as the request may see it: whole for the cluster's
// services and when authorization is off, redacted for a principal.
func view(ctx *fasthttp.RequestCtx, snap *cluster.Snapshot) *cluster.Snapshot {
	if p, ok := ctx.UserValue(viewerKey).(*cluster.Principal); ok {
		return snap.Redacted(snap.AllowedCluster(p, cluster.OpDescribe))
	}
	return snap
}
