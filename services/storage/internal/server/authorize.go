package server

import (
	"crypto/tls"
	"net"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Authorization (Config.Authz). The principal of a connection is the
// common name of its client certificate; the cluster's services may do
// everything, and anyone else what the ACLs kept by metadata name (admins
// every topic): produce needs the produce ACL of the topic, a consumer fetch
// the consume ACL, and a follower fetch a service (not even an admin). Look-ups
// (list offsets, leader epochs, replica states) need a verified certificate
// only, which TLS already enforced.

// peerName returns the common name of the connection's client certificate
// ("" without one). It is read once, with the client's address: the
// handshake is over by the first request.
func (c *conn) peerName() string {
	c.peerOnce.Do(func() {
		c.host, _, _ = net.SplitHostPort(c.nc.RemoteAddr().String())
		if tc, ok := c.nc.(*tls.Conn); ok {
			if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
				c.peer = certs[0].Subject.CommonName
			}
		}
	})
	return c.peer
}

// authorize reports whether the connection's principal may do op on topic
// (op "": only the cluster's services may), answering the request with the
// authorization error and logging the refusal when not.
func (c *conn) authorize(h *protocol.RequestHeader, op, topic string) bool {
	if !c.s.cfg.Authz.On {
		return true
	}
	name := c.peerName()
	if c.s.cfg.Authz.IsService(name) {
		return true
	}
	need := cluster.Need{Service: true}
	if op != "" {
		need = cluster.Need{Op: op, Topics: []string{topic}}
	}
	access := c.s.mgr.Access()
	p, _ := access.Principal(name)
	err := access.Authorize(p.At(c.host), name, need)
	if err == nil {
		return true
	}
	c.s.log.Warn("request denied", "principal", name, "api", h.APIKey.String(), "topic", topic, "err", err,
		"remote", c.nc.RemoteAddr().String())
	c.respondErr(h, err)
	return false
}
