package produce

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
)

// fakeMeta is an in-memory Metadata: routes by topic, and an optional hook
// run on Refresh (to move a leader, as the metadata service would).
type fakeMeta struct {
	mu        sync.Mutex
	routes    map[string]*metacache.Route
	refreshes int
	onRefresh func(m *fakeMeta)
	fail      error
	changed   chan struct{}
}

func newFakeMeta() *fakeMeta {
	return &fakeMeta{routes: map[string]*metacache.Route{}, changed: make(chan struct{})}
}

func (m *fakeMeta) set(topic string, leaders ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes[topic] = &metacache.Route{Topic: topic, Leaders: leaders, LeaderIDs: make([]int32, len(leaders))}
}

func (m *fakeMeta) Route(topic string) (*metacache.Route, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.routes[topic]
	return r, ok
}

func (m *fakeMeta) Refresh(context.Context) (*cluster.Snapshot, error) {
	m.mu.Lock()
	m.refreshes++
	hook, fail := m.onRefresh, m.fail
	m.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	if hook != nil {
		hook(m)
	}
	return &cluster.Snapshot{Version: 1}, nil
}

func (m *fakeMeta) RefreshOlder(ctx context.Context, _ time.Duration) (*cluster.Snapshot, error) {
	return m.Refresh(ctx)
}

func (m *fakeMeta) Changed() <-chan struct{} { return m.changed }

// sent is one produce request a fakeSender received, with its records.
type sent struct {
	addr string
	req  protocol.ProduceRequest
	recs []record.Record
}

// fakeSender is an in-memory storage cluster: it validates each batch like a
// leader would, assigns offsets per partition and can fail chosen attempts.
type fakeSender struct {
	mu   sync.Mutex
	next map[string]int64 // "topic/partition" -> next offset
	log  []sent
	// fail, when set, may return an error for a request instead of appending.
	fail func(addr string, req *protocol.ProduceRequest, attempt int) error
	hits map[string]int // attempts per "addr topic/partition"
}

func newFakeSender() *fakeSender {
	return &fakeSender{next: map[string]int64{}, hits: map[string]int{}}
}

