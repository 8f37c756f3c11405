package service

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"

	"github.com/valyala/fasthttp"
)

// PrincipalHeader names the principal a request is relayed for, by a
// metadata member to its leader or by a frontend to the offsets service, so
// that the receiver decides with its own state. A receiver honours it only
// from the cluster's own services (or, with authorization off, where it can
// only restrict).
const PrincipalHeader = "X-Sluice-Principal"

// ClientHostHeader names, beside PrincipalHeader, the address the relayed
// request came from, for ACLs that name hosts.
const ClientHostHeader = "X-Sluice-Client-Host"

// CertAuthz is certificate authorization (-authorize, -service-principals),
// taken by the services whose listeners require client certificates
// (storage, metadata, offsets): the principal of a connection is the common
// name of its client certificate; the cluster's own services, named by
// Services, may do everything, and anyone else what the ACLs kept by
// metadata allow.
type CertAuthz struct {
	On       bool
	Services []string

	services string // the flag's text until Finish
}

// Register adds -authorize and -service-principals.
func (a *CertAuthz) Register(fs *FlagSet) {
	fs.Bool(&a.On, "authorize", false, "check every request against the ACLs, the client certificate's common name being the principal (needs -tls-cert, -tls-key and -tls-ca)")
	fs.String(&a.services, "service-principals", "sluice-node", "comma-separated certificate names of the cluster's own services, which may do everything")
}

// TLSConfigs loads c's TLS identity (Common.TLSConfigs) and completes a
// after parsing: -authorize needs listeners that require client
// certificates.
func (a *CertAuthz) TLSConfigs(c *Common) (server, client *tls.Config, err error) {
	if server, client, err = c.TLSConfigs(); err != nil {
		return nil, nil, err
	}
	a.Services = SplitList(a.services)
	if a.On && (server == nil || server.ClientCAs == nil) {
		return nil, nil, errors.New("flag -authorize needs -tls-cert, -tls-key and -tls-ca (the principal is the client certificate's name)")
	}
	return server, client, nil
}

// Principal returns whom a request is for, and whether that principal is
// to be checked: the certificate's name under -authorize, unless it is one
// of the cluster's services; the principal a service names in
// PrincipalHeader (with authorization off anyone may name one, which can
// only restrict). check is false for a service acting for itself and for
// an anonymous request with authorization off.
func (a *CertAuthz) Principal(ctx *fasthttp.RequestCtx) (name string, check bool) {
	name = PeerName(ctx)
	if a.On && !a.IsService(name) {
		return name, true
	}
	if on := string(ctx.Request.Header.Peek(PrincipalHeader)); on != "" {
		return on, true
	}
	return name, false
}

// ClientHost returns the address a request is from: its peer's, or for a
// request a service relays for a principal (Principal), the address the
// service names in ClientHostHeader.
func (a *CertAuthz) ClientHost(ctx *fasthttp.RequestCtx) string {
	name := PeerName(ctx)
	relayed := len(ctx.Request.Header.Peek(PrincipalHeader)) > 0 && !(a.On && !a.IsService(name))
	if h := string(ctx.Request.Header.Peek(ClientHostHeader)); relayed && h != "" {
		return h
	}
	return ctx.RemoteIP().String()
}

// relayKey is the request user value naming the principal a relay of the
// request is for (RelayFor).
const relayKey = "sluice.relay-principal"

// relay is a principal a relay is for, and the address its request came
// from.
type relay struct{ principal, host string }

// RelayFor marks a request as checked for principal, from host:
// RelayContext makes a relay of it name them.
func RelayFor(ctx *fasthttp.RequestCtx, principal, host string) {
	ctx.SetUserValue(relayKey, relay{principal, host})
}

type principalKey struct{}

// RelayContext returns c carrying the principal RelayFor marked the request
// with, if any, for a relay to name in PrincipalHeader (RelayPrincipal).
func RelayContext(ctx *fasthttp.RequestCtx, c context.Context) context.Context {
	if r, ok := ctx.UserValue(relayKey).(relay); ok && r.principal != "" {
		return context.WithValue(c, principalKey{}, r)
	}
	return c
}

// RelayPrincipal returns the principal c relays for ("" for none) and the
// address its request came from.
func RelayPrincipal(c context.Context) (name, host string) {
	r, _ := c.Value(principalKey{}).(relay)
	return r.principal, r.host
}

// IsService reports whether name is one of the cluster's services.
func (a *CertAuthz) IsService(name string) bool { return slices.Contains(a.Services, name) }

// PeerName returns the common name of the client certificate of an HTTPS
// request, "" without one.
func PeerName(ctx *fasthttp.RequestCtx) string {
	if st := ctx.TLSConnectionState(); st != nil && len(st.PeerCertificates) > 0 {
		return st.PeerCertificates[0].Subject.CommonName
	}
	return ""
}
