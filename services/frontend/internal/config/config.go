// Package config is the frontend's configuration: one struct holding each
// component's Config, filled from flags with SLUICE_* environment fallbacks
// and validated with messages that name the flag at fault.
package config

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/frontend/internal/console"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
	"github.com/sluicemq/sluice/services/frontend/internal/httpapi"
	"github.com/sluicemq/sluice/services/frontend/internal/kafkaapi"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// DefaultAdminAddr is the default listen address of the admin HTTP server.
const DefaultAdminAddr = "127.0.0.1:8081"

// Config is the whole frontend configuration.
type Config struct {
	// Common holds the admin listener and logging settings.
	Common service.Common
	// NodeID names this frontend in logs; the host name when empty.
	NodeID string
	// Metadata is the comma-separated list of metadata service addresses.
	Metadata string
	// Offsets is the comma-separated list of offsets service replica URLs,
	// to which the /v1/groups routes are relayed.
	Offsets string
	// HTTP is the public listener.
	HTTP httpapi.Config
	// Produce tunes forwarding to storage.
	Produce produce.Config
	// Fetch tunes HTTP consumption; its retry backoff is the produce one
	// (-retry-backoff, -retry-backoff-max).
	Fetch fetch.Config
	// Cache tunes the metadata watch.
	Cache metacache.Config
	// TLSClient is the TLS configuration of the frontend's clients of
	// metadata, offsets and storage (from -tls-cert, -tls-key, -tls-ca); nil
	// when TLS is off.
	TLSClient *tls.Config
	// Console tunes the read-only web console under /console.
	Console console.Config
	// Kafka is the Kafka protocol listener.
	Kafka kafkaapi.Config
}

// DefaultKafkaAddr is the default listen address of the Kafka listener.
const DefaultKafkaAddr = "127.0.0.1:9092"

// DefaultOffsets are the offsets replicas of the local cluster (make run).
const DefaultOffsets = "http://127.0.0.1:7080,http://127.0.0.1:7083,http://127.0.0.1:7086"

// Default returns the configuration the binary starts from.
func Default() Config {
	return Config{
		Common:   service.Common{AdminAddr: DefaultAdminAddr, LogLevel: "info", LogFormat: "json"},
		Metadata: "http://127.0.0.1:7070",
		Offsets:  DefaultOffsets,
		HTTP:     httpapi.DefaultConfig(),
		Produce:  produce.DefaultConfig(),
		Fetch:    fetch.DefaultConfig(),
		Cache:    metacache.DefaultConfig(),
		Console:  console.DefaultConfig(),
		Kafka:    kafkaapi.Config{Listener: kafka.DefaultConfig(DefaultKafkaAddr), Heartbeat: time.Second},
	}
}

