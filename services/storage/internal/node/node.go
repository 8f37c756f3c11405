// Package node wires a storage node together: its configuration from flags, the
// replica manager, the protocol server, membership in the cluster and the
// retention loop, as one fx application.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/server/objstore"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/storage/internal/kafkaapi"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/membership"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
	"github.com/sluicemq/sluice/services/storage/internal/server"
	"github.com/sluicemq/sluice/services/storage/internal/tier"
)

// Config is the storage node's configuration.
type Config struct {
	Common         service.Common
	NodeID         int
	DataDir        string
	AdvertisedAddr string
	Rack           string
	Metadata       string
	// Offsets lists the offsets service's addresses, where the Kafka
	// listener finds groups' configs ("": it keeps none).
	Offsets        string
	Heartbeat      time.Duration
	RetentionCheck time.Duration
	ReplicaMaxLag  time.Duration
	// MinFreeBytes is the free space appends leave on the data directory's
	// file system; past it they are refused (disk full) until space returns.
	MinFreeBytes int64
	// ScrubRate is the read rate (bytes per second) of the scrubber, which
	// validates the data found on disk at start; 0 turns it off.
	ScrubRate int64
	// Cleaner is the log cleaner of compacted topics.
	Cleaner replica.CleanerConfig
	// CleanerPause, for tests only, makes every cleaning pass stop at that
	// step (seglog.CleanStep*) and wait until the node stops, so a test can
	// kill the node in the middle of a pass.
	CleanerPause string
	Server       server.Config
	// Kafka is the node's Kafka listener, which serves fetches of the
	// partitions it leads to Kafka clients (-kafka-addr "" turns it off).
	Kafka kafkaapi.Config
	// Remote is the object store of tiered storage (-remote-endpoint ""
	// turns it off) and Tier the uploader's and read cache's settings.
	Remote objstore.Config
	Tier   tier.Config
}

// DefaultKafkaAddr is the default listen address of the Kafka listener.
const DefaultKafkaAddr = "127.0.0.1:9121"

// scrubInterval is how often the scrubber looks for logs not validated yet
// (replicas opened since its last pass).
const scrubInterval = 5 * time.Second

