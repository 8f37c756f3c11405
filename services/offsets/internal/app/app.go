// Package app wires the offsets service: configuration from flags, the
// replicated state (a Raft group whose FSM keeps groups and committed offsets
// in bbolt), the metadata watch, the group coordinator and the HTTP API, as
// one fx application.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/offsets/internal/api"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/sharecoord"
	"github.com/sluicemq/sluice/services/offsets/internal/topics"
	"github.com/sluicemq/sluice/services/offsets/internal/txncoord"
)

// Name is the binary's and the service's name.
const Name = "sluice-offsets"

// Config is the offsets service's configuration.
type Config struct {
	Common   service.Common
	Raft     raftgroup.Config
	API      api.Config
	Groups   coordinator.Settings
	Txns     txncoord.Settings
	Metadata []string
}

// DefaultConfig returns the flag defaults (replica 1 of the local cluster).
func DefaultConfig() Config {
	r := raftgroup.DefaultConfig()
	r.Service = "offsets"
	r.RaftAddr = "127.0.0.1:7081"
	r.DataDir = "./data/offsets"
	return Config{
		Common:   service.Common{AdminAddr: "127.0.0.1:7082", LogLevel: "info", LogFormat: "json"},
		Raft:     r,
		API:      api.Config{Addr: "127.0.0.1:7080", RequestTimeout: 10 * time.Second, MaxBodyBytes: 4 << 20, LongPoll: coordinator.DefaultSettings().MaxRebalanceTimeout},
		Groups:   coordinator.DefaultSettings(),
		Txns:     txncoord.DefaultSettings(),
		Metadata: []string{"http://127.0.0.1:7070", "http://127.0.0.1:7073", "http://127.0.0.1:7076"},
	}
}

// Validate checks every component.
func (c Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if err := service.ValidateAddr("http-addr", c.API.Addr); err != nil {
		return err
	}
	if c.API.RequestTimeout <= 0 {
		return fmt.Errorf("flag -request-timeout: %v must be positive", c.API.RequestTimeout)
	}
	if len(c.Metadata) == 0 {
		return fmt.Errorf("flag -metadata: at least one metadata address is needed")
	}
	if err := c.Raft.Validate(); err != nil {
		return err
	}
	if err := c.Txns.Validate(); err != nil {
		return err
	}
	return c.Groups.Validate()
}

