package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/quota"
	"github.com/sluicemq/sluice/libs/server/service"

	"github.com/sluicemq/sluice/services/storage/internal/replica"
	"github.com/sluicemq/sluice/services/storage/internal/tier"
)

// Config configures the protocol listener.
type Config struct {
	// Addr is the listen address.
	Addr string
	// MaxFrameBytes bounds one request frame (and so one produce request).
	MaxFrameBytes int
	// MaxInFlight bounds the requests in flight on one connection.
	MaxInFlight int
	// MaxFetchWait caps a fetch's long-poll.
	MaxFetchWait time.Duration
	// WriteTimeout bounds writing one response.
	WriteTimeout time.Duration
	// TLS, when set, makes the listener speak TLS (with client certificates
	// required when it says so). Fetches are then copied through user space
	// and encrypted: sendfile cannot send TLS records.
	TLS *tls.Config
	// Authz checks every request against the ACLs when on, taking the
	// client certificate's common name as the principal (it needs TLS with
	// client certificates); the cluster's own services (replication,
	// frontends, offsets) may do everything.
	Authz service.CertAuthz
	// MaxConnsPerIP bounds the open connections from one client address
	// (Kafka's max.connections.per.ip); 0 means no limit. A connection past
	// it is answered with TOO_MANY_CONNECTIONS and closed.
	MaxConnsPerIP int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Addr: "127.0.0.1:9101", MaxFrameBytes: 16 << 20, MaxInFlight: 256, MaxFetchWait: 30 * time.Second, WriteTimeout: 30 * time.Second}
}

// Validate checks ranges.
func (c Config) Validate() error {
	switch {
	case c.MaxFrameBytes < 1024:
		return fmt.Errorf("max frame bytes %d is below 1024", c.MaxFrameBytes)
	case c.MaxInFlight < 1:
		return fmt.Errorf("max in-flight %d is below 1", c.MaxInFlight)
	case c.MaxFetchWait <= 0 || c.WriteTimeout <= 0:
		return errors.New("fetch wait and write timeout must be positive")
	case c.MaxConnsPerIP < 0:
		return fmt.Errorf("max connections per ip %d is negative (0: no limit)", c.MaxConnsPerIP)
	}
	return nil
}

// Metrics are the server's Prometheus series.
type Metrics struct {
	Requests       *prometheus.CounterVec
	Errors         *prometheus.CounterVec
	BytesIn        *prometheus.CounterVec // by topic
	BytesOut       *prometheus.CounterVec // by topic and reader (consumer or follower)
	Connections    prometheus.Gauge
	Rejected       prometheus.Counter       // connections refused at -max-connections-per-ip
	QuotaThrottled prometheus.Counter       // consumer fetches refused over their client's quota
	ProduceLatency *prometheus.HistogramVec // by topic and acks
	Produced       *prometheus.CounterVec   // produce requests answered, by topic
	Fetched        *prometheus.CounterVec   // fetch responses with records, by topic and reader
}

// NewMetrics registers the server's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_storage_requests_total", Help: "Storage protocol requests by API."}, []string{"api"}),
		Errors:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_storage_request_errors_total", Help: "Storage protocol error responses by API and code."}, []string{"api", "code"}),
		BytesIn:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_storage_produce_bytes_total", Help: "Record batch bytes appended by produce requests, by topic."}, []string{"topic"}),
		BytesOut:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_storage_fetch_bytes_total", Help: "Record batch bytes sent by fetch responses, by topic and reader (consumer or follower)."}, []string{"topic", "reader"}),
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_storage_connections", Help: "Open protocol connections."}),
		QuotaThrottled: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_quota_throttled_total",
			Help: "Consumer fetches refused with THROTTLING_QUOTA_EXCEEDED: their client id was over its fetch quota."}),
		Rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_connections_rejected_total",
			Help: "Connections refused because their client address had -max-connections-per-ip open."}),
		ProduceLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_storage_produce_seconds", Help: "Produce request latency from read to response, by topic and acks.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"topic", "acks"}),
		Produced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_storage_produce_requests_total", Help: "Produce requests answered with success, by topic."}, []string{"topic"}),
		Fetched:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_storage_fetch_responses_total", Help: "Fetch responses carrying records, by topic and reader (consumer or follower)."}, []string{"topic", "reader"}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Errors, m.BytesIn, m.BytesOut, m.Connections, m.Rejected, m.QuotaThrottled, m.ProduceLatency, m.Produced, m.Fetched)
	}
	return m
}