// Parse reads flags (and SLUICE_* variables), validates them and returns the fx
// options of a storage node.
func Parse(args []string) ([]fx.Option, error) {
	var c Config
	c.Server = server.DefaultConfig()
	c.Kafka.Listener = kafka.DefaultConfig(DefaultKafkaAddr)
	fs := service.NewFlagSet("sluice-storage")
	c.Common.Register(fs, "127.0.0.1:9111")
	fs.Int(&c.NodeID, "node-id", 1, "this storage node's id (a positive integer, unique in the cluster)")
	fs.String(&c.DataDir, "data-dir", "./data/storage-1", "directory holding the partition logs")
	fs.String(&c.Server.Addr, "addr", c.Server.Addr, "listen address of the storage protocol (also the internal address unless -internal-addr is set)")
	var internal string
	fs.String(&internal, "internal-addr", "", "address other services dial (default: -addr)")
	fs.String(&c.AdvertisedAddr, "advertised-addr", "", "address given to clients (default: the internal address)")
	fs.String(&c.Rack, "rack", "", "rack or zone of this node, for rack-aware placement")
	fs.String(&c.Metadata, "metadata", "http://127.0.0.1:7070", "comma-separated metadata service addresses")
	fs.String(&c.Offsets, "offsets", "", "comma-separated offsets service addresses, where the Kafka listener reads and sets groups' configs (Kafka admin clients send those to any broker); empty: it answers that it keeps none")
	fs.Duration(&c.Heartbeat, "heartbeat-interval", time.Second, "interval between heartbeats to metadata")
	fs.Duration(&c.RetentionCheck, "retention-check-interval", 30*time.Second, "interval between retention passes")
	fs.Duration(&c.ReplicaMaxLag, "replica-lag-time-max", 10*time.Second, "a follower that has not caught up for this long leaves the ISR (Kafka's replica.lag.time.max.ms)")
	fs.Int(&c.Server.MaxFrameBytes, "max-request-bytes", c.Server.MaxFrameBytes, "largest request frame accepted")
	fs.Int(&c.Server.MaxInFlight, "max-in-flight", c.Server.MaxInFlight, "requests in flight per connection before reading pauses")
	c.Server.Authz.Register(fs)
	fs.Int64(&c.MinFreeBytes, "min-free-bytes", 128<<20, "free space kept on the data directory's file system: appends that would use it are refused (KAFKA_STORAGE_ERROR, disk full) until space returns")
	fs.Int64(&c.ScrubRate, "scrub-bytes-per-sec", 16<<20, "read rate of the scrubber that validates the logs found on disk at start (corrupt data is cut and fetched again); 0 turns it off")
	fs.Duration(&c.Cleaner.Every, "cleaner-backoff", 15*time.Second, "interval between the log cleaner's rounds over compacted partitions (Kafka's log.cleaner.backoff.ms)")
	fs.Int64(&c.Cleaner.IOBytesPerSec, "cleaner-io-bytes-per-sec", 16<<20, "bytes per second the log cleaner may read and write together, so that compaction never takes more from producers; 0: no limit (Kafka's log.cleaner.io.max.bytes.per.second, unlimited there)")
	fs.Int64(&c.Cleaner.MapBytes, "cleaner-dedupe-buffer-bytes", 128<<20, "memory of the log cleaner's key map (Kafka's log.cleaner.dedupe.buffer.size)")
	fs.Int(&c.Cleaner.Nice, "cleaner-nice", 10, "nice value (0-19) of the log cleaner's thread: appends and fetches get the CPU first when it is short, and cleaning falls behind instead; 0 keeps the process's")
	fs.String(&c.CleanerPause, "test-cleaner-pause", "", "tests only: every cleaning pass stops at this step (written, swap-ready, swapped, checkpoint) until the node stops")
	fs.Int(&c.Server.MaxConnsPerIP, "max-connections-per-ip", c.Server.MaxConnsPerIP, "open connections allowed from one client address; 0: no limit")
	c.Kafka.Listener.Register(fs)
	c.Remote = objstore.DefaultConfig()
	c.Remote.Register(fs)
	fs.String(&c.Tier.CacheDir, "remote-cache-dir", "", "directory of the read cache of remote segments (default: remote-cache under -data-dir); emptied at start")
	fs.Int64(&c.Tier.CacheBytes, "remote-cache-bytes", 1<<30, "bytes of remote blocks the read cache keeps on local disk")
	fs.Duration(&c.Tier.Interval, "remote-upload-interval", time.Second, "how often the leader of a tiered partition looks for closed segments to upload")
	fs.Int(&c.Tier.Fetches, "remote-fetches", 8, "remote reads (blocks of 1 MiB) in flight at once")
	fs.Int64(&c.Tier.UploadBytesPerSec, "remote-upload-bytes-per-sec", 0, "bytes per second the uploads to the object store may read and send together, so that tiering takes no more than that from producers; 0: no limit (Kafka's remote.log.manager.copy.max.bytes.per.second)")
	fs.Duration(&c.Tier.SweepEvery, "remote-sweep-interval", time.Minute, "how often objects no remote log names (uploads whose commit was lost, deleted topics' segments) are looked for and deleted")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.Kafka.Listener.Finish()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if internal == "" {
		internal = c.Server.Addr
	}
	if c.AdvertisedAddr == "" {
		c.AdvertisedAddr = internal
	}
	srvTLS, cliTLS, err := c.Server.Authz.TLSConfigs(&c.Common)
	if err != nil {
		return nil, err
	}
	c.Server.TLS = srvTLS
	c.Kafka.Listener.TLS = service.PublicTLS(srvTLS)
	// The Kafka listener checks ACLs with -authorize, and whenever it
	// authenticates clients with SASL.
	c.Kafka.Authorize = c.Server.Authz.On || len(c.Kafka.Listener.SASLMechanisms) > 0
	c.Kafka.Services, c.Kafka.MaxFetchWait = c.Server.Authz.Services, c.Server.MaxFetchWait
	kafkaAddr := ""
	if c.Kafka.Listener.Addr != "" {
		kafkaAddr = c.Kafka.Listener.Advertised()
	}
	mcfg := membership.Config{NodeID: int32(c.NodeID), Addr: internal, AdvertisedAddr: c.AdvertisedAddr, KafkaAddr: kafkaAddr, Rack: c.Rack, Heartbeat: c.Heartbeat}
	return []fx.Option{
		fx.Supply(c, c.Common, mcfg, service.TLSClient{Config: cliTLS}, service.Identity{Service: "storage", NodeID: strconv.Itoa(c.NodeID)}),
		Module(),
	}, nil
}