// ParseConfig reads flags and SLUICE_* variables into a validated Config.
func ParseConfig(args []string) (Config, error) {
	c := DefaultConfig()
	fs := service.NewFlagSet(Name)
	var peers, meta string
	c.Common.Register(fs, c.Common.AdminAddr)
	fs.String(&c.Raft.ID, "id", c.Raft.ID, "this replica's raft server id")
	fs.String(&c.API.Addr, "http-addr", c.API.Addr, "listen address of the offsets API")
	fs.String(&c.Raft.RaftAddr, "raft-addr", c.Raft.RaftAddr, "listen address of the raft transport")
	fs.String(&c.Raft.DataDir, "data-dir", c.Raft.DataDir, "directory of the state file (groups and offsets), the raft log and snapshots")
	fs.Bool(&c.Raft.Bootstrap, "bootstrap", false, "bootstrap the raft group when there is no existing state")
	fs.String(&peers, "peers", "", "replicas as id=raftaddr=httpaddr,... (this one included); empty: a single replica")
	fs.String(&meta, "metadata", strings.Join(c.Metadata, ","), "metadata service addresses, comma-separated")
	fs.Duration(&c.Groups.SessionTimeout, "session-timeout", c.Groups.SessionTimeout, "default member session timeout")
	fs.Duration(&c.Groups.RebalanceTimeout, "rebalance-timeout", c.Groups.RebalanceTimeout, "default time a member may take to release revoked partitions")
	fs.Duration(&c.Groups.HeartbeatInterval, "heartbeat-interval", c.Groups.HeartbeatInterval, "interval members are told to heartbeat at")
	fs.Duration(&c.Groups.OffsetsRetention, "offsets-retention", c.Groups.OffsetsRetention, "how long a group without members keeps its offsets after its last activity (Kafka's offsets.retention.minutes); 0 keeps them forever")
	fs.Duration(&c.Groups.InitialRebalanceDelay, "initial-rebalance-delay", c.Groups.InitialRebalanceDelay, "how long an empty classic group's first rebalance waits for more members (Kafka's group.initial.rebalance.delay.ms)")
	fs.Int(&c.Groups.MaxGroupSize, "max-group-size", c.Groups.MaxGroupSize, "most members of a classic group (Kafka's group.max.size)")
	fs.Duration(&c.Txns.MaxTimeout, "transaction-max-timeout", c.Txns.MaxTimeout, "longest transaction timeout a producer may ask for (Kafka's transaction.max.timeout.ms)")
	fs.Duration(&c.API.RequestTimeout, "request-timeout", c.API.RequestTimeout, "bound on one request's work, relaying to the leader included")
	fs.String(&c.Raft.LogLevel, "raft-log-level", c.Raft.LogLevel, "lowest level of raft's own log lines passed on: trace, debug, info, warn or error")
	snapshotEntries := int64(c.Raft.SnapshotThreshold)
	fs.Int64(&snapshotEntries, "raft-snapshot-entries", snapshotEntries, "log entries after which the replica takes a snapshot and compacts its raft log")
	fs.Duration(&c.Raft.SnapshotInterval, "raft-snapshot-interval", c.Raft.SnapshotInterval, "how often the replica checks whether to take a snapshot")
	c.API.Authz.Register(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if snapshotEntries < 1 {
		return c, fmt.Errorf("-raft-snapshot-entries %d: must be at least 1", snapshotEntries)
	}
	c.Raft.SnapshotThreshold = uint64(snapshotEntries)
	p, err := raftgroup.ParsePeers(peers)
	if err != nil {
		return c, err
	}
	c.Raft.Peers = p
	c.Raft.HTTPAddr = c.API.Addr
	c.API.LongPoll = c.Groups.MaxRebalanceTimeout
	c.Metadata = nil
	for _, a := range strings.Split(meta, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Metadata = append(c.Metadata, a)
		}
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	server, client, err := c.API.Authz.TLSConfigs(&c.Common)
	if err != nil {
		return c, err
	}
	c.Raft.ServerTLS, c.Raft.ClientTLS, c.API.TLS = server, client, server
	return c, nil
}

// Parse is service.Main's parse function: flags to fx options.
func Parse(args []string) ([]fx.Option, error) {
	c, err := ParseConfig(args)
	if err != nil {
		return nil, err
	}
	return Options(c), nil
}

// Options returns the service's fx options, without service.Module.
func Options(c Config) []fx.Option {
	return []fx.Option{
		fx.Supply(c, c.Common, service.Identity{Service: Name, NodeID: c.Raft.ID}),
		Module(),
		fx.Invoke(func(*api.Server) {}),
	}
}

// Module provides the state, the raft node, the watch, the coordinator and the API.
func Module() fx.Option {
	return fx.Module("offsets",
		fx.Provide(func(c Config) service.TLSClient { return service.TLSClient{Config: c.Raft.ClientTLS} }, newFSM, newNode, newWatcher, newCoordinator,
			newLogOffsets, newTxns, newShares, newServer),
	)
}

func newFSM(lc fx.Lifecycle, c Config, log *slog.Logger) (*fsm.FSM, error) {
	if err := os.MkdirAll(c.Raft.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("flag -data-dir: %w", err)
	}
	f, err := fsm.Open(filepath.Join(c.Raft.DataDir, "state.db"), log.With("component", "fsm"))
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(f.Close))
	return f, nil
}

type nodeParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	FSM       *fsm.FSM
	Log       *slog.Logger
	Metrics   prometheus.Registerer
	Ready     *service.Readiness
}

func newNode(p nodeParams) (*raftgroup.Node, error) {
	rc := p.Config.Raft
	restore, err := needsRestore(rc, p.FSM.AppliedIndex())
	if err != nil {
		return nil, err
	}
	rc.NoSnapshotRestoreOnStart = !restore
	n, err := raftgroup.New(rc, p.FSM, p.Log.With("component", "raft"), raftgroup.WithHealth(p.FSM.Ready))
	if err != nil {
		return nil, err
	}
	if err := n.RegisterMetrics(p.Metrics); err != nil {
		_ = n.Stop()
		return nil, err
	}
	p.Ready.Add("raft", n.Ready)
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { return n.Start() },
		OnStop:  func(context.Context) error { return n.Stop() },
	})
	return n, nil
}

func newWatcher(lc fx.Lifecycle, c Config, log *slog.Logger) *topics.Watcher {
	w := topics.New(cluster.NewClientTLS(c.Metadata, c.Raft.ClientTLS), log.With("component", "topics"))
	lc.Append(fx.StartStopHook(w.Start, w.Stop))
	return w
}