func (s *fakeSender) Produce(_ context.Context, addr string, req *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error) {
	h, err := record.Validate(batch)
	if err != nil {
		return protocol.ProduceResponse{}, protocol.CorruptRecord.Err("%v", err)
	}
	it := record.NewIterator(append([]byte(nil), batch...))
	var recs []record.Record
	for it.Next() {
		r := *it.Record()
		recs = append(recs, record.Record{Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value), Headers: append([]record.RecordHeader(nil), r.Headers...)})
	}
	if it.Err() != nil {
		return protocol.ProduceResponse{}, protocol.CorruptRecord.Err("%v", it.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s/%d", req.Topic, req.Partition)
	s.hits[addr+" "+k]++
	if s.fail != nil {
		if err := s.fail(addr, req, s.hits[addr+" "+k]); err != nil {
			return protocol.ProduceResponse{}, err
		}
	}
	base := s.next[k]
	s.next[k] = base + int64(h.RecordCount)
	s.log = append(s.log, sent{addr: addr, req: *req, recs: recs})
	return protocol.ProduceResponse{BaseOffset: base, LastOffset: base + int64(h.RecordCount) - 1}, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func testProducer(t *testing.T, meta Metadata, send Sender) *Producer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RetryBackoff = time.Millisecond
	cfg.MaxRetryBackoff = 5 * time.Millisecond
	cfg.Retries = 3
	p, err := NewProducer(cfg, meta, send, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProduceResultsInRequestOrder(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "a:1", "b:1", "a:1")
	snd := newFakeSender()
	p := testProducer(t, meta, snd)
	p.now = func() time.Time { return time.UnixMilli(1234) }

	recs := []Input{explicit(1), explicit(0), explicit(9), explicit(1), explicit(2), explicit(0)}
	recs[0].Timestamp = 99
	res, err := p.Produce(context.Background(), "t", protocol.AcksAll, recs)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{{Partition: 1, Offset: 0}, {Partition: 0, Offset: 0}, {Partition: 9}, {Partition: 1, Offset: 1}, {Partition: 2, Offset: 0}, {Partition: 0, Offset: 1}}
	for i := range want {
		if i == 2 {
			if protocol.CodeOf(res[i].Err) != protocol.UnknownTopicOrPartition || res[i].Partition != 9 {
				t.Errorf("record 2: %+v, want a per-record UNKNOWN_TOPIC_OR_PARTITION", res[i])
			}
			continue
		}
		if res[i].Err != nil || res[i].Partition != want[i].Partition || res[i].Offset != want[i].Offset {
			t.Errorf("record %d: %+v, want %+v", i, res[i], want[i])
		}
	}
	// One batch per partition, to that partition's leader.
	if len(snd.log) != 3 {
		t.Fatalf("%d requests, want 3", len(snd.log))
	}
	for _, s := range snd.log {
		wantAddr := []string{"a:1", "b:1", "a:1"}[s.req.Partition]
		if s.addr != wantAddr || s.req.Acks != protocol.AcksAll || s.req.TimeoutMs <= 0 {
			t.Errorf("request %+v to %s", s.req, s.addr)
		}
		if s.req.Partition == 1 && (s.recs[0].Timestamp != 99 || s.recs[1].Timestamp != 1234) {
			t.Errorf("timestamps %d, %d; want the record's, then now", s.recs[0].Timestamp, s.recs[1].Timestamp)
		}
	}
	if got := testutil.ToFloat64(p.metrics.Records.WithLabelValues("ok")); got != 5 {
		t.Errorf("ok records metric %v", got)
	}
}

func TestProduceRetriesAfterNotLeader(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "old:1")
	meta.onRefresh = func(m *fakeMeta) { m.set("t", "new:1") }
	snd := newFakeSender()
	snd.fail = func(addr string, _ *protocol.ProduceRequest, _ int) error {
		if addr == "old:1" {
			return protocol.NotLeaderOrFollower.Err("not the leader")
		}
		return nil
	}
	p := testProducer(t, meta, snd)
	res, err := p.Produce(context.Background(), "t", protocol.AcksLeader, []Input{keyless(), keyless()})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Offset != int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if len(snd.log) != 1 || snd.log[0].addr != "new:1" {
		t.Fatalf("appended %+v, want one batch on new:1", snd.log)
	}
	if meta.refreshes != 1 || testutil.ToFloat64(p.metrics.Retries) != 1 {
		t.Fatalf("refreshes %d, retries %v", meta.refreshes, testutil.ToFloat64(p.metrics.Retries))
	}
}

func TestProduceGivesUpAfterRetries(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "a:1")
	snd := newFakeSender()
	snd.fail = func(string, *protocol.ProduceRequest, int) error { return protocol.NetworkException.Err("down") }
	p := testProducer(t, meta, snd)
	res, err := p.Produce(context.Background(), "t", protocol.AcksAll, []Input{keyed("k")})
	if err != nil {
		t.Fatal(err)
	}
	if protocol.CodeOf(res[0].Err) != protocol.NetworkException {
		t.Fatalf("result %+v", res[0])
	}
	if got := snd.hits["a:1 t/"+fmt.Sprint(res[0].Partition)]; got != 4 {
		t.Fatalf("%d attempts, want 1 + 3 retries", got)
	}
}

func TestProduceDoesNotRetryFinalErrors(t *testing.T) {
	for _, code := range []protocol.Code{protocol.InvalidRecord, protocol.MessageTooLarge, protocol.RequestTimedOut, protocol.NotEnoughReplicasAfterAppend} {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		snd.fail = func(string, *protocol.ProduceRequest, int) error { return code.Err("no") }
		p := testProducer(t, meta, snd)
		res, _ := p.Produce(context.Background(), "t", protocol.AcksAll, []Input{explicit(0)})
		if protocol.CodeOf(res[0].Err) != code || snd.hits["a:1 t/0"] != 1 {
			t.Errorf("%v: result %+v after %d attempts", code, res[0], snd.hits["a:1 t/0"])
		}
	}
}

