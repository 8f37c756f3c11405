package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
)

// Authentication and authorization (-require-auth). A request carries
// "Authorization: Bearer TOKEN"; the principal is the one whose token hashes
// (SHA-256) to the same value in the cluster model the frontend holds. What a
// route needs (its entry in the route table, newRoutes):
//
//   - produce to a topic: the produce ACL on it (or "*");
//   - fetch from a topic: the consume ACL on it;
//   - /v1/groups (HTTP consumers' groups): what groups.NeedOf says, the
//     offsets service's own rule;
//   - a producer id (/v1/producers): a produce ACL on some topic;
//   - reading the cluster model and topics: any principal (the model
//     without token hashes, and without principals and ACLs unless admin);
//   - everything else (topic and cluster changes, quotas, the console): an
//     admin principal.
//
// Admin principals may do everything. A request without a valid token gets
// 401 SASL_AUTHENTICATION_FAILED, one the ACLs refuse 403 with
// TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED, and each refusal is logged.

// principalKey is the request user value holding the authenticated
// *cluster.Principal.
const principalKey = "sluice.principal"

// authenticate finds the request's principal from its token, before its body
// is read, so that a client without a valid token holds none of the
// in-flight budget; it answers 401 itself and returns false when there is
// none. The principal is kept for authorize.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx, id string) bool {
	snap := s.cache.Snapshot()
	token, ok := strings.CutPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer ")
	var p *cluster.Principal
	if ok && token != "" && snap != nil {
		sum := sha256.Sum256([]byte(token))
		p, ok = snap.PrincipalByToken(hex.EncodeToString(sum[:]))
	} else {
		ok = false
	}
	if !ok {
		s.log.Warn("request refused: not authenticated", "request_id", id, "method", string(ctx.Method()), "path", string(ctx.Path()), "remote", ctx.RemoteAddr().String())
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="sluice"`)
		service.WriteCode(ctx, protocol.SaslAuthenticationFailed, "send Authorization: Bearer with a principal's token")
		return false
	}
	ctx.SetUserValue(principalKey, p.At(ctx.RemoteIP().String()))
	return true
}

// authorize checks the route's need for the principal authenticate found
// (some needs read the body: it is in by now); it answers the request itself
// and returns false when it may not go on. authenticate has run: the
// principal is set, and so is the cache's snapshot.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, need cluster.Need) bool {
	p := ctx.UserValue(principalKey).(*cluster.Principal)
	if err := s.cache.Snapshot().Authorize(p, p.Name, need); err != nil {
		s.log.Warn("request denied", "request_id", requestID(ctx), "principal", p.Name, "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
		service.WriteError(ctx, err)
		return false
	}
	return true
}

// seesAccess reports whether the request may see the principals and ACLs:
// an admin's or one allowed describe on the cluster, or any request when
// authentication is off.
func seesAccess(ctx *fasthttp.RequestCtx, snap *cluster.Snapshot) bool {
	p, ok := ctx.UserValue(principalKey).(*cluster.Principal)
	return !ok || snap.AllowedCluster(p, cluster.OpDescribe)
}
