package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/server/service"
)

// Config configures a Kafka listener.
type Config struct {
	// Addr is the listen address; "" turns the listener off.
	Addr string
	// AdvertisedAddr is the address Kafka clients are told to dial
	// (Kafka's advertised.listeners); Addr when empty.
	AdvertisedAddr string
	// MaxRequestBytes bounds one request (Kafka's socket.request.max.bytes):
	// a larger size prefix closes the connection before anything is
	// allocated.
	MaxRequestBytes int
	// MaxQueuedBytes bounds the bytes of the requests being read or served
	// on the listener (Kafka's queued.max.request.bytes): a request waits
	// for room before its body is read.
	MaxQueuedBytes int64
	// IdleTimeout closes a connection that sent nothing for this long
	// (Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// ReadTimeout bounds reading the rest of a request once its size has
	// arrived; WriteTimeout bounds writing one response.
	ReadTimeout, WriteTimeout time.Duration
	// MaxConnsPerIP bounds the connections from one client address (Kafka's
	// max.connections.per.ip); 0 means no limit.
	MaxConnsPerIP int
	// SASLMechanisms are the SASL mechanisms offered (PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512); when any is set every connection must authenticate
	// with one before its other requests are served.
	SASLMechanisms []string
	// TLS, when set, makes the listener speak TLS. Without SASL, a client
	// certificate's common name is the connection's principal.
	TLS *tls.Config
	// FetchSessions bounds the listener's fetch sessions (KIP-227).
	FetchSessions FetchSessionsConfig

	sasl string // the -kafka-sasl-mechanisms flag until Finish
}

// DefaultConfig returns Kafka's defaults for a listener on addr.
func DefaultConfig(addr string) Config {
	return Config{Addr: addr, MaxRequestBytes: 100 << 20, MaxQueuedBytes: 512 << 20, IdleTimeout: 10 * time.Minute,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, FetchSessions: DefaultFetchSessionsConfig()}
}

// Mechanisms Sluice offers.
const (
	MechanismPlain = "PLAIN"
)

// Validate checks ranges and names.
func (c Config) Validate() error {
	if c.Addr == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return fmt.Errorf("kafka listen address %q is not host:port", c.Addr)
	}
	if c.AdvertisedAddr != "" {
		if _, err := splitHostPort(c.AdvertisedAddr); err != nil {
			return fmt.Errorf("kafka advertised address: %w", err)
		}
	}
	if host, _, _ := net.SplitHostPort(c.Advertised()); host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return fmt.Errorf("kafka advertised address %q is no address a client can dial: set -kafka-advertised-addr", c.Advertised())
	}
	switch {
	case c.MaxRequestBytes < 1<<10 || c.MaxRequestBytes > 1<<30:
		return fmt.Errorf("kafka max request bytes %d is outside 1 KiB..1 GiB", c.MaxRequestBytes)
	case c.MaxQueuedBytes < int64(c.MaxRequestBytes):
		return fmt.Errorf("kafka max queued bytes %d is below the max request bytes %d (one largest request must fit)", c.MaxQueuedBytes, c.MaxRequestBytes)
	case c.IdleTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0:
		return errors.New("kafka idle, read and write timeouts must be positive")
	case c.MaxConnsPerIP < 0:
		return fmt.Errorf("kafka max connections per ip %d is negative (0: no limit)", c.MaxConnsPerIP)
	case c.FetchSessions.Slots < 0 || c.FetchSessions.Slots > 1_000_000:
		return fmt.Errorf("kafka fetch session slots %d is outside 0..1000000 (0: no sessions)", c.FetchSessions.Slots)
	case c.FetchSessions.EvictAfter < 0:
		return fmt.Errorf("kafka fetch session evict-after %v is negative", c.FetchSessions.EvictAfter)
	}
	for _, m := range c.SASLMechanisms {
		if _, scram := cluster.ScramHash(m); m != MechanismPlain && !scram {
			return fmt.Errorf("SASL mechanism %q is not %s, %s or %s", m, MechanismPlain, cluster.ScramSHA256, cluster.ScramSHA512)
		}
	}
	return nil
}

// Advertised returns the address clients are told to dial.
func (c Config) Advertised() string {
	if c.AdvertisedAddr != "" {
		return c.AdvertisedAddr
	}
	return c.Addr
}

// splitHostPort splits an address into its host and numeric port.
func splitHostPort(addr string) (hostPort, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return hostPort{}, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return hostPort{}, fmt.Errorf("%q has no valid port", addr)
	}
	return hostPort{host: h, port: int32(n)}, nil
}

type hostPort struct {
	host string
	port int32
}

// Handler answers one decoded request on connection c. ctx ends when the
// connection closes or the server stops.
type Handler func(ctx context.Context, c *Conn, req kmsg.Request) Reply

// Route serves one API key at versions Min..Max.
type Route struct {
	Min, Max int16
	Handle   Handler
}

// DataPath is what a data-path listener (a frontend's, a storage node's)
// serves itself: the records of partitions and their offsets.
type DataPath struct {
	Produce, Fetch, ListOffsets, OffsetForLeaderEpoch Handler
}