// acksLabel names an acks value for the metrics.
func acksLabel(acks int8) string {
	switch acks {
	case protocol.AcksAll:
		return "all"
	case protocol.AcksLeader:
		return "leader"
	}
	return "none"
}

// readerLabel names who fetches: a follower replicating or a consumer.
func readerLabel(follower bool) string {
	if follower {
		return "follower"
	}
	return "consumer"
}

// Server serves the storage protocol for one node's replicas.
type Server struct {
	cfg     Config
	mgr     *replica.Manager
	log     *slog.Logger
	metrics *Metrics

	quotas *quota.Limiter // consumer fetch byte rates by client id
	remote *tier.Tier     // reads below the local log's start (nil: no tiered storage)

	ln     net.Listener
	ctx    context.Context // ends when the server stops; parents every request
	cancel context.CancelFunc

	conns *service.Conns[*conn] // open connections
	wg    sync.WaitGroup        // the accept loop and every connection goroutine
}

// UseTier serves consumers' reads below the local log's start from remote
// storage. Call it before Start.
func (s *Server) UseTier(t *tier.Tier) { s.remote = t }

// New listens on cfg.Addr. Start begins accepting.
func New(cfg Config, mgr *replica.Manager, metrics *Metrics, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("storage listener: %w", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	if cfg.Authz.On && (cfg.TLS == nil || cfg.TLS.ClientCAs == nil) {
		_ = ln.Close()
		return nil, errors.New("storage listener: authorization needs TLS with client certificates (-tls-ca)")
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, mgr: mgr, log: log, metrics: metrics, ln: ln, ctx: ctx, cancel: cancel, conns: service.NewConns[*conn](cfg.MaxConnsPerIP),
		quotas: quota.NewLimiter(nil)}, nil
}

// Quotas are the node's client quota buckets, which its Kafka listener
// shares: a client id has one fetch budget on a node.
func (s *Server) Quotas() *quota.Limiter { return s.quotas }

// Addr returns the listener's address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start accepts connections in a goroutine that Stop waits for.
func (s *Server) Start() {
	s.wg.Add(1)
	go s.acceptLoop()
	s.log.Info("storage protocol listener started", "addr", s.Addr())
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("accept failed", "err", err)
			}
			return
		}
		raw := nc
		if t, ok := nc.(*tls.Conn); ok {
			raw = t.NetConn()
		}
		tc, ok := raw.(*net.TCPConn)
		if !ok {
			_ = nc.Close()
			continue
		}
		_ = tc.SetNoDelay(true)
		ip := service.RemoteIP(tc)
		c := newConn(s, nc, tc)
		if !s.conns.Add(c, ip) {
			max := s.cfg.MaxConnsPerIP
			s.metrics.Rejected.Inc()
			s.log.Warn("connection refused: too many from its address", "remote", tc.RemoteAddr().String(), "max_connections_per_ip", max)
			s.wg.Go(func() { // the answer must not hold up the accept loop
				c.refuse(protocol.TooManyConnections, fmt.Sprintf("%s already has %d connections open to this node (-max-connections-per-ip)", ip, max))
			})
			continue
		}
		s.metrics.Connections.Inc()
		s.wg.Go(func() {
			c.serve()
			s.conns.Remove(c)
			s.metrics.Connections.Dec()
		})
	}
}

// Stop closes the listener and every connection and waits for their goroutines.
func (s *Server) Stop(ctx context.Context) error {
	s.cancel()
	_ = s.ln.Close()
	s.conns.Each(func(c *conn) { c.close() })
	return service.WaitContext(ctx, &s.wg)
}
