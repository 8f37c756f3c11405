// Package tier is tiered storage on the storage node: the partition
// leader copies each closed segment of a topic with remote.storage.enable
// to an object store, records it in the partition's remote log (kept by
// the metadata Raft group, fenced by the leader epoch), and only then lets
// local retention delete it; reads below the local log's start are served
// from the object store through a block cache on local disk; total
// retention deletes remote segments.
//
// Invariants:
//   - A segment counts only once metadata has committed it, after its
//     object was written whole: a leader killed in between leaves an
//     object no remote log names (an orphan), never a gap. Each upload
//     writes a new key, so a retry or a new leader never overwrites an
//     object a remote log names.
//   - The remote log has no gap: metadata refuses a segment that does not
//     start at its end, and local retention deletes only below that end
//     (seglog.Config.Tiered, Log.SetUploaded), on every replica.
//   - Remote bytes are checked before they are used: the block index and
//     aborted transactions against their CRC-32C, each block against its
//     own (which covers the batches' offsets, unlike their CRCs). A
//     failed check is an error naming the object, never a short or wrong
//     answer.
//   - The object store is never waited on by an append, nor by a fetch
//     holding anything the tail needs: reads that miss the cache start a
//     background fetch and are answered when it is done (reader.go).
package tier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/objstore"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// Config is the node's tiered storage.
type Config struct {
	// CacheDir holds the read cache's blocks; CacheBytes bounds them.
	CacheDir   string
	CacheBytes int64
	// Interval is how often the uploader looks for closed segments.
	Interval time.Duration
	// Fetches bounds the remote reads in flight; Timeout each one.
	Fetches int
	Timeout time.Duration
	// SweepEvery is how often orphans and deleted topics' objects are
	// looked for (sweep.go).
	SweepEvery time.Duration
	// UploadBytesPerSec bounds the uploads' rate (0: no bound), so that
	// they take no more than that from the disk, the CPU and the network
	// the produce path shares (Kafka's
	// remote.log.manager.copy.max.bytes.per.second).
	UploadBytesPerSec int64
}

// Meta is the metadata API the tier uses.
type Meta interface {
	AddRemoteSegment(context.Context, cluster.AddRemoteSegmentRequest) (cluster.RemoteSummary, error)
	DropRemoteSegments(context.Context, cluster.DropRemoteSegmentsRequest) ([]cluster.RemoteSegment, error)
	RemoteLog(ctx context.Context, topic string, partition int32) (*cluster.RemoteLog, error)
	RemoteGarbage(context.Context) ([]cluster.RemoteLog, error)
	ClearRemoteGarbage(context.Context, cluster.ClearRemoteGarbageRequest) error
}

// Deps is what a Tier works with.
type Deps struct {
	Store    objstore.Store
	Meta     Meta
	Replicas *replica.Manager
	// NodeEpoch is this node's registration epoch (membership).
	NodeEpoch func() int64
	Metrics   *Metrics
	Log       *slog.Logger
}

// Tier runs one node's uploads, remote retention and remote reads.
type Tier struct {
	cfg  Config
	deps Deps
	rd   *reader
	log  *slog.Logger

	mu    sync.Mutex
	parts map[replica.Key]*part

	uploadRate *rate.Limiter // nil: uploads unbounded
	kick       chan struct{}
	cancel     context.CancelFunc
	done       chan struct{}
	lastSweep  time.Time                 // owned by the uploader's goroutine
	warned     map[replica.Key]time.Time // likewise: when a partition's failure was last logged
}

// part is a led partition's remote log as this node knows it.
type part struct {
	epoch  int32 // the leader epoch it was loaded at
	rlog   cluster.RemoteLog
	loaded chan struct{} // closed once rlog is loaded
}

