package api

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/libs/server/service"
)

// Config configures the HTTP server.
type Config struct {
	// Addr is the listen address (flag -http-addr).
	Addr string
	// MaxBodyBytes caps a request body; larger ones get 413.
	MaxBodyBytes int
	// MaxWait caps a watch's wait_ms.
	MaxWait time.Duration
	// RequestTimeout bounds the work of one request (proposal, forwarding),
	// on top of a watch's wait.
	RequestTimeout time.Duration
	// ReadTimeout bounds reading one request; IdleTimeout a keep-alive pause.
	ReadTimeout time.Duration
	IdleTimeout time.Duration
	// TLS, when set, makes the API serve HTTPS (requiring client
	// certificates when it says so).
	TLS *tls.Config
	// Authz, when on, checks every request against the ACLs, the client
	// certificate's common name being the principal.
	Authz service.CertAuthz
}

// DefaultConfig returns the flag defaults.
func DefaultConfig() Config {
	return Config{
		Addr:           "127.0.0.1:7070",
		MaxBodyBytes:   1 << 20,
		MaxWait:        60 * time.Second,
		RequestTimeout: 15 * time.Second,
		ReadTimeout:    30 * time.Second,
		IdleTimeout:    90 * time.Second,
	}
}

// Validate checks the fields.
func (c Config) Validate() error {
	if err := service.ValidateAddr("http-addr", c.Addr); err != nil {
		return err
	}
	if c.MaxBodyBytes < 1024 {
		return fmt.Errorf("api max body bytes %d is below 1024", c.MaxBodyBytes)
	}
	for name, d := range map[string]time.Duration{"max wait": c.MaxWait, "request timeout": c.RequestTimeout,
		"read timeout": c.ReadTimeout, "idle timeout": c.IdleTimeout} {
		if d <= 0 {
			return fmt.Errorf("api %s must be positive, got %v", name, d)
		}
	}
	return nil
}
