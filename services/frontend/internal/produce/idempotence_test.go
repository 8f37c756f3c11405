package produce

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// fakeIDs hands out producer ids 100, 101, ... unless down.
type fakeIDs struct {
	mu    sync.Mutex
	calls int   // guarded by mu
	next  int64 // guarded by mu
	down  bool  // guarded by mu
}

func (f *fakeIDs) InitProducerID(context.Context) (cluster.InitProducerIDResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return cluster.InitProducerIDResponse{}, protocol.NotController.Err("metadata is down")
	}
	f.next++
	return cluster.InitProducerIDResponse{ProducerID: 99 + f.next, ProducerEpoch: 0}, nil
}

func (f *fakeIDs) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeIDs) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// syncBuffer is a log destination safe for the lanes' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// idemEnv is a lingering producer in front of a fake storage node (a real
// socket, storageclient's connection handling) that leads partition 0 of
// topic "t", with producer ids from ids.
type idemEnv struct {
	p    *Producer
	node *fakecluster.Storage
	ids  *fakeIDs
	log  *syncBuffer
}

func newIdemEnv(t *testing.T) *idemEnv {
	t.Helper()
	node, err := fakecluster.NewStorage()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	pool := storageclient.NewPool("test-idempotence")
	t.Cleanup(func() { _ = pool.Close() })
	meta := newFakeMeta()
	meta.set("t", node.Addr())
	cfg := DefaultConfig()
	cfg.Linger = time.Millisecond
	cfg.RetryBackoff = time.Millisecond
	cfg.MaxRetryBackoff = 5 * time.Millisecond
	cfg.Retries = 3
	e := &idemEnv{node: node, ids: &fakeIDs{}, log: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if e.p, err = NewProducer(cfg, meta, PoolSender{Pool: pool}, e.ids, nil, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.p.Close) // before the pool closes
	return e
}

// produce sends values to partition 0 and returns their results.
func (e *idemEnv) produce(t *testing.T, vs ...string) []Result {
	t.Helper()
	res, err := e.p.Produce(context.Background(), "t", protocol.AcksAll, values(0, vs...))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// appended describes the node's log of partition 0: each produce request it
// appended as "values@producerID/sequence".
func (e *idemEnv) appended() string {
	var out []string
	for _, a := range e.node.Appended("t", 0) {
		var vs []string
		for _, r := range a.Records {
			vs = append(vs, string(r.Value))
		}
		out = append(out, fmt.Sprintf("%s@%d:%d/%d", strings.Join(vs, ","), a.ProducerID, a.ProducerEpoch, a.BaseSequence))
	}
	return strings.Join(out, " ")
}

func offsetsOf(t *testing.T, res []Result) []int64 {
	t.Helper()
	out := make([]int64, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("record %d: %v", i, r.Err)
		}
		out[i] = r.Offset
	}
	return out
}

// TestLaneResendAfterLostAnswerIsDeduplicated: the leader appends a lane's
// batch but its answer is lost with the connection; the lane resends the
// same stamped batch on a new connection, the leader answers it as a
// duplicate with the first offsets, and the log holds it once, before the
// lane's next batch.
func TestLaneResendAfterLostAnswerIsDeduplicated(t *testing.T) {
	e := newIdemEnv(t)
	e.node.SetLoseAnswer(func(_ *protocol.ProduceRequest, attempt int) bool { return attempt == 1 })
	if got := offsetsOf(t, e.produce(t, "a", "b")); got[0] != 0 || got[1] != 1 {
		t.Fatalf("first batch at %v", got)
	}
	if got := offsetsOf(t, e.produce(t, "c")); got[0] != 2 {
		t.Fatalf("next batch at %v", got)
	}
	if got, want := e.appended(), "a,b@100:0/0 c@100:0/2"; got != want {
		t.Fatalf("log holds %q, want %q", got, want)
	}
	if n := e.node.Attempts("t", 0); n != 3 {
		t.Fatalf("%d produce requests reached the node, want 3 (one resend)", n)
	}
	if n := e.ids.count(); n != 1 {
		t.Fatalf("%d producer ids allocated, want 1", n)
	}
}

// TestLanePermanentFailureRaisesTheEpoch: once a lane's batch failed for
// good its sequence is in doubt, and the lane's next batch raises its
// producer id's epoch and starts at sequence 0 (the leader then refuses a
// late copy of the failed batch, of the older epoch); no new id is needed.
func TestLanePermanentFailureRaisesTheEpoch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reject func(attempt int) error
	}{
		{"not retriable", func(attempt int) error {
			if attempt == 2 {
				return protocol.InvalidRecord.Err("refused")
			}
			return nil
		}},
		{"retries exhausted", func(attempt int) error {
			if attempt >= 2 && attempt <= 5 { // the first send and its 3 retries
				return protocol.NotEnoughReplicas.Err("ISR too small")
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newIdemEnv(t)
			e.node.SetReject(func(_ *protocol.ProduceRequest, attempt int) error { return tc.reject(attempt) })
			offsetsOf(t, e.produce(t, "a", "b"))
			if res := e.produce(t, "x"); res[0].Err == nil {
				t.Fatalf("refused batch answered %+v", res[0])
			}
			offsetsOf(t, e.produce(t, "c"))
			offsetsOf(t, e.produce(t, "d"))
			if got, want := e.appended(), "a,b@100:0/0 c@100:1/0 d@100:1/1"; got != want {
				t.Fatalf("log holds %q, want %q", got, want)
			}
			if n := e.ids.count(); n != 1 {
				t.Fatalf("%d producer ids allocated, want 1", n)
			}
		})
	}
}