// New returns a Tier; Start runs it.
func New(cfg Config, deps Deps) (*Tier, error) {
	c, err := newCache(cfg.CacheDir, cfg.CacheBytes)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Tier{cfg: cfg, deps: deps, log: deps.Log, parts: map[replica.Key]*part{}, warned: map[replica.Key]time.Time{},
		kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	t.rd = &reader{store: deps.Store, cache: c, metrics: deps.Metrics, ctx: ctx, timeout: cfg.Timeout,
		slots: make(chan struct{}, max(cfg.Fetches, 1)), indexes: map[string]*segIndex{},
		inflight: map[blockKey]chan struct{}{}, failed: map[blockKey]failure{}}
	deps.Metrics.cacheBytes = c.size
	if cfg.UploadBytesPerSec > 0 {
		// A burst of a tenth of a second's budget, at least 256 KiB.
		t.uploadRate = rate.NewLimiter(rate.Limit(cfg.UploadBytesPerSec), int(max(cfg.UploadBytesPerSec/10, 256<<10)))
	}
	return t, nil
}

// Start runs the uploader until Stop.
func (t *Tier) Start() {
	ctx := t.rd.ctx
	go func() {
		defer close(t.done)
		tick := time.NewTicker(t.cfg.Interval)
		defer tick.Stop()
		for {
			t.pass(ctx, time.Now())
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-t.kick:
			}
		}
	}()
}

// Stop ends the uploader and the reads in flight, and waits for them.
func (t *Tier) Stop() {
	t.cancel()
	<-t.done
	t.rd.close()
}

// Kick asks for an upload pass now.
func (t *Tier) Kick() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// warnEvery is how often a partition whose uploads keep failing is logged
// (each failure is counted in sluice_storage_remote_upload_errors_total).
const warnEvery = 30 * time.Second

// pass uploads what is closed, applies total retention to the remote logs
// of the partitions this node leads, and updates the upload lag.
func (t *Tier) pass(ctx context.Context, now time.Time) {
	var lagSegs int
	var lagBytes int64
	sweep := now.Sub(t.lastSweep) >= t.cfg.SweepEvery
	if sweep {
		t.lastSweep = now
		if err := t.collectGarbage(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("tiered storage: deleted topics' objects not deleted yet", slog.Any("error", err))
		}
	}
	for _, r := range t.deps.Replicas.Replicas() {
		st := r.State()
		tiered := st.Config.RemoteStorage
		if st.Leader != t.deps.Replicas.Self() || !tiered && r.Remote().Segments == 0 {
			t.forget(r.Key)
			continue
		}
		// A topic whose remote storage was turned off keeps its remote
		// log: read, and bounded by retention, but not added to.
		p, err := t.load(ctx, r, st.LeaderEpoch)
		if err == nil && tiered {
			err = t.upload(ctx, r, st, p)
		}
		if err == nil {
			err = t.retain(ctx, r, st, p, now)
		}
		if err == nil && sweep {
			_, err = t.sweep(ctx, r, p)
		}
		if err != nil && ctx.Err() == nil && now.Sub(t.warned[r.Key]) >= warnEvery {
			t.warned[r.Key] = now
			t.log.Warn("tiered storage: partition not uploaded; local retention keeps its segments until it is",
				slog.String("partition", r.Key.String()), slog.Any("error", err))
		}
		from := r.Log.StartOffset()
		if p != nil {
			rl := t.remoteLog(p)
			from = max(from, rl.End())
		}
		n, b := r.Log.Unuploaded(from)
		lagSegs, lagBytes = lagSegs+n, lagBytes+b
	}
	t.deps.Metrics.LagSegments.Set(float64(lagSegs))
	t.deps.Metrics.LagBytes.Set(float64(lagBytes))
}

// load returns the partition's remote log as of leader epoch, reading it
// from metadata when this node did not lead at that epoch before.
func (t *Tier) load(ctx context.Context, r *replica.Replica, epoch int32) (*part, error) {
	p := t.partFor(r.Key, epoch)
	select {
	case <-p.loaded:
		return p, nil
	default:
	}
	rl, err := t.deps.Meta.RemoteLog(ctx, r.Key.Topic, r.Key.Partition)
	if err != nil {
		return nil, fmt.Errorf("read the remote log: %w", err)
	}
	// A leader that copied only the local tail learns the older epochs
	// here, so that OffsetForLeaderEpoch answers for the whole log.
	var epochs []seglog.EpochEntry
	for _, s := range rl.Segments {
		for _, e := range s.Epochs {
			epochs = append(epochs, seglog.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset})
		}
	}
	if err := r.Log.PrependEpochs(epochs); err != nil {
		return nil, fmt.Errorf("take the remote log's leader epochs: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.parts[r.Key] != p {
		return nil, fmt.Errorf("leadership changed while the remote log was read")
	}
	select {
	case <-p.loaded: // loaded meanwhile by another caller (ListOffsets, the uploader)
		return p, nil
	default:
	}
	p.rlog = *rl
	close(p.loaded)
	r.SetRemote(p.rlog.Summary())
	return p, nil
}