func TestProduceLeaderlessPartitionWaitsForLeader(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "")
	meta.onRefresh = func(m *fakeMeta) { m.set("t", "a:1") }
	snd := newFakeSender()
	p := testProducer(t, meta, snd)
	res, err := p.Produce(context.Background(), "t", protocol.AcksAll, []Input{explicit(0)})
	if err != nil || res[0].Err != nil {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestProduceUnknownTopic(t *testing.T) {
	meta := newFakeMeta()
	meta.set("other", "a:1")
	p := testProducer(t, meta, newFakeSender())
	_, err := p.Produce(context.Background(), "missing", protocol.AcksAll, []Input{keyless()})
	if !errors.Is(err, ErrUnknownTopic) || protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("err %v", err)
	}
	if meta.refreshes != 1 {
		t.Fatalf("%d refreshes, want one before answering unknown", meta.refreshes)
	}
	// A topic created elsewhere a moment ago is found by that refresh.
	meta.onRefresh = func(m *fakeMeta) { m.set("fresh", "a:1") }
	if _, err := p.Produce(context.Background(), "fresh", protocol.AcksAll, []Input{keyless()}); err != nil {
		t.Fatalf("fresh topic: %v", err)
	}
	meta.fail = errors.New("metadata down")
	if _, err := p.Produce(context.Background(), "gone", protocol.AcksAll, []Input{keyless()}); !errors.Is(err, ErrMetadataUnavailable) {
		t.Fatalf("metadata down: %v", err)
	}
}

func TestProduceKeepsRecordContents(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "a:1")
	snd := newFakeSender()
	p := testProducer(t, meta, snd)
	in := Input{Record: record.Record{Key: []byte{}, Value: nil, Timestamp: 5,
		Headers: []record.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "n"}}}}
	if _, err := p.Produce(context.Background(), "t", protocol.AcksNone, []Input{in}); err != nil {
		t.Fatal(err)
	}
	got := snd.log[0].recs[0]
	if got.Key == nil || len(got.Key) != 0 || got.Value != nil || got.Timestamp != 5 ||
		len(got.Headers) != 2 || string(got.Headers[0].Value) != "x" || got.Headers[1].Value != nil {
		t.Fatalf("record on the leader: %+v", got)
	}
	if snd.log[0].req.Acks != protocol.AcksNone {
		t.Fatalf("acks %d", snd.log[0].req.Acks)
	}
}

// TestProduceAfterAnUnansweredAttemptIsOutcomeUnknown: an attempt that got
// no answer may have been stored; when the retries then end on a refusal,
// that refusal speaks for the last attempt only, so the record's outcome is
// reported unknown (REQUEST_TIMED_OUT), not as the refusal. Refusals of every
// attempt stay what they are.
func TestProduceAfterAnUnansweredAttemptIsOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		firstErr error
		want     protocol.Code
	}{
		{"first attempt unanswered", protocol.NetworkException.Err("connection lost"), protocol.RequestTimedOut},
		{"first attempt never sent", neverSent{protocol.NetworkException.Err("connection refused")}, protocol.NotEnoughReplicas},
		{"every attempt refused", protocol.NotEnoughReplicas.Err("first attempt"), protocol.NotEnoughReplicas},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := newFakeMeta()
			meta.set("t", "a:1")
			snd := newFakeSender()
			snd.fail = func(_ string, _ *protocol.ProduceRequest, attempt int) error {
				if attempt == 1 {
					return tc.firstErr
				}
				return protocol.NotEnoughReplicas.Err("the ISR shrank below min.insync.replicas")
			}
			p := testProducer(t, meta, snd)
			res, err := p.Produce(context.Background(), "t", protocol.AcksAll, []Input{explicit(0)})
			if (tc.want == protocol.RequestTimedOut) != errors.Is(err, ErrTimedOut) {
				t.Fatalf("Produce: %v", err)
			}
			if got := protocol.CodeOf(res[0].Err); got != tc.want {
				t.Fatalf("result %v (%v), want %v", got, res[0].Err, tc.want)
			}
			if tc.want == protocol.RequestTimedOut && !strings.Contains(res[0].Err.Error(), "outcome unknown") {
				t.Fatalf("result %v does not say the outcome is unknown", res[0].Err)
			}
		})
	}
}