func newCoordinator(lc fx.Lifecycle, c Config, f *fsm.FSM, n *raftgroup.Node, w *topics.Watcher, log *slog.Logger) *coordinator.Coordinator {
	co := coordinator.New(f, n, w, c.Groups, log.With("component", "coordinator"))
	n.OnLeadership(co.OnLeadership)
	lc.Append(fx.StartStopHook(co.Start, co.Stop))
	return co
}

// needsRestore reports whether raft must restore its latest snapshot into the
// state file at start: only when the file is behind the snapshot (a crash
// while a snapshot from the leader was being installed). Otherwise the file
// is the state and raft replays just the entries after it.
func needsRestore(rc raftgroup.Config, applied uint64) (bool, error) {
	store, err := raft.NewFileSnapshotStore(rc.DataDir, rc.SnapshotRetain, io.Discard)
	if err != nil {
		return false, fmt.Errorf("raft snapshots in %s: %w", rc.DataDir, err)
	}
	snaps, err := store.List()
	if err != nil {
		return false, fmt.Errorf("raft snapshots in %s: %w", rc.DataDir, err)
	}
	return len(snaps) > 0 && snaps[0].Index > applied, nil
}

// logOffsets reaches the partition leaders and the metadata service: log
// offsets for lag and resets, transaction markers, producer ids.
type logOffsets struct {
	admin *cluster.Client
	meta  *client.Metadata
	pool  *storageclient.Pool
	w     *topics.Watcher
	// markers sends the markers of the transactions that end together in
	// one request per storage node.
	markers *client.TxnMarkerWriter
}

func newLogOffsets(lc fx.Lifecycle, c Config, w *topics.Watcher, t service.TLSClient) *logOffsets {
	admin := cluster.NewClientTLS(c.Metadata, t.Config)
	lo := &logOffsets{admin: admin, meta: client.NewInternalMetadata(admin), pool: storageclient.NewPoolTLS("sluice-offsets", t.Config), w: w}
	lo.markers = client.NewTxnMarkerWriter(lo.meta, lo.pool, 10*time.Second)
	lc.Append(fx.StopHook(func() {
		lo.markers.Close()
		lo.pool.Close()
	}))
	return lo
}

// WriteMarkers implements txncoord.MarkerWriter: the markers of the
// transactions that end together go in one request per storage node
// (client.TxnMarkerWriter). A partition that is gone, or that holds a
// newer epoch of the producer, needs no marker.
func (l *logOffsets) WriteMarkers(ctx context.Context, ms []txncoord.Marker) []error {
	req := make([]protocol.TxnMarker, len(ms))
	for i, m := range ms {
		req[i] = protocol.TxnMarker{Topic: m.TP.Topic, Partition: m.TP.Partition, ProducerID: m.ProducerID, ProducerEpoch: m.Epoch, Commit: m.Commit}
	}
	errs := l.markers.Write(ctx, req)
	for i, err := range errs {
		switch protocol.CodeOf(err) {
		case protocol.UnknownTopicOrPartition, protocol.InvalidProducerEpoch:
			errs[i] = nil
		}
	}
	return errs
}

// NewProducerID implements txncoord.ProducerIDs with the metadata
// service's allocator.
func (l *logOffsets) NewProducerID(ctx context.Context) (int64, error) {
	id, err := l.admin.InitProducerID(ctx)
	return id.ProducerID, err
}

func newTxns(lc fx.Lifecycle, c Config, co *coordinator.Coordinator, lo *logOffsets) *txncoord.Coordinator {
	x := txncoord.New(co, lo, lo, c.Txns)
	lc.Append(fx.StartStopHook(x.Start, x.Stop))
	return x
}

func (l *logOffsets) ListOffset(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	return client.ListOffset(ctx, l.meta, l.pool, topic, partition, ts)
}

func (l *logOffsets) LastStable(ctx context.Context, topic string, partition int32) (int64, error) {
	return client.ListOffsetAt(ctx, l.meta, l.pool, topic, partition, protocol.TimestampLatest, protocol.ReadCommitted)
}

func (l *logOffsets) Access() *cluster.Snapshot {
	if snap := l.w.Snapshot(); snap != nil {
		return snap
	}
	return &cluster.Snapshot{}
}

func (l *logOffsets) Topic(name string) (int32, bool) {
	counts, ok := l.w.Partitions()
	if !ok {
		return 0, false
	}
	n, ok := counts[name]
	return n, ok
}