func (c Config) validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if c.NodeID < 1 || c.NodeID > 1<<30 {
		return fmt.Errorf("flag -node-id: %d is not a positive id", c.NodeID)
	}
	if c.DataDir == "" {
		return fmt.Errorf("flag -data-dir: empty")
	}
	if err := service.ValidateAddr("addr", c.Server.Addr); err != nil {
		return err
	}
	if len(service.SplitList(c.Metadata)) == 0 {
		return fmt.Errorf("flag -metadata: no address")
	}
	if c.Heartbeat <= 0 {
		return fmt.Errorf("flag -heartbeat-interval: must be positive")
	}
	if c.RetentionCheck <= 0 {
		return fmt.Errorf("flag -retention-check-interval: must be positive")
	}
	if c.MinFreeBytes < 0 {
		return fmt.Errorf("flag -min-free-bytes: %d is negative", c.MinFreeBytes)
	}
	if c.ScrubRate < 0 {
		return fmt.Errorf("flag -scrub-bytes-per-sec: %d is negative (0 turns the scrubber off)", c.ScrubRate)
	}
	if c.Cleaner.Every <= 0 {
		return fmt.Errorf("flag -cleaner-backoff: must be positive")
	}
	if c.Cleaner.IOBytesPerSec < 0 {
		return fmt.Errorf("flag -cleaner-io-bytes-per-sec: %d is negative (0: no limit)", c.Cleaner.IOBytesPerSec)
	}
	if c.Cleaner.Nice < 0 || c.Cleaner.Nice > 19 {
		return fmt.Errorf("flag -cleaner-nice: %d is not between 0 and 19", c.Cleaner.Nice)
	}
	if c.Cleaner.MapBytes < 1<<20 {
		return fmt.Errorf("flag -cleaner-dedupe-buffer-bytes: %d is below 1 MiB", c.Cleaner.MapBytes)
	}
	switch c.CleanerPause {
	case "", seglog.CleanStepWritten, seglog.CleanStepSwapReady, seglog.CleanStepSwapped, seglog.CleanStepCheckpoint:
	default:
		return fmt.Errorf("flag -test-cleaner-pause: %q is not a step (written, swap-ready, swapped, checkpoint)", c.CleanerPause)
	}
	if c.ReplicaMaxLag < 100*time.Millisecond {
		return fmt.Errorf("flag -replica-lag-time-max: must be at least 100ms")
	}
	if err := c.Server.Validate(); err != nil {
		return fmt.Errorf("flags -max-request-bytes/-max-in-flight/-max-connections-per-ip: %w", err)
	}
	if err := c.Kafka.Listener.Validate(); err != nil {
		return fmt.Errorf("flags -kafka-*: %w", err)
	}
	return c.validateTier()
}

// validateTier checks the flags of tiered storage when it is on.
func (c Config) validateTier() error {
	if !c.Remote.Enabled() {
		return nil
	}
	if err := c.Remote.Validate(); err != nil {
		return fmt.Errorf("flags -remote-*: %w", err)
	}
	if c.Tier.UploadBytesPerSec < 0 {
		return fmt.Errorf("flag -remote-upload-bytes-per-sec: %d is negative (0: no limit)", c.Tier.UploadBytesPerSec)
	}
	if c.Tier.CacheBytes < 1<<20 || c.Tier.Interval <= 0 || c.Tier.Fetches < 1 || c.Tier.SweepEvery <= 0 {
		return fmt.Errorf("flags -remote-cache-bytes (at least 1 MiB), -remote-upload-interval and -remote-sweep-interval (positive), -remote-fetches (at least 1): %d, %s, %s, %d",
			c.Tier.CacheBytes, c.Tier.Interval, c.Tier.SweepEvery, c.Tier.Fetches)
	}
	return nil
}

// Module provides and starts the storage node's parts.
func Module() fx.Option {
	return fx.Module("storage",
		fx.Provide(
			newClients,
			newManager,
			func(reg prometheus.Registerer) *server.Metrics { return server.NewMetrics(reg) },
			newServer,
			newMember,
			newTier,
		),
		fx.Invoke(enableReplication, startRetention, startKafka),
	)
}

// startKafka starts the Kafka listener unless -kafka-addr is empty. It
// starts after the membership (it answers from the model the membership
// follows) and stops before it.
// kafkaParams is what the Kafka listener is built from.
type kafkaParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Replicas  *replica.Manager
	Member    *membership.Member
	Clients   clients
	Server    *server.Server
	Metrics   *server.Metrics
	TLS       service.TLSClient
	Registry  prometheus.Registerer
	Tier      *tier.Tier
	Log       *slog.Logger
}