// partFor returns the state of k as led at epoch, a new one (not loaded)
// when this node did not lead k at that epoch before.
func (t *Tier) partFor(k replica.Key, epoch int32) *part {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[k]
	if p == nil || p.epoch != epoch {
		p = &part{epoch: epoch, loaded: make(chan struct{})}
		t.parts[k] = p
	}
	return p
}

// forget drops a partition this node no longer leads (or no longer tiers).
func (t *Tier) forget(k replica.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.parts, k)
}

// upload copies every closed segment past the remote log's end, oldest
// first.
func (t *Tier) upload(ctx context.Context, r *replica.Replica, st replica.State, p *part) error {
	for ctx.Err() == nil {
		from, continues := r.Log.StartOffset(), false
		if rl := t.remoteLog(p); len(rl.Segments) > 0 {
			from, continues = rl.End(), true
		}
		cs, ok := r.Log.Closed(from)
		if !ok {
			return nil
		}
		err := t.uploadOne(ctx, led{r: r, st: st, p: p}, cs, from, continues)
		cs.Release()
		if err != nil {
			t.deps.Metrics.UploadErrors.Inc()
			return err
		}
	}
	return ctx.Err()
}

// remoteLog returns a copy of p's remote log. Its segment slice is shared:
// the uploader appends past the length of every copy and drops replace
// the slice, so no byte a copy holds is ever written.
func (t *Tier) remoteLog(p *part) cluster.RemoteLog {
	t.mu.Lock()
	defer t.mu.Unlock()
	return p.rlog
}

// led is a partition this node leads: its replica, the role it was
// found in, its remote log.
type led struct {
	r  *replica.Replica
	st replica.State
	p  *part
}

// uploadOne uploads the closed segment cs from offset from and commits it;
// continues says the remote log has segments (the upload must start at
// its end, from).
func (t *Tier) uploadOne(ctx context.Context, l led, cs seglog.ClosedSegment, from int64, continues bool) error {
	r, st, p := l.r, l.st, l.p
	b, err := build(cs, max(from, cs.Base), r.Log.AbortedTxns(max(from, cs.Base), cs.Next-1), r.Log.Epochs())
	if err != nil {
		return fmt.Errorf("prepare segment %d: %w", cs.Base, err)
	}
	if from > cs.Base && continues {
		b.seg.BaseOffset = from
	}
	b.seg.Object = objectKey(r, b.seg.BaseOffset, st.LeaderEpoch)
	b.seg.LeaderEpoch = st.LeaderEpoch
	begin := time.Now()
	body := b.body()
	if t.uploadRate != nil {
		body = throttled{ReadSeeker: body, ctx: ctx, lim: t.uploadRate}
	}
	if err := t.deps.Store.Put(ctx, b.seg.Object, body, b.seg.Bytes); err != nil {
		return fmt.Errorf("upload segment %d: %w", cs.Base, err)
	}
	sum, err := t.deps.Meta.AddRemoteSegment(ctx, cluster.AddRemoteSegmentRequest{RemoteLeader: t.leader(r, st), Segment: b.seg})
	if err != nil {
		// The object is an orphan now: no remote log names it.
		t.forget(r.Key) // read the remote log again before the next try
		return fmt.Errorf("commit segment %d to the remote log: %w", cs.Base, err)
	}
	t.deps.Metrics.Uploaded.Inc()
	t.deps.Metrics.UploadedBytes.Add(float64(b.seg.Bytes))
	t.deps.Metrics.UploadSeconds.Observe(time.Since(begin).Seconds())
	t.mu.Lock()
	p.rlog.Segments = append(p.rlog.Segments, b.seg)
	t.mu.Unlock()
	r.SetRemote(sum)
	t.log.Info("uploaded segment", slog.String("partition", r.Key.String()), slog.String("object", b.seg.Object),
		slog.Int64("base_offset", b.seg.BaseOffset), slog.Int64("end_offset", b.seg.EndOffset), slog.Int64("bytes", b.seg.Bytes))
	return nil
}

