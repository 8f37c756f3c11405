package server

import (
	"crypto/tls"
	"slices"

	"github.com/sluicemq/sluice/libs/protocol"
)

// Authorization (Config.Authorize). The principal of a connection is the
// common name of its client certificate; the cluster's services (Config.
// ServicePrincipals) may do everything, admins too, and anyone else what the
// ACLs kept by metadata name: produce needs the produce ACL of the topic, a
// consumer fetch the consume ACL, and a follower fetch a service. Look-ups
// (list offsets, leader epochs, replica states) need a verified certificate
// only, which TLS already enforced.

// peerName returns the common name of the connection's client certificate
// ("" without one). It is read once: the handshake is over by the first
// request.
func (c *conn) peerName() string {
	c.peerOnce.Do(func() {
		if tc, ok := c.nc.(*tls.Conn); ok {
			if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
				c.peer = certs[0].Subject.CommonName
			}
		}
	})
	return c.peer
}

// authorize reports whether the connection's principal may do op on topic
// (op "" : only the cluster's services may), answering the request with
// TOPIC_AUTHORIZATION_FAILED and logging the refusal when not.
func (c *conn) authorize(h *protocol.RequestHeader, op, topic string) bool {
	if !c.s.cfg.Authorize {
		return true
	}
	name := c.peerName()
	if slices.Contains(c.s.cfg.ServicePrincipals, name) {
		return true
	}
	access := c.s.mgr.Access()
	if p, ok := access.Principal(name); ok && (p.Admin || op != "" && access.Allowed(p, op, topic)) {
		return true
	}
	what := op + " on topic " + topic
	if op == "" {
		what = "replicate " + topic + " (a service's request)"
	}
	c.s.log.Warn("request denied", "principal", name, "api", h.APIKey.String(), "topic", topic, "needs", what,
		"remote", c.nc.RemoteAddr().String())
	c.respondErr(h, protocol.TopicAuthorizationFailed.Err("principal %q may not %s", name, what))
	return false
}