// tierParams is what tiered storage is built from.
type tierParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Replicas  *replica.Manager
	Member    *membership.Member
	Clients   clients
	Server    *server.Server
	Registry  prometheus.Registerer
	Log       *slog.Logger
}

// newTier starts tiered storage when an object store is configured (nil
// otherwise): uploads of the tiered partitions this node leads, their
// remote retention, and remote reads, which the storage protocol's server
// serves from then on. It stops before the server and the membership.
func newTier(p tierParams) (*tier.Tier, error) {
	c, log := p.Config, p.Log
	if !c.Remote.Enabled() {
		log.Info("tiered storage off (-remote-endpoint is empty): topics with remote.storage.enable keep every segment on disk")
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Remote.Timeout)
	defer cancel()
	store, err := objstore.Open(ctx, c.Remote)
	switch {
	case errors.Is(err, objstore.ErrRefused):
		return nil, err // the configuration is wrong: say so at start
	case err != nil:
		// The store is down: the node serves all the same, uploads retry
		// and local retention keeps what they have not copied.
		log.Warn("object store unreachable at start; uploads retry until it answers", "error", err)
		if store, err = objstore.OpenUnchecked(c.Remote); err != nil {
			return nil, err
		}
	}
	cfg := c.Tier
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(c.DataDir, "remote-cache")
	}
	cfg.Timeout = c.Remote.Timeout
	t, err := tier.New(cfg, tier.Deps{Store: store, Meta: p.Clients.meta, Replicas: p.Replicas, NodeEpoch: p.Member.Epoch,
		Metrics: tier.NewMetrics(p.Registry), Log: log.With("component", "tier")})
	if err != nil {
		return nil, err
	}
	p.Server.UseTier(t)
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { t.Start(); return nil },
		OnStop:  func(context.Context) error { t.Stop(); return nil },
	})
	return t, nil
}

func startKafka(p kafkaParams) error {
	c, log := p.Config, p.Log
	if c.Kafka.Listener.Addr == "" {
		log.Info("kafka listener off (-kafka-addr is empty)")
		return nil
	}
	if offsets := service.SplitList(c.Offsets); len(offsets) > 0 {
		c.Kafka.Groups = kafka.ShareGroupConfigs{Client: shares.NewClientTLS(offsets, p.TLS.Config)}
	}
	svc, err := kafkaapi.New(c.Kafka, kafkaapi.Deps{Replicas: p.Replicas, Model: p.Member, Admin: p.Clients.meta, Quotas: p.Server.Quotas(),
		Metrics: p.Metrics, KafkaMetrics: kafka.NewMetrics(p.Registry), Remote: p.Tier, Log: log.With("component", "kafka")})
	if err != nil {
		return err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { svc.Start(); return nil },
		OnStop:  svc.Stop,
	})
	return nil
}

func newManager(lc fx.Lifecycle, c Config, reg prometheus.Registerer, log *slog.Logger) (*replica.Manager, error) {
	m, err := replica.NewManager(filepath.Clean(c.DataDir), int32(c.NodeID), log)
	if err != nil {
		return nil, err
	}
	m.KeepFree(c.MinFreeBytes)
	flushes := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_storage_flush_seconds",
		Help:    "Duration of the logs' flush passes: one group commit's fsyncs (segment, indexes when rolled, directory when changed).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15)}) // 0.1 ms to 1.6 s
	m.ObserveFlushes(func(d time.Duration) { flushes.Observe(d.Seconds()) })
	space := m.Space()
	reg.MustRegister(flushes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_storage_disk_free_bytes",
			Help: "Free bytes on the file system of the data directory, as last seen by the free-space guard."},
			func() float64 { return float64(space.Free()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_storage_disk_full_refusals_total",
			Help: "Appends refused because they would leave less than -min-free-bytes free (KAFKA_STORAGE_ERROR: disk full)."},
			func() float64 { return float64(space.Refused()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_storage_fsyncs_total",
			Help: "fsync calls made by the node's logs (segments, indexes): with sluice_storage_produce_bytes_total, the fsync cadence."},
			func() float64 { return float64(m.Fsyncs()) }), replica.NewCollector(m),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_storage_corrupt_logs_total",
			Help: "Damaged logs found on this node: corrupt data found by a read or the scrubber, or a log recovery cut short of an older segment; each is fetched again from the leader."},
			func() float64 { return float64(m.CorruptFound()) }))
	lc.Append(fx.StopHook(m.Close))
	return m, nil
}