// AddTo sets the data path's routes in routes, at the versions every
// data-path listener serves: Produce from v0 (v0-2's message sets are
// converted to a record batch), Fetch from v4
// (the first that carries the last stable offset), ListOffsets from v1
// (one offset per partition), OffsetForLeaderEpoch from v2 (the leader
// epoch it is asked at).
func (d DataPath) AddTo(routes map[int16]Route) {
	routes[kmsg.Produce.Int16()] = Route{Min: 0, Max: 12, Handle: d.Produce}
	routes[kmsg.Fetch.Int16()] = Route{Min: 4, Max: 16, Handle: d.Fetch}
	routes[kmsg.ListOffsets.Int16()] = Route{Min: 1, Max: 8, Handle: d.ListOffsets}
	routes[kmsg.OffsetForLeaderEpoch.Int16()] = Route{Min: 2, Max: 4, Handle: d.OffsetForLeaderEpoch}
}

// Reply is a handler's answer.
type Reply struct {
	// Msg is the response, encoded with kmsg at the request's version.
	Msg kmsg.Response
	// Body, when Msg is nil, is a response the handler writes itself.
	Body Body
	// None: no response at all (Produce with acks 0).
	None bool
	// Throttle mutes the connection for this long after the answer: no
	// request is read meanwhile (KIP-219; the response carries the time).
	Throttle time.Duration
	// Close closes the connection after the answer (a failed SASL
	// authentication).
	Close bool
	// Async, when set, computes the answer on a goroutine of the
	// connection while its next requests are read and handled: answers are
	// still written in request order (at most maxQueued pending). The
	// request's bytes stay valid until Async returns. A produce request
	// uses it so that a client's pipelined requests overlap.
	Async func() Reply
}

// Body is a response body written by its handler, for answers whose bytes
// are not in memory (a fetch's segment ranges).
type Body interface {
	// Len is the body's length in bytes: what follows the response header.
	Len() int
	// WriteBody writes exactly Len bytes to w.
	WriteBody(w *Writer) error
	// Release frees what the body holds; it is called once, written or not.
	Release()
}

// Metrics are a listener's Prometheus series.
type Metrics struct {
	Requests     *prometheus.CounterVec // by API
	RequestBytes *prometheus.CounterVec // the requests' sizes, by API
	Refused      *prometheus.CounterVec // requests that closed their connection, by reason
	Connections  prometheus.Gauge
	AuthFailed   prometheus.Counter
	// FetchSessions are the sessions held; FetchSessionEvictions those
	// evicted to make room.
	FetchSessions         prometheus.Gauge
	FetchSessionEvictions prometheus.Counter
}

// NewMetrics registers a listener's series on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_kafka_requests_total",
			Help: "Kafka protocol requests served, by API."}, []string{"api"}),
		RequestBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_kafka_request_bytes_total",
			Help: "Bytes of the Kafka protocol requests served (after the size prefix), by API."}, []string{"api"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_kafka_refused_requests_total",
			Help: "Kafka protocol requests that closed their connection, by reason (too_large, malformed, unknown_api, unsupported_version, unauthenticated, too_many_connections)."},
			[]string{"reason"}),
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_kafka_connections", Help: "Open Kafka protocol connections."}),
		AuthFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_kafka_authentication_failures_total",
			Help: "SASL authentications that failed (unknown principal, wrong password)."}),
		FetchSessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_kafka_fetch_sessions", Help: "Fetch sessions (KIP-227) the listener holds."}),
		FetchSessionEvictions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_kafka_fetch_session_evictions_total",
			Help: "Fetch sessions evicted to make room for new ones."}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.RequestBytes, m.Refused, m.Connections, m.AuthFailed, m.FetchSessions, m.FetchSessionEvictions)
	}
	return m
}

// Server is a Kafka listener.
type Server struct {
	cfg     Config
	routes  map[int16]Route
	access  func() *cluster.Snapshot // the principals connections authenticate as
	log     *slog.Logger
	metrics *Metrics
	mem     *memPool
	logs    logLimiter

	ln     net.Listener
	ctx    context.Context // ends at Stop; parents every connection
	cancel context.CancelFunc

	conns *service.Conns[*Conn] // open connections
	wg    sync.WaitGroup        // the accept loop and every connection
	nconn atomic.Int64          // connection ids
	apis  []kmsg.ApiVersionsResponseApiKey
}

