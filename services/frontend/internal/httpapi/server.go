package httpapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/server/quota"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
	"github.com/sluicemq/sluice/services/frontend/internal/forward"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
	"github.com/sluicemq/sluice/services/frontend/internal/txnjoin"
)

// Config is the HTTP listener's configuration.
type Config struct {
	// Addr is the listen address of the public HTTP API.
	Addr string
	// MaxBodyBytes is the largest request body accepted; larger ones get 413.
	MaxBodyBytes int
	// ReadTimeout bounds reading one request (headers and body); WriteTimeout
	// bounds writing one response; IdleTimeout bounds a keep-alive connection's
	// wait for its next request.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// AdminTimeout bounds one admin request forwarded to the metadata service.
	AdminTimeout time.Duration
	// MaxWatchWait caps the wait_ms of a GET /v1/cluster long-poll.
	MaxWatchWait time.Duration
	// MaxConnsPerIP bounds the open connections from one client address; 0
	// means no limit. A connection past it gets 429 and is closed.
	MaxConnsPerIP int
	// TLS, when set, makes the listener serve HTTPS; a client certificate is
	// verified when given, not required (clients authenticate with tokens).
	TLS *tls.Config
	// RequireAuth makes every request authenticate with a principal's bearer
	// token and checks it against the ACLs (auth.go).
	RequireAuth bool
}

// DefaultConfig returns the settings used by the binary.
func DefaultConfig() Config {
	return Config{
		Addr:         "127.0.0.1:8080",
		MaxBodyBytes: 8 << 20,
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  2 * time.Minute,
		AdminTimeout: 15 * time.Second,
		MaxWatchWait: time.Minute,
	}
}

// Validate checks the address and ranges.
func (c Config) Validate() error {
	if err := service.ValidateAddr("http-addr", c.Addr); err != nil {
		return err
	}
	switch {
	case c.MaxBodyBytes < 1024 || c.MaxBodyBytes > 1<<30:
		return fmt.Errorf("flag -max-body-bytes: %d must be between 1 KiB and 1 GiB", c.MaxBodyBytes)
	case c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0:
		return fmt.Errorf("http read, write and idle timeouts must be positive")
	case c.AdminTimeout <= 0 || c.MaxWatchWait <= 0:
		return fmt.Errorf("admin timeout and watch wait must be positive")
	case c.MaxConnsPerIP < 0:
		return fmt.Errorf("flag -max-connections-per-ip: %d is negative (0: no limit)", c.MaxConnsPerIP)
	}
	return nil
}

// Admin is the metadata service's admin API as the frontend forwards it;
// *cluster.Client is one. Errors carrying a wire code are *protocol.Error.
type Admin interface {
	CreateTopic(ctx context.Context, req cluster.CreateTopicRequest) (*cluster.Topic, error)
	ListTopics(ctx context.Context) ([]cluster.Topic, error)
	DescribeTopic(ctx context.Context, name string) (*cluster.Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	AlterTopicConfig(ctx context.Context, name string, req cluster.AlterTopicConfigRequest) (*cluster.Topic, error)
	AddPartitions(ctx context.Context, name string, req cluster.AddPartitionsRequest) (*cluster.Topic, error)
	InitProducerID(ctx context.Context) (cluster.InitProducerIDResponse, error)
	ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) (*cluster.Partition, error)
	CancelReassignment(ctx context.Context, topic string, partition int32) (*cluster.Partition, error)
	DecommissionNode(ctx context.Context, id int32) (*cluster.DecommissionResponse, error)
	RecommissionNode(ctx context.Context, id int32) error
	SetQuota(ctx context.Context, q cluster.Quota) error
}

// Relay sends a request verbatim to a replicated service and returns its
// answer; *forward.Forwarder is one. The error means no replica answered.
type Relay interface {
	Forward(ctx context.Context, method, pathAndQuery string, header http.Header, body []byte) (*forward.Response, error)
}

// Deps are the parts the server serves with.
type Deps struct {
	Producer *produce.Producer
	Fetcher  *fetch.Fetcher
	Admin    Admin
	// Offsets relays the /v1/groups routes to the offsets service.
	Offsets Relay
	Cache   *metacache.Cache
	// Console serves the read-only web console under /console; nil leaves
	// those paths unrouted (404).
	Console fasthttp.RequestHandler
	// Quotas are the frontend's client quota buckets, shared with its Kafka
	// listener so that a client id has one budget on the frontend; nil: the
	// server's own.
	Quotas *quota.Limiter
	// Txns and Joiner bring a transactional batches body's partitions into
	// its producer's transaction (package txnjoin); nil Txns refuses such
	// bodies.
	Txns   *txns.Client
	Joiner *txnjoin.Joiner
}

// Server is the frontend's public HTTP API.
type Server struct {
	cfg      Config
	producer *produce.Producer
	fetcher  *fetch.Fetcher
	admin    Admin
	offsets  Relay
	cache    *metacache.Cache
	console  fasthttp.RequestHandler // nil when the console is not served
	routes   *service.Router
	quotas   *quota.Limiter // produce and fetch byte rates by client id
	txns     *txns.Client
	joiner   *txnjoin.Joiner
	bodies   *produce.Budget // admits produce bodies before they are read (admitBody)
	// otherBodies admits the bodies of the other routes (admin, groups), so
	// that a produce flood filling bodies cannot refuse a consumer's
	// heartbeat, and the other routes cannot fill it either.
	otherBodies *produce.Budget
	log         *slog.Logger
	ids         *requestIDs

	http *service.HTTPServer

	// base ends when Stop begins; long-polls run under it so that they do
	// not hold the shutdown up.
	base   context.Context
	cancel context.CancelFunc
}

// New listens on cfg.Addr. Start must be called to serve.
func New(cfg Config, d Deps, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if d.Quotas == nil {
		d.Quotas = quota.NewLimiter(nil)
	}
	s := &Server{cfg: cfg, producer: d.Producer, fetcher: d.Fetcher, admin: d.Admin, offsets: d.Offsets, cache: d.Cache,
		console: d.Console, quotas: d.Quotas, txns: d.Txns, joiner: d.Joiner, log: log, ids: newRequestIDs()}
	s.routes = s.newRoutes()
	s.bodies = bodyBudget(d.Producer)
	s.otherBodies = produce.NewBudget(int64(otherBodiesFactor)*int64(cfg.MaxBodyBytes), nil)
	s.base, s.cancel = context.WithCancel(context.Background())
	var err error
	s.http, err = service.ListenHTTPTLS(cfg.Addr, &fasthttp.Server{
		Name:               "sluice-frontend",
		Handler:            s.handle,
		ErrorHandler:       s.handleReadError,
		MaxRequestBodySize: cfg.MaxBodyBytes,
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		ReadBufferSize:     16 << 10,
		// Bodies are read by the handler, once admitted (admitBody);
		// multipart ones too (fasthttp would read those whole first).
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		MaxConnsPerIP:                cfg.MaxConnsPerIP,
	}, log, cfg.TLS)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Addr returns the listener's address.
func (s *Server) Addr() string { return s.http.Addr() }

// Start serves in a goroutine that Stop waits for.
func (s *Server) Start() { s.http.Start() }

// Stop ends long-polls (cluster watches and fetches), lets requests in
// progress finish until ctx ends, and waits for the serving goroutine.
func (s *Server) Stop(ctx context.Context) error {
	s.cancel()
	return s.http.Stop(ctx)
}
