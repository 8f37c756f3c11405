// Package tlsconf builds the TLS configurations of Sluice's listeners and
// clients from PEM files, and generates a certificate authority and
// certificates for development clusters and tests (make certs).
//
// One identity per process: the certificate a service serves with is also the
// one it presents to the services it calls, so a cluster with a CA file set
// runs mutual TLS between its services.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names the PEM files of a process's TLS identity.
type Files struct {
	// CertFile and KeyFile are the process's certificate chain and key;
	// both empty means TLS is off.
	CertFile, KeyFile string
	// CAFile holds the certificate authorities peers are verified against:
	// servers then require client certificates signed by one of them
	// (mutual TLS), and clients verify servers with them. Empty: servers ask
	// for no client certificate and clients use the system roots.
	CAFile string
}

// Enabled reports whether the files configure TLS.
func (f Files) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" }

// Validate checks the combination of files (not their contents).
func (f Files) Validate() error {
	switch {
	case (f.CertFile == "") != (f.KeyFile == ""):
		return errors.New("flags -tls-cert and -tls-key go together")
	case f.CAFile != "" && !f.Enabled():
		return errors.New("flag -tls-ca needs -tls-cert and -tls-key")
	}
	return nil
}

// Load returns the server and client configurations the files describe, or
// nil for both when TLS is off.
func (f Files) Load() (server, client *tls.Config, err error) {
	if err := f.Validate(); err != nil {
		return nil, nil, err
	}
	if !f.Enabled() {
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	var pool *x509.CertPool
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("tls: CA file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", f.CAFile)
		}
	}
	server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if pool != nil {
		server.ClientCAs, server.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	client = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool}
	return server, client, nil
}

// ClientFiles loads a client-only configuration: the CA to verify servers
// with and, for mutual TLS, a certificate and key (both optional).
func ClientFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate and its key go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
