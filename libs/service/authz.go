package service

import (
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

// Finish completes the configuration after parsing, given the server TLS
// configuration: -authorize needs listeners that require client
// certificates.
func (a *CertAuthz) Finish(server *tls.Config) error {
	a.Services = SplitList(a.services)
	if a.On && (server == nil || server.ClientCAs == nil) {
		return errors.New("flag -authorize needs -tls-cert, -tls-key and -tls-ca (the principal is the client certificate's name)")
	}
	return nil
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