// Register adds the frontend's flags to fs, with c's values as defaults.
func (c *Config) Register(fs *service.FlagSet) {
	c.Common.Register(fs, c.Common.AdminAddr)
	fs.String(&c.NodeID, "node-id", c.NodeID, "name of this frontend in logs (default: the host name)")
	fs.String(&c.NodeID, "id", c.NodeID, "alias of -node-id")
	fs.String(&c.Metadata, "metadata", c.Metadata, "comma-separated metadata service addresses")
	fs.String(&c.Offsets, "offsets", c.Offsets, "comma-separated offsets service replica URLs (the /v1/groups routes are relayed there)")
	fs.String(&c.HTTP.Addr, "http-addr", c.HTTP.Addr, "listen address of the public HTTP API (produce and admin routes)")
	fs.Int(&c.HTTP.MaxBodyBytes, "max-body-bytes", c.HTTP.MaxBodyBytes, "largest request body accepted; larger ones get 413")
	fs.Duration(&c.HTTP.ReadTimeout, "http-read-timeout", c.HTTP.ReadTimeout, "time allowed to read one request")
	fs.Duration(&c.HTTP.WriteTimeout, "http-write-timeout", c.HTTP.WriteTimeout, "time allowed to write one response")
	fs.Duration(&c.HTTP.IdleTimeout, "http-idle-timeout", c.HTTP.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.Bool(&c.HTTP.RequireAuth, "require-auth", false, "every request must carry a principal's bearer token (Authorization: Bearer), checked against the ACLs kept by metadata")
	fs.Int(&c.HTTP.MaxConnsPerIP, "max-connections-per-ip", c.HTTP.MaxConnsPerIP, "open connections allowed from one client address (more get 429 and are closed); 0: no limit")
	fs.Duration(&c.HTTP.AdminTimeout, "admin-timeout", c.HTTP.AdminTimeout, "time allowed for a topic admin request forwarded to metadata")
	fs.Int(&c.Produce.MaxRecords, "max-records", c.Produce.MaxRecords, "largest number of records in one JSON or msgpack produce body; more get 413")
	fs.Int64(&c.Produce.MaxInFlightBytes, "max-in-flight-bytes", c.Produce.MaxInFlightBytes,
		"largest sum of the body sizes of produce requests being served; a request past it gets 429")
	fs.Duration(&c.Fetch.Timeout, "fetch-timeout", c.Fetch.Timeout, "time allowed for an HTTP fetch beyond its max_wait_ms (leader look-ups and retries included)")
	fs.Duration(&c.Produce.Timeout, "produce-timeout", c.Produce.Timeout, "time allowed for a produce request, retries included")
	fs.Int(&c.Produce.Retries, "produce-retries", c.Produce.Retries, "resends of a partition's batch after a retriable error")
	fs.Duration(&c.Produce.RetryBackoff, "retry-backoff", c.Produce.RetryBackoff, "first pause before a resend; doubles up to -retry-backoff-max")
	fs.Duration(&c.Produce.MaxRetryBackoff, "retry-backoff-max", c.Produce.MaxRetryBackoff, "longest pause before a resend")
	fs.Duration(&c.Produce.Linger, "linger", c.Produce.Linger,
		"how long a partition's batch of JSON/msgpack records waits for records of other requests before it is sent; 0 sends each request's records at once in batches of their own")
	fs.Int(&c.Produce.BatchMaxBytes, "batch-max-bytes", c.Produce.BatchMaxBytes,
		"largest batch built from JSON/msgpack records when -linger is above 0; a request's records past it go in the next batches, in order")
	fs.Duration(&c.Cache.WatchWait, "metadata-watch-wait", c.Cache.WatchWait, "how long one metadata watch long-poll waits for a change")
	fs.Duration(&c.Console.Refresh, "console-refresh", c.Console.Refresh, "how often a /console page reloads itself in the browser (whole seconds; 0: never)")
	fs.Duration(&c.Console.LookupTimeout, "console-timeout", c.Console.LookupTimeout,
		"time allowed for each look-up of a /console page (metadata, storage nodes, offsets service)")
	c.Kafka.Listener.Register(fs)
	fs.String(&c.Kafka.Rack, "rack", c.Kafka.Rack, "rack or zone of this frontend, given to Kafka clients")
	fs.Duration(&c.Kafka.Heartbeat, "heartbeat-interval", c.Kafka.Heartbeat, "interval between the Kafka listener's heartbeats to metadata (its session times out like a storage node's)")
}

// Validate checks every field and names the flag of the first bad one.
func (c *Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if len(service.SplitList(c.Metadata)) == 0 {
		return fmt.Errorf("flag -metadata: no address")
	}
	if err := validateURLs("offsets", c.Offsets); err != nil {
		return err
	}
	if err := c.HTTP.Validate(); err != nil {
		return err
	}
	p := c.Produce
	switch {
	case p.MaxRecords < 1:
		return fmt.Errorf("flag -max-records: %d must be at least 1", p.MaxRecords)
	case p.MaxInFlightBytes < int64(c.HTTP.MaxBodyBytes):
		return fmt.Errorf("flag -max-in-flight-bytes: %d is below -max-body-bytes %d (one largest request must fit)", p.MaxInFlightBytes, c.HTTP.MaxBodyBytes)
	case p.MaxInFlightBytes > 1<<40:
		return fmt.Errorf("flag -max-in-flight-bytes: %d is over 1 TiB", p.MaxInFlightBytes)
	case p.Timeout < time.Millisecond || p.Timeout > 24*time.Hour:
		return fmt.Errorf("flag -produce-timeout: %v must be between 1ms and 24h", p.Timeout)
	case p.Retries < 0:
		return fmt.Errorf("flag -produce-retries: %d must not be negative", p.Retries)
	case p.RetryBackoff <= 0:
		return fmt.Errorf("flag -retry-backoff: %v must be positive", p.RetryBackoff)
	case p.MaxRetryBackoff < p.RetryBackoff:
		return fmt.Errorf("flag -retry-backoff-max: %v is below -retry-backoff %v", p.MaxRetryBackoff, p.RetryBackoff)
	case p.Linger < 0 || p.Linger > 10*time.Second:
		return fmt.Errorf("flag -linger: %v must be between 0 and 10s", p.Linger)
	case p.Linger >= p.Timeout:
		return fmt.Errorf("flag -linger: %v must be below -produce-timeout %v", p.Linger, p.Timeout)
	case p.BatchMaxBytes < 1<<10 || p.BatchMaxBytes > 1<<30:
		return fmt.Errorf("flag -batch-max-bytes: %d must be between 1 KiB and 1 GiB", p.BatchMaxBytes)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("produce flags: %w", err)
	}
	if c.Fetch.Timeout < time.Millisecond || c.Fetch.Timeout > 10*time.Minute {
		return fmt.Errorf("flag -fetch-timeout: %v must be between 1ms and 10m", c.Fetch.Timeout)
	}
	if err := c.Fetch.Validate(); err != nil {
		return fmt.Errorf("fetch flags: %w", err)
	}
	if err := c.Kafka.Listener.Validate(); err != nil {
		return fmt.Errorf("flags -kafka-*: %w", err)
	}
	if c.Kafka.Heartbeat <= 0 || c.Kafka.Heartbeat > time.Minute {
		return fmt.Errorf("flag -heartbeat-interval: %v must be between 0 and 1m", c.Kafka.Heartbeat)
	}
	if c.Cache.WatchWait <= 0 || c.Cache.WatchWait > 10*time.Minute {
		return fmt.Errorf("flag -metadata-watch-wait: %v must be between 0 and 10m", c.Cache.WatchWait)
	}
	if err := c.Cache.Validate(); err != nil {
		return fmt.Errorf("metadata cache: %w", err)
	}
	return c.Console.Validate()
}

// validateURLs checks a comma-separated list of service base URLs
// ("http://host:port" or "host:port").
func validateURLs(flag, list string) error {
	addrs := service.SplitList(list)
	if len(addrs) == 0 {
		return fmt.Errorf("flag -%s: no address", flag)
	}
	for _, a := range addrs {
		full := a
		if !strings.Contains(a, "://") {
			full = "http://" + a
		}
		u, err := url.Parse(full)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("flag -%s: %q is not a base URL (http://host:port or host:port)", flag, a)
		}
	}
	return nil
}

// Parse reads the command line (and SLUICE_* variables) over the defaults and
// validates the result.
func Parse(args []string) (Config, error) {
	c := Default()
	fs := service.NewFlagSet("sluice-frontend")
	c.Register(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Fetch.RetryBackoff, c.Fetch.MaxRetryBackoff = c.Produce.RetryBackoff, c.Produce.MaxRetryBackoff
	c.Kafka.Listener.Finish()
	if err := c.Validate(); err != nil {
		return c, err
	}
	server, client, err := c.Common.TLSConfigs()
	if err != nil {
		return c, err
	}
	c.HTTP.TLS, c.TLSClient = service.PublicTLS(server), client
	// The Kafka listener checks ACLs with -require-auth, and whenever it
	// authenticates clients with SASL.
	c.Kafka.Listener.TLS = service.PublicTLS(server)
	c.Kafka.RequireAuth = c.HTTP.RequireAuth || len(c.Kafka.Listener.SASLMechanisms) > 0
	if c.NodeID == "" {
		if h, err := os.Hostname(); err == nil {
			c.NodeID = h
		}
	}
	return c, nil
}