func newServer(lc fx.Lifecycle, c Config, m *replica.Manager, metrics *server.Metrics, log *slog.Logger) (*server.Server, error) {
	s, err := server.New(c.Server, m, metrics, log)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  s.Stop,
	})
	return s, nil
}

// clients are the node's connections to metadata and to other storage nodes.
type clients struct {
	meta *cluster.Client
	pool *storageclient.Pool
}

func newClients(lc fx.Lifecycle, c Config, t service.TLSClient) clients {
	cl := clients{meta: cluster.NewClientTLS(service.SplitList(c.Metadata), t.Config), pool: storageclient.NewPoolTLS("storage-"+strconv.Itoa(c.NodeID), t.Config)}
	lc.Append(fx.StopHook(cl.pool.Close))
	return cl
}

// enableReplication lets the manager run follower fetchers and ask metadata
// for ISR changes in this node's name; the ISR loop runs with the node.
func enableReplication(lc fx.Lifecycle, c Config, m *replica.Manager, mem *membership.Member, cl clients) {
	m.EnableReplication(replica.Replication{
		Pool:   cl.pool,
		MaxLag: c.ReplicaMaxLag,
		Alter: func(ctx context.Context, req cluster.AlterPartitionRequest) (*cluster.Partition, error) {
			req.NodeEpoch = mem.Epoch()
			return cl.meta.AlterPartition(ctx, req)
		},
		Resign: func(ctx context.Context, req cluster.ResignRequest) (*cluster.Partition, error) {
			req.NodeEpoch = mem.Epoch()
			return cl.meta.ResignLeadership(ctx, req)
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Add(1)
			go func() { defer wg.Done(); m.ISRLoop(ctx) }()
			wg.Add(1)
			go func() { defer wg.Done(); m.ScrubLoop(ctx, c.ScrubRate, scrubInterval) }()
			return nil
		},
		OnStop: func(context.Context) error { cancel(); wg.Wait(); return nil },
	})
}

// memberParams is what the node's membership is built from; Server is
// there for the order of the hooks (the server starts first).
type memberParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    membership.Config
	Clients   clients
	Replicas  *replica.Manager
	Readiness *service.Readiness
	Log       *slog.Logger
	Server    *server.Server
}

func newMember(p memberParams) *membership.Member {
	mc, cl, log := p.Config, p.Clients, p.Log
	mem := membership.New(mc, cl.meta, p.Replicas, log)
	p.Readiness.Add("membership", mem.Ready)
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { mem.Start(); return nil },
		OnStop: func(ctx context.Context) error {
			controlledShutdown(ctx, mc, cl.meta, mem, log)
			mem.Stop()
			return nil
		},
	})
	return mem
}

// startRetention runs retention and the log cleaner, each in its own
// goroutine, until the node stops.
func startRetention(lc fx.Lifecycle, c Config, m *replica.Manager, log *slog.Logger, _ *membership.Member) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cc := c.Cleaner
	if pause := c.CleanerPause; pause != "" {
		cc.Hook = func(step string) error {
			if step != pause {
				return nil
			}
			log.Warn("cleaner paused for a test", "step", step)
			<-ctx.Done()
			return ctx.Err()
		}
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Add(2)
			go func() { defer wg.Done(); m.RetentionLoop(ctx, c.RetentionCheck) }()
			go func() { defer wg.Done(); m.CleanerLoop(ctx, cc) }()
			return nil
		},
		OnStop: func(context.Context) error { cancel(); wg.Wait(); return nil },
	})
}

// controlledShutdown asks metadata to move leadership off this node before it
// stops serving, so clients fail over without waiting for the session to
// expire. Partitions with no other in-sync replica stay led by this node (they
// go offline with it). Transport errors are retried briefly.
func controlledShutdown(ctx context.Context, mc membership.Config, meta *cluster.Client, mem *membership.Member, log *slog.Logger) {
	if mem.Epoch() == 0 {
		return // never registered
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		remaining, err := meta.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: mc.NodeID, Epoch: mem.Epoch()})
		if err == nil {
			log.Info("controlled shutdown: leadership moved away", "still_leading", remaining)
			return
		}
		if attempt >= 4 || ctx.Err() != nil {
			log.Warn("controlled shutdown failed; partitions fail over when the session expires", "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
