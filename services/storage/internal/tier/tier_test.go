package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/objstore"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// fakeMeta is the metadata service's remote logs for one node: contiguity
// and leader-epoch fencing as metadata applies them.
type fakeMeta struct {
	mu      sync.Mutex
	logs    map[string]*cluster.RemoteLog
	epoch   int32 // the current leader epoch
	fail    error
	garbage []cluster.RemoteLog
}

func (m *fakeMeta) key(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

func (m *fakeMeta) get(topic string, p int32) *cluster.RemoteLog {
	k := m.key(topic, p)
	if m.logs[k] == nil {
		m.logs[k] = &cluster.RemoteLog{Topic: topic, Partition: p}
	}
	return m.logs[k]
}

func (m *fakeMeta) AddRemoteSegment(_ context.Context, req cluster.AddRemoteSegmentRequest) (cluster.RemoteSummary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return cluster.RemoteSummary{}, m.fail
	}
	if req.LeaderEpoch != m.epoch {
		return cluster.RemoteSummary{}, protocol.FencedLeaderEpoch.Err("epoch %d, not %d", req.LeaderEpoch, m.epoch)
	}
	l := m.get(req.Topic, req.Partition)
	if len(l.Segments) > 0 && req.Segment.BaseOffset != l.End() {
		return cluster.RemoteSummary{}, fmt.Errorf("gap: %d after %d", req.Segment.BaseOffset, l.End())
	}
	l.Segments = append(l.Segments, req.Segment)
	return l.Summary(), nil
}

func (m *fakeMeta) DropRemoteSegments(_ context.Context, req cluster.DropRemoteSegmentsRequest) ([]cluster.RemoteSegment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.get(req.Topic, req.Partition)
	n := 0
	for n < len(l.Segments) && l.Segments[n].EndOffset <= req.Below {
		n++
	}
	out := append([]cluster.RemoteSegment(nil), l.Segments[:n]...)
	l.Segments = append([]cluster.RemoteSegment(nil), l.Segments[n:]...)
	if len(l.Segments) > 0 && req.Below > l.Segments[0].BaseOffset {
		l.LogStart = max(l.LogStart, req.Below)
	} else {
		l.LogStart = 0
	}
	return out, nil
}

func (m *fakeMeta) RemoteLog(_ context.Context, topic string, p int32) (*cluster.RemoteLog, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := *m.get(topic, p)
	l.Segments = append([]cluster.RemoteSegment(nil), l.Segments...)
	return &l, nil
}

func (m *fakeMeta) RemoteGarbage(context.Context) ([]cluster.RemoteLog, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]cluster.RemoteLog(nil), m.garbage...), nil
}

func (m *fakeMeta) ClearRemoteGarbage(_ context.Context, req cluster.ClearRemoteGarbageRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, g := range m.garbage {
		if g.Topic == req.Topic && g.Partition == req.Partition {
			m.garbage = append(m.garbage[:i], m.garbage[i+1:]...)
			break
		}
	}
	return nil
}

// deleteTopic moves the partition's remote log to the garbage, as
// metadata does when its topic is deleted.
func (m *fakeMeta) deleteTopic(topic string, p int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.garbage = append(m.garbage, *m.get(topic, p))
	delete(m.logs, m.key(topic, p))
}

func (m *fakeMeta) segments() []cluster.RemoteSegment {
	l, _ := m.RemoteLog(context.Background(), "t", 0)
	return l.Segments
}

// env is a node leading partition t-0 of a tiered topic, with an
// in-memory object store.
type env struct {
	mgr   *replica.Manager
	r     *replica.Replica
	store *objstore.Mem
	meta  *fakeMeta
	tier  *Tier
	sent  [][]byte // the batches appended, in order
}

