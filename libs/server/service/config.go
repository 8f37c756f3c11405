package service

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/sluicemq/sluice/libs/tlsconf"
)

// Common is the configuration every service shares.
type Common struct {
	// AdminAddr is the listen address of the admin HTTP server (health, metrics).
	AdminAddr string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogFormat is json or text.
	LogFormat string
	// Pprof exposes /debug/pprof on the admin listener.
	Pprof bool
	// TLS is the process's TLS identity (-tls-cert, -tls-key, -tls-ca):
	// its listeners (storage protocol, HTTP APIs, Raft; not the admin one)
	// serve with it, and its clients of other services present it (mutual
	// TLS when -tls-ca is set).
	TLS tlsconf.Files
}

// Register adds the common flags with the service's default admin address.
func (c *Common) Register(fs *FlagSet, defaultAdmin string) {
	fs.String(&c.AdminAddr, "admin-addr", defaultAdmin, "listen address of the admin HTTP server (/healthz, /readyz, /metrics)")
	fs.String(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.String(&c.LogFormat, "log-format", "json", "log format: json or text")
	fs.Bool(&c.Pprof, "pprof", false, "serve /debug/pprof on the admin listener")
	fs.String(&c.TLS.CertFile, "tls-cert", "", "PEM certificate of this process: its listeners (but the admin one) and its clients of other services use TLS")
	fs.String(&c.TLS.KeyFile, "tls-key", "", "PEM key of -tls-cert")
	fs.String(&c.TLS.CAFile, "tls-ca", "", "PEM certificate authorities: peers are verified with them, and listeners require client certificates they signed (mutual TLS)")
}

// TLSClient is a process's TLS configuration for its clients of other
// services (storage protocol, HTTP APIs, Raft), nil when TLS is off; the
// services put the one they loaded at start into their fx graph.
type TLSClient struct{ Config *tls.Config }

// PublicTLS returns the configuration for a client-facing listener from a
// server one: a client certificate is verified when one is given, not
// required (clients authenticate otherwise). Nil stays nil.
func PublicTLS(server *tls.Config) *tls.Config {
	if server == nil {
		return nil
	}
	c := server.Clone()
	if c.ClientCAs != nil {
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// TLSConfigs loads the TLS identity: the server and client configurations,
// both nil when TLS is off.
func (c *Common) TLSConfigs() (server, client *tls.Config, err error) {
	return c.TLS.Load()
}

// Validate checks the common fields.
func (c *Common) Validate() error {
	if err := ValidateAddr("admin-addr", c.AdminAddr); err != nil {
		return err
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return fmt.Errorf("flag -log-format: %q is not json or text", c.LogFormat)
	}
	return nil
}

// ValidateAddr checks that a flag holds a host:port address.
func ValidateAddr(flagName, addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("flag -%s: %q is not host:port: %w", flagName, addr, err)
	} else if port == "" {
		return fmt.Errorf("flag -%s: %q has no port", flagName, addr)
	}
	return nil
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("flag -log-level: %q is not debug, info, warn or error", s)
	}
	return l, nil
}
