package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Authentication and authorization (-require-auth). A request carries
// "Authorization: Bearer TOKEN"; the principal is the one whose token hashes
// (SHA-256) to the same value in the cluster model the frontend holds. What a
// route needs:
//
//   - produce to a topic: the produce ACL on it (or "*");
//   - fetch from a topic: the consume ACL on it;
//   - /v1/groups (HTTP consumers' groups): a consume ACL on some topic;
//   - a producer id (/v1/producers): a produce ACL on some topic;
//   - reading the cluster model and topics: any principal;
//   - everything else (topic and cluster changes, quotas, the console): an
//     admin principal.
//
// Admin principals may do everything. A request without a valid token gets
// 401 SASL_AUTHENTICATION_FAILED, one the ACLs refuse 403 with
// TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED, and each refusal is logged.

// need is what a route requires.
type need struct {
	op    string // cluster.OpProduce or OpConsume; "" with admin or read
	topic string // "" with op: on some topic
	admin bool
	read  bool // any authenticated principal
}

// needOf classifies a request by method and path.
func needOf(method, path string) need {
	switch {
	case path == pathCluster || path == pathTopics && method == fasthttp.MethodGet:
		return need{read: true}
	case path == pathProducers:
		return need{op: cluster.OpProduce}
	case path == pathGroups || strings.HasPrefix(path, pathGroups+"/"):
		return need{op: cluster.OpConsume}
	case strings.HasPrefix(path, pathTopicPrefix):
		parts := strings.Split(path[len(pathTopicPrefix):], "/")
		switch {
		case len(parts) == 1 && method == fasthttp.MethodGet:
			return need{read: true}
		case len(parts) == 2 && parts[1] == "records":
			return need{op: cluster.OpProduce, topic: parts[0]}
		case len(parts) == 4 && parts[1] == "partitions" && parts[3] == "records":
			return need{op: cluster.OpConsume, topic: parts[0]}
		}
	}
	return need{admin: true}
}

// authorize authenticates the request and checks the route's need; it
// answers the request itself and returns false when it may not go on.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, id, method, path string) bool {
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
		s.log.Warn("request refused: not authenticated", "request_id", id, "method", method, "path", path, "remote", ctx.RemoteAddr().String())
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeError(ctx, fasthttp.StatusUnauthorized, protocol.SaslAuthenticationFailed, "send Authorization: Bearer with a principal's token")
		return false
	}
	n := needOf(method, path)
	allowed := p.Admin || n.read
	code, what := protocol.ClusterAuthorizationFailed, "this needs an admin principal"
	switch {
	case allowed || n.admin:
	case n.topic != "":
		allowed = snap.Allowed(p, n.op, n.topic)
		code, what = protocol.TopicAuthorizationFailed, n.op+" on topic "+n.topic
	default:
		allowed = anyACL(snap, p.Name, n.op)
		code, what = protocol.TopicAuthorizationFailed, "a "+n.op+" ACL on some topic"
		if n.op == cluster.OpConsume {
			code = protocol.GroupAuthorizationFailed
		}
	}
	if !allowed {
		s.log.Warn("request denied", "request_id", id, "principal", p.Name, "method", method, "path", path, "needs", what)
		writeError(ctx, fasthttp.StatusForbidden, code, "principal "+p.Name+" may not: "+what)
		return false
	}
	return true
}

// anyACL reports whether principal has an ACL for op on some topic.
func anyACL(snap *cluster.Snapshot, principal, op string) bool {
	for _, a := range snap.ACLs {
		if a.Principal == principal && a.Operation == op {
			return true
		}
	}
	return false
}