func newEnv(t *testing.T, config map[string]string) *env {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := replica.NewManager(t.TempDir(), 1, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cfg := map[string]string{"segment.bytes": "4096", "remote.storage.enable": "true", "local.retention.ms": "0", "flush.policy": "replication"}
	for k, v := range config {
		cfg[k] = v
	}
	top := cluster.Topic{Name: "t", ID: "tid", ReplicationFactor: 1, Config: cfg,
		Partitions: []cluster.Partition{{ID: 0, Replicas: []int32{1}, Leader: 1, LeaderEpoch: 3, ISR: []int32{1}}}}
	if err := m.Apply(&cluster.Snapshot{Version: 1, Topics: []cluster.Topic{top}}, true); err != nil {
		t.Fatal(err)
	}
	r, err := m.Get("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{mgr: m, r: r, store: objstore.NewMem(), meta: &fakeMeta{logs: map[string]*cluster.RemoteLog{}, epoch: 3}}
	e.tier = e.newTier(t)
	return e
}

func (e *env) newTier(t *testing.T) *Tier {
	t.Helper()
	tr, err := New(Config{CacheDir: filepath.Join(t.TempDir(), "cache"), CacheBytes: 8 << 20, Interval: time.Hour, Fetches: 2, Timeout: 5 * time.Second, SweepEvery: time.Hour},
		Deps{Store: e.store, Meta: e.meta, Replicas: e.mgr, NodeEpoch: func() int64 { return 1 }, Metrics: NewMetrics(nil), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.cancel(); tr.rd.close() })
	return tr
}

// produce appends n records without keys, one batch each, and makes them
// committed.
func (e *env) produce(t *testing.T, n int) { e.appendRecords(t, n, nil) }

// produceKeyed appends n records of keys k0..k9 and sets each key's latest
// value in latest.
func (e *env) produceKeyed(t *testing.T, n int, latest map[string]string) {
	e.appendRecords(t, n, latest)
}

// appendRecords appends n records, one batch each, their values naming
// their offsets, keyed (latest not nil) or not, and makes them committed.
func (e *env) appendRecords(t *testing.T, n int, latest map[string]string) {
	t.Helper()
	for range n {
		off := len(e.sent)
		rec := record.Record{Timestamp: tsOf(int64(off)), Value: []byte(fmt.Sprintf("record-%04d-%s", off, strings.Repeat("x", 200)))}
		if latest != nil {
			rec.Key = []byte(fmt.Sprintf("k%d", off%10))
			latest[string(rec.Key)] = string(rec.Value)
		}
		bl := record.NewBuilder(record.CodecNone)
		bl.Append(rec)
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.r.Log.Append(b, 3); err != nil {
			t.Fatal(err)
		}
		e.sent = append(e.sent, b)
	}
	e.r.Progressed()
	testkit.WaitFor(t, 5*time.Second, "high watermark at the log end", func() bool {
		e.r.Progressed()
		return e.r.HighWatermark() == e.r.Log.EndOffset()
	})
}

// tierOut produces n records, uploads what is closed and lets local
// retention delete it.
func (e *env) tierOut(t *testing.T, n int) {
	t.Helper()
	e.produce(t, n)
	e.tier.pass(context.Background(), time.Now())
	if _, err := e.r.Log.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
}

// tsBase is the timestamp of the record at offset 0: recent enough for
// the total retention of a week.
var tsBase = time.Now().Add(-time.Hour).UnixMilli()

// tsOf is the timestamp of the record produce appends at offset.
func tsOf(offset int64) int64 { return tsBase + 10*offset }

// readRemote reads offset through the tier, waiting out its fetches.
func (e *env) readRemote(t *testing.T, tr *Tier, offset int64) (seglog.Slice, error) {
	t.Helper()
	for range 10 {
		res, err := tr.Read(e.r, offset, 1<<20)
		if err != nil || res.Wait == nil {
			return res.Slice, err
		}
		select {
		case <-res.Wait:
		case <-time.After(5 * time.Second):
			t.Fatal("a remote fetch never ended")
		}
	}
	t.Fatal("a remote read kept waiting")
	return seglog.Slice{}, nil
}

// The leader uploads its closed segments in order, local retention then
// deletes them, and every record reads back from the object store, the
// same bytes, up to the local log's start.
func TestUploadThenReadAcrossTiers(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(t, 60) // about 5 segments of 4 KiB
	ctx := context.Background()
	e.tier.pass(ctx, time.Now())
	segs := e.meta.segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments uploaded, want every closed one", len(segs))
	}
	for i, s := range segs {
		if i > 0 && s.BaseOffset != segs[i-1].EndOffset {
			t.Fatalf("remote log has a gap: %+v after %+v", s, segs[i-1])
		}
		if _, ok := e.store.Objects()[s.Object]; !ok {
			t.Fatalf("segment %s committed without its object", s.Object)
		}
	}
	if segs[0].BaseOffset != 0 || e.r.Remote().End != segs[len(segs)-1].EndOffset {
		t.Fatalf("remote log [%d, %d), replica knows %+v", segs[0].BaseOffset, segs[len(segs)-1].EndOffset, e.r.Remote())
	}
	if _, err := e.r.Log.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	local := e.r.Log.StartOffset()
	if local != segs[len(segs)-1].EndOffset || e.r.StartOffset() != 0 {
		t.Fatalf("local start %d (want the remote end %d), partition start %d (want 0)", local, segs[len(segs)-1].EndOffset, e.r.StartOffset())
	}
	for ts, want := range map[int64]int64{protocol.TimestampEarliest: 0, protocol.TimestampEarliestLocal: local} {
		if got, err := e.r.ListOffset(ts, protocol.ReadUncommitted); err != nil || got.Offset != want {
			t.Fatalf("ListOffsets %d: %d, %v; want %d", ts, got.Offset, err, want)
		}
	}
	if !e.tier.Remote(e.r, 0) || e.tier.Remote(e.r, local) {
		t.Fatal("Remote does not tell remote offsets from local ones")
	}
	for off := int64(0); off < local; {
		sl, err := e.readRemote(t, e.tier, off)
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		b, err := sl.ReadAll()
		sl.Release()
		if err != nil || len(b) == 0 {
			t.Fatalf("offset %d: %d bytes, %v", off, len(b), err)
		}
		for len(b) > 0 {
			want := e.sent[off]
			if len(b) < len(want) || string(b[12:len(want)]) != string(want[12:]) {
				t.Fatalf("offset %d: the remote bytes differ from the batch appended", off)
			}
			b = b[len(want):]
			off++
		}
	}
	if hits := testutil.ToFloat64(e.tier.deps.Metrics.CacheHits); hits == 0 {
		t.Fatal("no read was served from the cache (the read-ahead did not run)")
	}
	if _, err := e.tier.Read(e.r, -1, 100); protocol.CodeOf(err) != protocol.OffsetOutOfRange {
		t.Fatalf("a read below the remote log: %v, want OFFSET_OUT_OF_RANGE", err)
	}
}

// An object store that fails (503 SlowDown) stops uploads, not produce:
// local retention holds every segment not uploaded, counted, and uploads
// resume when the store answers again.
func TestStoreDownHoldsLocalRetention(t *testing.T) {
	e := newEnv(t, nil)
	e.store.SetFault(func(op, key string) error { return errors.New("503 SlowDown") })
	e.produce(t, 40)
	e.tier.pass(context.Background(), time.Now())
	if n := len(e.meta.segments()); n != 0 {
		t.Fatalf("%d segments committed with the store down", n)
	}
	if testutil.ToFloat64(e.tier.deps.Metrics.UploadErrors) == 0 || testutil.ToFloat64(e.tier.deps.Metrics.LagSegments) == 0 {
		t.Fatal("upload errors or lag not counted")
	}
	if _, err := e.r.Log.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if e.r.Log.StartOffset() != 0 || e.r.Log.HeldBack() == 0 {
		t.Fatalf("local retention deleted segments not uploaded: start %d, held back %d", e.r.Log.StartOffset(), e.r.Log.HeldBack())
	}
	e.produce(t, 5) // produce goes on
	e.store.SetFault(nil)
	e.tier.pass(context.Background(), time.Now())
	if n := len(e.meta.segments()); n == 0 || testutil.ToFloat64(e.tier.deps.Metrics.LagSegments) != 0 {
		t.Fatalf("uploads did not resume: %d segments, lag %v", n, testutil.ToFloat64(e.tier.deps.Metrics.LagSegments))
	}
	if _, err := e.r.Log.EnforceRetention(time.Now()); err != nil || e.r.Log.StartOffset() == 0 {
		t.Fatalf("local retention still held back after the uploads: start %d, %v", e.r.Log.StartOffset(), err)
	}
}

// An upload whose commit fails leaves an orphan object and no gap: the
// next pass uploads the segment again under a new key, and only that one
// counts.
func TestFailedCommitLeavesNoGap(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(t, 30)
	e.meta.fail = errors.New("metadata unreachable")
	e.tier.pass(context.Background(), time.Now())
	orphans := len(e.store.Objects())
	if orphans == 0 || len(e.meta.segments()) != 0 {
		t.Fatalf("%d objects, %d committed", orphans, len(e.meta.segments()))
	}
	e.meta.fail = nil
	e.tier.pass(context.Background(), time.Now())
	segs := e.meta.segments()
	if len(segs) == 0 || segs[0].BaseOffset != 0 {
		t.Fatalf("remote log after the retry: %+v", segs)
	}
	if len(e.store.Objects()) != len(segs)+orphans {
		t.Fatalf("%d objects for %d segments and %d orphans: an upload overwrote or reused a key", len(e.store.Objects()), len(segs), orphans)
	}
	e.tier.lastSweep = time.Time{} // the next pass sweeps
	e.tier.pass(context.Background(), time.Now())
	if len(e.store.Objects()) != len(segs) || testutil.ToFloat64(e.tier.deps.Metrics.Orphans) != float64(orphans) {
		t.Fatalf("after a sweep: %d objects for %d segments, %v orphans deleted; want the %d orphans gone",
			len(e.store.Objects()), len(segs), testutil.ToFloat64(e.tier.deps.Metrics.Orphans), orphans)
	}
	for _, s := range segs {
		if _, ok := e.store.Objects()[s.Object]; !ok {
			t.Fatalf("the sweep deleted committed segment %s", s.Object)
		}
	}
}

// A deleted topic's remote segments, and its orphans, are deleted from the
// store by the live node with the lowest id, which then clears them from
// metadata's garbage.
func TestDeletedTopicObjectsAreCollected(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(t, 40)
	e.tier.pass(context.Background(), time.Now())
	if len(e.meta.segments()) == 0 {
		t.Fatal("nothing uploaded")
	}
	if err := e.store.Put(context.Background(), "t-tid/0/orphan.segment", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	e.meta.deleteTopic("t", 0)
	if err := e.tier.collectGarbage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.store.Objects()); n != 0 {
		t.Fatalf("%d objects left of a deleted topic", n)
	}
	if g, _ := e.meta.RemoteGarbage(context.Background()); len(g) != 0 {
		t.Fatalf("garbage not cleared: %+v", g)
	}
}

// A corrupted or missing object fails the read with an error naming it;
// no byte of it is served, and reads of other segments go on.
func TestCorruptObjectIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.tierOut(t, 60)
	segs := e.meta.segments()
	e.store.Corrupt(segs[0].Object, 100) // inside the first block's batches
	_, err := e.readRemote(t, e.tier, 0)
	if protocol.CodeOf(err) != protocol.StorageError || !strings.Contains(err.Error(), segs[0].Object) {
		t.Fatalf("read of a corrupt block: %v; want KAFKA_STORAGE_ERROR naming %s", err, segs[0].Object)
	}
	if sl, err := e.readRemote(t, e.tier, segs[1].BaseOffset); err != nil || sl.Size() == 0 {
		t.Fatalf("read of the next segment: %d bytes, %v", sl.Size(), err)
	} else {
		sl.Release()
	}
	if err := e.store.Delete(context.Background(), segs[2].Object); err != nil {
		t.Fatal(err)
	}
	if _, err := e.readRemote(t, e.tier, segs[2].BaseOffset); err == nil || !strings.Contains(err.Error(), segs[2].Object) {
		t.Fatalf("read of a missing object: %v", err)
	}
}