func (t *Tier) leader(r *replica.Replica, st replica.State) cluster.RemoteLeader {
	return cluster.RemoteLeader{Topic: r.Key.Topic, Partition: r.Key.Partition, LeaderID: t.deps.Replicas.Self(),
		LeaderEpoch: st.LeaderEpoch, NodeEpoch: t.deps.NodeEpoch()}
}

// objectKey names an upload: topic, its incarnation and partition, then
// the base offset, the leader epoch and a random part, so that no two
// uploads share a key.
func objectKey(r *replica.Replica, base int64, epoch int32) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%020d-%d-%s.segment", partitionPrefix(r), base, epoch, hex.EncodeToString(b[:]))
}

// retain drops the remote segments past the topic's total retention
// (retention.ms by their largest timestamp, retention.bytes over remote
// and local bytes together) and deletes their objects.
func (t *Tier) retain(ctx context.Context, r *replica.Replica, st replica.State, p *part, now time.Time) error {
	cfg, rl := st.Config, t.remoteLog(p)
	if !cfg.Delete || len(rl.Segments) == 0 {
		return nil
	}
	_, local := r.Log.Unuploaded(rl.End())
	total := rl.Bytes() + local
	below := int64(-1)
	for _, s := range rl.Segments {
		byTime := cfg.RetentionMs >= 0 && s.MaxTimestamp >= 0 && now.UnixMilli()-s.MaxTimestamp > cfg.RetentionMs
		bySize := cfg.RetentionBytes >= 0 && total-s.Bytes >= cfg.RetentionBytes
		if !byTime && !bySize {
			break
		}
		below, total = s.EndOffset, total-s.Bytes
	}
	if below < 0 {
		return nil
	}
	return t.dropBelow(ctx, r, st, p, below)
}