func newShares(lc fx.Lifecycle, co *coordinator.Coordinator, lo *logOffsets) *sharecoord.Coordinator {
	sh := sharecoord.New(co, lo, lo)
	lc.Append(fx.StartStopHook(sh.Start, sh.Stop))
	return sh
}

// ReadRecords implements sharecoord.DeadLetterIO: it reads the partition
// from the first offset wanted to the last, keeping the records wanted.
func (l *logOffsets) ReadRecords(ctx context.Context, topic string, partition int32, offsets []int64) (map[int64]record.Record, error) {
	out := map[int64]record.Record{}
	if len(offsets) == 0 {
		return out, nil
	}
	want := make(map[int64]bool, len(offsets))
	last := offsets[0]
	for _, o := range offsets {
		want[o] = true
		last = max(last, o)
	}
	start := slices.Min(offsets)
	if first, err := l.ListOffset(ctx, topic, partition, protocol.TimestampEarliest); err == nil && first > start {
		start = first // the records before were deleted by retention
	}
	r := client.NewPartitionReader(l.meta, l.pool, topic, partition, start, client.ReaderConfig{MaxWait: 10 * time.Millisecond})
	for r.Offset() <= last {
		at := r.Offset()
		recs, err := r.Fetch(ctx)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if want[rec.Offset] {
				out[rec.Offset] = rec
			}
		}
		if r.Offset() == at && len(recs) == 0 && r.HighWatermark() <= at {
			break // nothing more below the high watermark
		}
	}
	return out, nil
}

// ProduceBatch implements sharecoord.DeadLetterIO.
func (l *logOffsets) ProduceBatch(ctx context.Context, topic string, partition int32, batch []byte) error {
	_, err := client.ProduceBatch(ctx, l.meta, l.pool, topic, partition, batch)
	return err
}

// serverParams is what the API server is built from.
type serverParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Node      *raftgroup.Node
	Groups    *coordinator.Coordinator
	Txns      *txncoord.Coordinator
	Shares    *sharecoord.Coordinator
	FSM       *fsm.FSM
	Ends      *logOffsets
	Registry  prometheus.Registerer
	Log       *slog.Logger
}

func newServer(p serverParams) (*api.Server, error) {
	lc, n, co, ends, reg := p.Lifecycle, p.Node, p.Groups, p.Ends, p.Registry
	s, err := api.New(p.Config.API, api.Deps{Node: n, Groups: co, Txns: p.Txns, Shares: p.Shares, FSM: p.FSM, Ends: ends, Log: p.Log.With("component", "api")})
	if err != nil {
		return nil, err
	}
	if err := reg.Register(api.NewLagCollector(s, n.IsLeader)); err != nil {
		return nil, err
	}
	if err := reg.Register(api.NewTxnCollector(s, n.IsLeader)); err != nil {
		return nil, err
	}
	if err := reg.Register(api.NewShareCollector(s, n.IsLeader)); err != nil {
		return nil, err
	}
	if err := registerBatching(reg, co, ends.markers); err != nil {
		return nil, err
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  s.Stop,
	})
	return s, nil
}

// registerBatching exports what group commit gathers: the coordinators'
// Raft entries and the commands in them, the batched marker requests and
// the markers in them.
func registerBatching(reg prometheus.Registerer, co *coordinator.Coordinator, markers *client.TxnMarkerWriter) error {
	counter := func(name, help string, v func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	for _, c := range []prometheus.Collector{
		counter("sluice_offsets_coordinator_entries_total", "Raft entries the coordinators of this replica proposed as leader (each holds one or more commands: group commit).",
			func() int64 { e, _ := co.EntryCounts(); return e }),
		counter("sluice_offsets_coordinator_commands_total", "Commands in those entries: requests' state changes (commits, membership, transactions, share acquisitions).",
			func() int64 { _, n := co.EntryCounts(); return n }),
		counter("sluice_offsets_transaction_marker_requests_total", "Batched marker requests this replica sent to storage nodes (each holds the markers bound for one node).",
			func() int64 { r, _ := markers.Counts(); return r }),
		counter("sluice_offsets_transaction_markers_sent_total", "Transaction markers in those requests.",
			func() int64 { _, m := markers.Counts(); return m }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	entries := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_offsets_coordinator_entry_seconds",
		Help:    "Time from a coordinators' entry's proposal to its answer (replicated, committed and applied), as leader.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12)})
	co.ObserveEntries(func(_ int, d time.Duration) { entries.Observe(d.Seconds()) })
	return reg.Register(entries)
}