// Total retention (retention.bytes over remote and local bytes) drops the
// oldest remote segments from the remote log and deletes their objects.
func TestRemoteRetentionDeletesObjects(t *testing.T) {
	e := newEnv(t, map[string]string{"retention.bytes": "10000"})
	e.produce(t, 60)
	e.tier.pass(context.Background(), time.Now()) // uploads, then drops past 10000 bytes
	segs := e.meta.segments()
	var remote int64
	for _, s := range segs {
		remote += s.Bytes
	}
	_, local := e.r.Log.Unuploaded(segs[len(segs)-1].EndOffset)
	if len(segs) == 0 || segs[0].BaseOffset == 0 || remote+local-segs[0].Bytes >= 10000 {
		t.Fatalf("remote log after retention: %d segments from %d, %d bytes (and %d local): one more could go", len(segs), segs[0].BaseOffset, remote, local)
	}
	if len(e.store.Objects()) != len(segs) {
		t.Fatalf("%d objects for %d segments: dropped segments' objects were not deleted", len(e.store.Objects()), len(segs))
	}
	if e.r.StartOffset() != segs[0].BaseOffset {
		t.Fatalf("partition start %d, remote log starts at %d", e.r.StartOffset(), segs[0].BaseOffset)
	}
}

// ListOffsets by timestamp and for the largest timestamp answer across the
// tiers: a timestamp of the remote part finds its record there, one of the
// local part the local log's.
func TestListOffsetsAcrossTiers(t *testing.T) {
	e := newEnv(t, nil)
	e.tierOut(t, 60)
	local := e.r.Log.StartOffset()
	if local == 0 || !e.tier.Searches(e.r, 0) || e.tier.Searches(e.r, protocol.TimestampEarliest) {
		t.Fatalf("local start %d; Searches wrong", local)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		ts, want, wantTs int64
	}{
		{0, 0, tsOf(0)},                               // older than every record
		{tsOf(7), 7, tsOf(7)},                         // in the remote part
		{tsOf(7) - 5, 7, tsOf(7)},                     // between two records
		{tsOf(local + 2), local + 2, tsOf(local + 2)}, // in the local part
		{tsOf(1000), -1, -1},                          // newer than every record
		{protocol.TimestampMax, 59, tsOf(59)},
	} {
		got, err := e.tier.ListOffset(ctx, e.r, tc.ts, protocol.ReadUncommitted)
		if err != nil || got.Offset != tc.want || got.Timestamp != tc.wantTs {
			t.Fatalf("ListOffsets %d = %d at %d (%v); want %d at %d", tc.ts, got.Offset, got.Timestamp, err, tc.want, tc.wantTs)
		}
	}
}

