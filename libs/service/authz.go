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

// relayKey is the request user value naming the principal a relay of the
// request is for (RelayFor).
const relayKey = "sluice.relay-principal"

// RelayFor marks a request as checked for principal: RelayContext makes a
// relay of it name the principal.
func RelayFor(ctx *fasthttp.RequestCtx, principal string) { ctx.SetUserValue(relayKey, principal) }

type principalKey struct{}

// RelayContext returns c carrying the principal RelayFor marked the request
// with, if any, for a relay to name in PrincipalHeader (RelayPrincipal).
func RelayContext(ctx *fasthttp.RequestCtx, c context.Context) context.Context {
	if name, ok := ctx.UserValue(relayKey).(string); ok && name != "" {
		return context.WithValue(c, principalKey{}, name)
	}
	return c
}

// RelayPrincipal returns the principal c relays for ("" for none).
func RelayPrincipal(c context.Context) string {
	name, _ := c.Value(principalKey{}).(string)
	return name
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