// TestLaneWithoutProducerIDsSendsUnstamped: while metadata hands out no
// producer id the lanes still produce, without one (at-least-once), logging
// one warning; once ids come back the lanes stamp their batches again.
func TestLaneWithoutProducerIDsSendsUnstamped(t *testing.T) {
	e := newIdemEnv(t)
	e.p.ids.cooldown = 0 // ask on every batch: the warning must still be one
	e.ids.setDown(true)
	for _, v := range []string{"a", "b", "c"} {
		offsetsOf(t, e.produce(t, v))
	}
	if n := e.ids.count(); n != 3*pidAttempts {
		t.Fatalf("%d allocation calls, want %d", n, 3*pidAttempts)
	}
	e.ids.setDown(false)
	offsetsOf(t, e.produce(t, "d"))
	offsetsOf(t, e.produce(t, "e"))
	noID := fmt.Sprintf("%d:%d/%d", record.NoProducerID, record.NoProducerEpoch, record.NoSequence)
	if got, want := e.appended(), "a@"+noID+" b@"+noID+" c@"+noID+" d@100:0/0 e@100:0/1"; got != want {
		t.Fatalf("log holds %q, want %q", got, want)
	}
	logged := e.log.String()
	if n := strings.Count(logged, "no producer id from metadata"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logged)
	}
	if !strings.Contains(logged, "producer ids available again") {
		t.Fatalf("recovery not logged:\n%s", logged)
	}
}

// TestProducerIDCooldown: after a failed allocation lanes do not ask again
// before the cooldown, so a metadata outage does not cost every batch an
// allocation's wait.
func TestProducerIDCooldown(t *testing.T) {
	ids := &fakeIDs{down: true}
	s := &pidSource{src: ids, log: slog.New(slog.DiscardHandler), backoff: time.Millisecond, timeout: time.Second, cooldown: time.Hour}
	for range 3 {
		if _, _, ok := s.get(context.Background()); ok {
			t.Fatal("an id from a source that is down")
		}
	}
	if ids.count() != pidAttempts {
		t.Fatalf("%d calls, want %d", ids.count(), pidAttempts)
	}
	// A batch whose requests gave up does not count as metadata's failure.
	s = &pidSource{src: ids, log: slog.New(slog.DiscardHandler), backoff: time.Millisecond, timeout: time.Second, cooldown: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, ok := s.get(ctx); ok || !s.retryAt.IsZero() {
		t.Fatalf("cancelled allocation: ok %v, retry at %v", ok, s.retryAt)
	}
	ids.setDown(false)
	if id, _, ok := s.get(context.Background()); !ok || id != 100 {
		t.Fatalf("id %d ok %v", id, ok)
	}
	var nilSource pidSource
	if _, _, ok := nilSource.get(context.Background()); ok {
		t.Fatal("an id without a source")
	}
}

// TestLaneAtTheLargestEpochTakesANewID: a lane whose epoch cannot be raised
// any more takes a new producer id instead.
func TestLaneAtTheLargestEpochTakesANewID(t *testing.T) {
	s := laneSeq{id: 7, epoch: math.MaxInt16, seq: 12}
	s.sent(3, protocol.NotEnoughReplicas.Err("ISR too small"))
	if s.id != record.NoProducerID || s.seq != 0 {
		t.Fatalf("lane after a failure at the largest epoch: %+v, want no id", s)
	}
	s = laneSeq{id: 7, epoch: 4, seq: 12}
	s.sent(3, protocol.NotEnoughReplicas.Err("ISR too small"))
	if s != (laneSeq{id: 7, epoch: 5, seq: 0}) {
		t.Fatalf("lane after a failure: %+v, want id 7 epoch 5 sequence 0", s)
	}
}