// Retention that empties the remote log leaves the partition starting at
// the local log: no remote read, ListOffsets earliest at the local start.
func TestRemoteLogEmptiedByRetention(t *testing.T) {
	e := newEnv(t, map[string]string{"retention.ms": "60000"}) // records an hour old: all past it
	e.produce(t, 40)
	e.tier.pass(context.Background(), time.Now()) // uploads, then drops them all
	if n := len(e.meta.segments()); n != 0 {
		t.Fatalf("%d remote segments past retention kept", n)
	}
	if rem := e.r.Remote(); rem.Segments != 0 || rem.Start == 0 {
		t.Fatalf("replica still sees a remote log: %+v", rem)
	}
	if e.tier.Remote(e.r, 0) || e.r.StartOffset() != e.r.Log.StartOffset() || e.r.StartOffset() == 0 {
		t.Fatalf("partition start %d, local %d: the dropped records are still offered", e.r.StartOffset(), e.r.Log.StartOffset())
	}
}

// A compacted topic is tiered too: its closed segments are uploaded once
// the cleaner has passed them, local retention deletes them, and reading
// the whole log across the tiers, every key's last value is its latest.
func TestCompactedTopicTiered(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "compact"})
	latest := map[string]string{}
	e.produceKeyed(t, 40, latest)
	e.tier.pass(context.Background(), time.Now())
	if n := len(e.meta.segments()); n != 0 {
		t.Fatalf("%d segments uploaded before the cleaner passed them: the cleaner's output is what goes", n)
	}
	if _, err := e.r.Log.Clean(seglog.CleanOptions{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e.tier.pass(context.Background(), time.Now())
	if n := len(e.meta.segments()); n == 0 {
		t.Fatal("no cleaned segment uploaded")
	}
	e.produceKeyed(t, 30, latest)
	if _, err := e.r.Log.Clean(seglog.CleanOptions{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e.tier.pass(context.Background(), time.Now())
	if _, err := e.r.Log.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	local := e.r.Log.StartOffset()
	if local == 0 || len(e.meta.segments()) == 0 {
		t.Fatalf("compacted topic not tiered: local start %d, %d remote segments", local, len(e.meta.segments()))
	}
	seen := map[string]string{}
	keep := func(batches []byte) {
		for len(batches) > 0 {
			n, err := record.PeekSize(batches)
			if err != nil {
				t.Fatal(err)
			}
			it := record.NewIterator(batches[:n])
			for it.Next() {
				seen[string(it.Record().Key)] = string(it.Record().Value)
			}
			batches = batches[n:]
		}
	}
	for off := int64(0); off < local; {
		sl, err := e.readRemote(t, e.tier, off)
		if err != nil || sl.Size() == 0 {
			t.Fatalf("remote read at %d: %d bytes, %v", off, sl.Size(), err)
		}
		b, err := sl.ReadAll()
		next, _ := sl.NextOffset()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		keep(b)
		off = next
	}
	for off := local; off < e.r.Log.EndOffset(); {
		sl, err := e.r.Log.Read(off, 1<<20, e.r.Log.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.ReadAll()
		next, _ := sl.NextOffset()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		keep(b)
		off = next
	}
	for k, v := range latest {
		if seen[k] != v {
			t.Fatalf("key %s reads back as %.8q, its latest value is %.8q", k, seen[k], v)
		}
	}
}

// DeleteRecords inside the remote part drops the remote segments below the
// offset (their objects deleted) and starts the partition there: a read
// below it is out of range, one at it reads on, ListOffsets earliest
// answers it.
func TestDeleteRecordsInRemotePart(t *testing.T) {
	e := newEnv(t, nil)
	e.tierOut(t, 60)
	segs := e.meta.segments()
	cut := segs[1].BaseOffset + 2 // inside the second segment
	low, err := e.tier.DeleteRecords(context.Background(), e.r, cut)
	if err != nil || low != cut {
		t.Fatalf("DeleteRecords(%d) = %d, %v", cut, low, err)
	}
	if _, ok := e.store.Objects()[segs[0].Object]; ok || len(e.meta.segments()) != len(segs)-1 {
		t.Fatalf("the first segment (wholly below %d) is still there", cut)
	}
	if got, _ := e.r.ListOffset(protocol.TimestampEarliest, protocol.ReadUncommitted); got.Offset != cut {
		t.Fatalf("ListOffsets earliest %d, want %d", got.Offset, cut)
	}
	if _, err := e.tier.Read(e.r, cut-1, 1<<20); protocol.CodeOf(err) != protocol.OffsetOutOfRange {
		t.Fatalf("read below the new start: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	sl, err := e.readRemote(t, e.tier, cut)
	if err != nil || sl.Size() == 0 {
		t.Fatalf("read at the new start: %d bytes, %v", sl.Size(), err)
	}
	sl.Release()
	if _, err := e.tier.DeleteRecords(context.Background(), e.r, e.r.HighWatermark()+1); protocol.CodeOf(err) != protocol.OffsetOutOfRange {
		t.Fatalf("DeleteRecords above the high watermark: %v", err)
	}
}