// NewServer listens on cfg.Addr; Start begins accepting. routes are the
// APIs served besides ApiVersions and the SASL requests, which the server
// answers itself. access returns the cluster model whose principals SASL
// checks (nil before the first one).
func NewServer(cfg Config, routes map[int16]Route, access func() *cluster.Snapshot, metrics *Metrics, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		return nil, errors.New("kafka listener: no address")
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	s := &Server{cfg: cfg, routes: map[int16]Route{}, access: access, log: log, metrics: metrics,
		mem: newMemPool(cfg.MaxQueuedBytes), conns: service.NewConns[*Conn](cfg.MaxConnsPerIP)}
	for k, r := range routes {
		s.routes[k] = r
	}
	s.routes[apiVersionsKey] = Route{Min: 0, Max: 4, Handle: s.apiVersions}
	if len(cfg.SASLMechanisms) > 0 {
		// v0 is advertised because librdkafka takes a broker without it
		// for one that has no SASL handshake at all; after it the tokens
		// come unframed by Kafka headers (conn.go).
		s.routes[saslHandshakeKey] = Route{Min: 0, Max: 1, Handle: s.saslHandshake}
		s.routes[saslAuthenticateKey] = Route{Min: 0, Max: 2, Handle: s.saslAuthenticate}
	}
	for _, k := range slices.Sorted(maps.Keys(s.routes)) {
		s.apis = append(s.apis, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: s.routes[k].Min, MaxVersion: s.routes[k].Max})
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("kafka listener: %w", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Addr returns the listener's address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start accepts connections in a goroutine Stop waits for.
func (s *Server) Start() {
	s.wg.Add(1)
	go s.acceptLoop()
	s.log.Info("kafka listener started", "addr", s.Addr(), "advertised", s.cfg.Advertised(), "tls", s.cfg.TLS != nil, "sasl", s.cfg.SASLMechanisms)
}

// Stop closes the listener and every connection, and waits for them.
func (s *Server) Stop(ctx context.Context) error {
	s.cancel()
	_ = s.ln.Close()
	s.conns.Each(func(c *Conn) { c.close() })
	return service.WaitContext(ctx, &s.wg)
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("kafka accept failed", "err", err)
			}
			return
		}
		c := newConn(s, nc, s.nconn.Add(1))
		if !s.conns.Add(c, service.RemoteIP(nc)) {
			c.cancel()
			s.refused("too_many_connections")
			s.logBad("kafka connection refused: too many from its address", "remote", nc.RemoteAddr().String(), "max_connections_per_ip", s.cfg.MaxConnsPerIP)
			_ = nc.Close()
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

func (s *Server) refused(reason string) { s.metrics.Refused.WithLabelValues(reason).Inc() }

// logBad logs a refused request or connection, at most logBurst lines a
// second: a client sending garbage in a loop must not flood the log.
func (s *Server) logBad(msg string, args ...any) {
	if n, ok := s.logs.allow(time.Now()); ok {
		if n > 0 {
			args = append(args, "suppressed_before", n)
		}
		s.log.Warn(msg, args...)
	}
}

// apiVersions answers ApiVersions with every route's versions.
func (s *Server) apiVersions(_ context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.ApiVersionsRequest)
	if r.Version >= 3 {
		c.software, c.softwareVersion = r.ClientSoftwareName, r.ClientSoftwareVersion
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = s.apis
	if r.Version >= 3 {
		resp.SupportedFeatures, resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch = features()
	}
	return Reply{Msg: resp}
}

// TransactionVersion is the transaction protocol version the cluster runs
// (Kafka's transaction.version feature): 2, KIP-890 part 2. Clients that
// see it finalized end every transaction with a new epoch (EndTxn v5) and
// let produce (v12) and TxnOffsetCommit (v5) add partitions and groups.
const TransactionVersion = 2

// features are the cluster's feature flags in an ApiVersions answer: the
// transaction version, supported and finalized. Nothing changes them, so
// their epoch stays 1.
func features() ([]kmsg.ApiVersionsResponseSupportedFeature, []kmsg.ApiVersionsResponseFinalizedFeature, int64) {
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = "transaction.version", 0, TransactionVersion
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", TransactionVersion, TransactionVersion
	return []kmsg.ApiVersionsResponseSupportedFeature{sf}, []kmsg.ApiVersionsResponseFinalizedFeature{ff}, 1
}

// logLimiter lets logBurst lines through each second and counts the rest.
type logLimiter struct {
	mu         sync.Mutex
	second     int64
	n          int
	suppressed int
}

const logBurst = 10

func (l *logLimiter) allow(now time.Time) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec := now.Unix(); sec != l.second {
		l.second, l.n = sec, 0
	}
	if l.n >= logBurst {
		l.suppressed++
		return 0, false
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return suppressed, true
}

// memPool is a budget of bytes: Acquire waits until n fit.
type memPool struct {
	mu    sync.Mutex
	free  int64
	wake  chan struct{} // closed and replaced when bytes are released
	total int64
}

func newMemPool(total int64) *memPool {
	return &memPool{free: total, total: total, wake: make(chan struct{})}
}

// Acquire takes n bytes (at most the pool's size), waiting for them until
// ctx ends.
func (p *memPool) Acquire(ctx context.Context, n int64) error {
	n = min(n, p.total)
	for {
		p.mu.Lock()
		if p.free >= n {
			p.free -= n
			p.mu.Unlock()
			return nil
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release returns n bytes taken by Acquire.
func (p *memPool) Release(n int64) {
	n = min(n, p.total)
	p.mu.Lock()
	p.free += n
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}