// dropBelow removes the records below below from the remote log (the
// segments wholly below it, and its start moved up inside the next one),
// then deletes the dropped segments' objects, and moves the local log's
// start up too when it is lower.
func (t *Tier) dropBelow(ctx context.Context, r *replica.Replica, st replica.State, p *part, below int64) error {
	dropped, err := t.deps.Meta.DropRemoteSegments(ctx, cluster.DropRemoteSegmentsRequest{RemoteLeader: t.leader(r, st), Below: below})
	if err != nil {
		t.forget(r.Key)
		return fmt.Errorf("drop remote segments below %d: %w", below, err)
	}
	t.mu.Lock()
	n := sort.Search(len(p.rlog.Segments), func(i int) bool { return p.rlog.Segments[i].EndOffset > below })
	p.rlog.Segments = append([]cluster.RemoteSegment(nil), p.rlog.Segments[n:]...)
	if len(p.rlog.Segments) > 0 && below > p.rlog.Segments[0].BaseOffset {
		p.rlog.LogStart = max(p.rlog.LogStart, below)
	}
	sum := p.rlog.Summary()
	t.mu.Unlock()
	r.SetRemote(sum)
	// Records past the total retention are gone from the partition, local
	// copies too: the log start moves up (followers follow it).
	if r.Log.StartOffset() < below && below <= r.HighWatermark() {
		if _, err := r.Log.RaiseStartOffset(below); err != nil {
			return fmt.Errorf("raise the log start to the remote log's %d: %w", below, err)
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	keys := make([]string, 0, len(dropped))
	for _, s := range dropped {
		keys = append(keys, s.Object)
		t.rd.forget(s.Object)
	}
	if err := t.deps.Store.Delete(ctx, keys...); err != nil {
		return fmt.Errorf("delete %d dropped remote segments (now orphans): %w", len(keys), err)
	}
	t.log.Info("deleted remote segments", slog.String("partition", r.Key.String()),
		slog.Int("segments", len(keys)), slog.Int64("start_offset", sum.Start))
	return nil
}

// DeleteRecords moves the partition's start up to offset (Kafka's
// DeleteRecords, -1: the high watermark) across both tiers: the remote
// records below it are dropped from the remote log (their segments'
// objects deleted), the local ones as the replica does. It returns the
// partition's new start.
func (t *Tier) DeleteRecords(ctx context.Context, r *replica.Replica, offset int64) (int64, error) {
	if t == nil || r.Remote().Segments == 0 {
		return r.DeleteRecords(offset)
	}
	if _, err := r.DeleteRecords(offset); err != nil { // checks offset, moves the local start
		return 0, err
	}
	if offset == -1 {
		offset = r.HighWatermark()
	}
	if offset > r.StartOffset() {
		st := r.State()
		p, err := t.load(ctx, r, st.LeaderEpoch)
		if err == nil {
			rl := t.remoteLog(p)
			err = t.dropBelow(ctx, r, st, p, min(offset, rl.End()))
		}
		if err != nil {
			return 0, protocol.StorageError.Err("%s: delete records below %d: %v", r.Key, offset, err)
		}
	}
	return r.StartOffset(), nil
}

// Remote reports whether a consumer's read at offset is a remote read:
// offset is below the local log's start and the partition has a remote
// log.
func (t *Tier) Remote(r *replica.Replica, offset int64) bool {
	return t != nil && offset < r.Log.StartOffset() && r.Remote().Segments > 0
}

// Result is a remote read's answer.
type Result struct {
	// Slice holds whole batches (empty when nothing is there yet).
	Slice seglog.Slice
	// Wait, when not nil, is closed when the fetch the read started is
	// done: read again then. Slice is empty.
	Wait    <-chan struct{}
	aborted []seglog.AbortedTxn
}

// Aborted returns the aborted transactions with records in the read, for
// a read_committed fetch at offset.
func (res Result) Aborted(offset int64) []protocol.AbortedTxn {
	if res.Slice.Size() == 0 {
		return nil
	}
	end, err := res.Slice.NextOffset()
	if err != nil {
		return nil
	}
	var out []protocol.AbortedTxn
	for _, a := range res.aborted {
		if a.LastOffset >= offset && a.FirstOffset < end {
			out = append(out, protocol.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	return out
}

// ConsumerRead is what a consumer's read of one partition found.
type ConsumerRead struct {
	// Slice holds whole batches (empty when nothing is there yet).
	Slice seglog.Slice
	// Aborted are the aborted transactions with records in Slice, for a
	// read_committed read.
	Aborted []protocol.AbortedTxn
	// Wait, when not nil, is closed when a remote fetch the read started
	// is done: read again then.
	Wait <-chan struct{}
}

// ReadConsumer reads a consumer's fetch at offset from leader replica r:
// below the local log's start from the remote log, else from the local log
// up to the view's bound; a read whose segment local retention deleted
// after it was found local goes remote. The local log's errors come back
// as they are (the caller reports corrupt data). t may be nil: no tiered
// storage.
func (t *Tier) ReadConsumer(r *replica.Replica, offset int64, maxBytes int, view replica.ConsumerView) (ConsumerRead, error) {
	for {
		if t.Remote(r, offset) {
			res, err := t.Read(r, offset, maxBytes)
			if err != nil {
				return ConsumerRead{}, err
			}
			out := ConsumerRead{Slice: res.Slice, Wait: res.Wait}
			if view.Committed {
				out.Aborted = res.Aborted(offset)
			}
			return out, nil
		}
		sl, err := r.Log.Read(offset, maxBytes, view.Bound)
		if errors.Is(err, seglog.ErrOffsetOutOfRange) && t.Remote(r, offset) {
			continue // deleted locally since: the next round reads it remote
		}
		if err != nil {
			return ConsumerRead{}, err
		}
		return ConsumerRead{Slice: sl, Aborted: view.Aborted(r.Log, offset, sl)}, nil
	}
}

// ErrNotLeader answers a remote read at a replica this node does not
// lead.
var ErrNotLeader = errors.New("tiered storage: this node does not lead the partition")

// Read reads the remote log of the leader replica r at offset: whole
// batches up to maxBytes (the first one always), or a Wait channel when
// the blocks are being fetched. An offset below the remote log's start is
// OFFSET_OUT_OF_RANGE.
func (t *Tier) Read(r *replica.Replica, offset int64, maxBytes int) (Result, error) {
	st := r.State()
	if st.Leader != t.deps.Replicas.Self() {
		return Result{}, protocol.NotLeaderOrFollower.Err("%s: %v", r.Key, ErrNotLeader)
	}
	p := t.partFor(r.Key, st.LeaderEpoch)
	select {
	case <-p.loaded:
	default:
		t.Kick()
		return Result{Wait: p.loaded}, nil
	}
	rl := t.remoteLog(p)
	segs, start, end := rl.Segments, rl.Start(), rl.End()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].EndOffset > offset })
	if len(segs) == 0 || offset < start || i == len(segs) {
		return Result{}, protocol.OffsetOutOfRange.Err("%s: offset %d, the remote log holds [%d, %d) and the local log starts at %d",
			r.Key, offset, start, end, r.Log.StartOffset())
	}
	seg := segs[i]
	res, err := t.rd.read(&seg, max(offset, seg.BaseOffset), maxBytes)
	if err != nil {
		return Result{}, protocol.StorageError.Err("%s: %v", r.Key, err)
	}
	return Result{Slice: res.slice, Wait: res.wait, aborted: res.aborted}, nil
}

// Metrics are tiered storage's metrics.
type Metrics struct {
	LagSegments, LagBytes prometheus.Gauge
	Uploaded              prometheus.Counter
	UploadedBytes         prometheus.Counter
	UploadErrors          prometheus.Counter
	UploadSeconds         prometheus.Histogram
	ReadErrors            prometheus.Counter
	ReadBytes             prometheus.Counter
	ReadSeconds           prometheus.Histogram
	CacheHits             prometheus.Counter
	CacheMisses           prometheus.Counter
	Orphans               prometheus.Counter
	cacheBytes            func() int64
}

// NewMetrics registers the metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LagSegments: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_storage_remote_upload_lag_segments",
			Help: "Closed segments of the partitions this node leads that are not yet in remote storage."}),
		LagBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_storage_remote_upload_lag_bytes",
			Help: "Bytes of the closed segments not yet in remote storage."}),
		Uploaded: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_uploads_total",
			Help: "Segments uploaded and committed to their remote log."}),
		UploadedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_upload_bytes_total",
			Help: "Bytes of the segments uploaded."}),
		UploadErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_upload_errors_total",
			Help: "Uploads that failed (object store or metadata); local retention keeps those segments."}),
		UploadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_storage_remote_upload_seconds",
			Help: "Time to upload one segment.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		ReadErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_read_errors_total",
			Help: "Remote reads that failed (object store errors, failed checksums)."}),
		ReadBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_read_bytes_total",
			Help: "Bytes read from remote storage into the read cache."}),
		ReadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_storage_remote_read_seconds",
			Help: "Latency of one remote read (a block or a segment's index).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		CacheHits: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_cache_hits_total",
			Help: "Remote reads answered from the local read cache."}),
		CacheMisses: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_cache_misses_total",
			Help: "Remote reads that had to fetch from the object store."}),
		Orphans: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_storage_remote_orphans_deleted_total",
			Help: "Objects deleted because no remote log named them (uploads whose commit was lost)."}),
	}
	if reg != nil {
		reg.MustRegister(m.LagSegments, m.LagBytes, m.Uploaded, m.UploadedBytes, m.UploadErrors, m.UploadSeconds,
			m.ReadErrors, m.ReadBytes, m.ReadSeconds, m.CacheHits, m.CacheMisses, m.Orphans,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_storage_remote_cache_bytes",
				Help: "Bytes of remote blocks in the local read cache."}, func() float64 {
				if m.cacheBytes == nil {
					return 0
				}
				return float64(m.cacheBytes())
			}))
	}
	return m
}
