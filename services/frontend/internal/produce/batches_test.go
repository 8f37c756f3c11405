package produce

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// buildBatch returns a RecordBatch v2 holding the values, as the SDK builds it.
func buildBatch(t testing.TB, values ...string) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	for _, v := range values {
		b.Append(record.Record{Timestamp: 1, Value: []byte(v)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// orderSender wraps a Sender and fails the test when two requests for one
// partition are in flight together. It runs in a synctest bubble: each
// request waits a moment of the bubble's clock, which moves only once every
// other goroutine of the bubble is blocked, so a request that would overlap
// has been sent by then.
type orderSender struct {
	t        *testing.T
	inner    Sender
	mu       sync.Mutex
	inFlight map[int32]bool
}

func (s *orderSender) Produce(ctx context.Context, addr string, req *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error) {
	s.mu.Lock()
	if s.inFlight[req.Partition] {
		s.t.Errorf("two batches of partition %d in flight together", req.Partition)
	}
	s.inFlight[req.Partition] = true
	s.mu.Unlock()
	<-time.After(time.Millisecond)
	defer func() {
		s.mu.Lock()
		s.inFlight[req.Partition] = false
		s.mu.Unlock()
	}()
	return s.inner.Produce(ctx, addr, req, batch)
}

func TestProduceBatchesInBodyOrder(t *testing.T) {
	synctest.Test(t, testProduceBatchesInBodyOrder)
}

func testProduceBatchesInBodyOrder(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "a:1", "b:1")
	snd := newFakeSender()
	p := testProducer(t, meta, &orderSender{t: t, inner: snd, inFlight: map[int32]bool{}})
	body := []frontendapi.PartitionBatch{
		{Partition: 0, Batch: buildBatch(t, "p0-a", "p0-b")},
		{Partition: 1, Batch: buildBatch(t, "p1-a")},
		{Partition: 0, Batch: buildBatch(t, "p0-c")},
		{Partition: 5, Batch: buildBatch(t, "nowhere")},
		{Partition: 0, Batch: buildBatch(t, "p0-d", "p0-e", "p0-f")},
	}
	if n, _, err := CheckBatches(body); err != nil || n != 8 {
		t.Fatalf("check: %d records, %v", n, err)
	}
	res, err := p.ProduceBatches(context.Background(), "t", protocol.AcksAll, body)
	if err != nil {
		t.Fatal(err)
	}
	want := []frontendapi.BatchResult{{Partition: 0, BaseOffset: 0}, {Partition: 1, BaseOffset: 0}, {Partition: 0, BaseOffset: 2},
		{Partition: 5, BaseOffset: -1, ErrorCode: int16(protocol.UnknownTopicOrPartition)}, {Partition: 0, BaseOffset: 3}}
	for i := range want {
		if res[i].Partition != want[i].Partition || res[i].BaseOffset != want[i].BaseOffset || res[i].ErrorCode != want[i].ErrorCode {
			t.Errorf("batch %d: %+v, want %+v", i, res[i], want[i])
		}
	}
	var p0 []string
	for _, s := range snd.log {
		if s.req.Partition == 0 {
			if s.addr != "a:1" {
				t.Errorf("partition 0 sent to %s", s.addr)
			}
			for _, r := range s.recs {
				p0 = append(p0, string(r.Value))
			}
		}
	}
	if got := strings.Join(p0, ","); got != "p0-a,p0-b,p0-c,p0-d,p0-e,p0-f" {
		t.Fatalf("partition 0 holds %s", got)
	}
	if ok := testutil.ToFloat64(p.metrics.Records.WithLabelValues("ok")); ok != 7 {
		t.Errorf("ok records metric %v, want 7", ok)
	}
}

func TestProduceBatchesStopsAPartitionAtItsFirstFailure(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "a:1", "a:1")
	snd := newFakeSender()
	snd.fail = func(_ string, req *protocol.ProduceRequest, attempt int) error {
		if req.Partition == 0 && attempt == 2 {
			return protocol.CorruptRecord.Err("CRC mismatch")
		}
		return nil
	}
	p := testProducer(t, meta, snd)
	body := []frontendapi.PartitionBatch{
		{Partition: 0, Batch: buildBatch(t, "a")}, {Partition: 0, Batch: buildBatch(t, "b")},
		{Partition: 1, Batch: buildBatch(t, "x")}, {Partition: 0, Batch: buildBatch(t, "c")}, {Partition: 1, Batch: buildBatch(t, "y")},
	}
	res, err := p.ProduceBatches(context.Background(), "t", protocol.AcksAll, body)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ErrorCode != 0 || res[2].ErrorCode != 0 || res[4].ErrorCode != 0 || res[4].BaseOffset != 1 {
		t.Fatalf("results %+v", res)
	}
	if res[1].ErrorCode != int16(protocol.CorruptRecord) || snd.hits["a:1 t/0"] != 2 {
		t.Fatalf("corrupt batch: %+v after %d attempts (CORRUPT_RECORD is not retried)", res[1], snd.hits["a:1 t/0"])
	}
	if res[3].ErrorCode != int16(protocol.CorruptRecord) || !strings.Contains(res[3].Error, "not sent: batch 1 of partition 0") {
		t.Fatalf("batch after the failure: %+v", res[3])
	}
}

func TestProduceBatchesRetryAfterNotLeaderKeepsOrder(t *testing.T) {
	meta := newFakeMeta()
	meta.set("t", "old:1")
	meta.onRefresh = func(m *fakeMeta) { m.set("t", "new:1") }
	snd := newFakeSender()
	snd.fail = func(addr string, _ *protocol.ProduceRequest, _ int) error {
		if addr == "old:1" {
			return protocol.NotLeaderOrFollower.Err("moved")
		}
		return nil
	}
	p := testProducer(t, meta, snd)
	body := []frontendapi.PartitionBatch{{Partition: 0, Batch: buildBatch(t, "1")}, {Partition: 0, Batch: buildBatch(t, "2")}}
	res, err := p.ProduceBatches(context.Background(), "t", protocol.AcksAll, body)
	if err != nil || res[0].BaseOffset != 0 || res[1].BaseOffset != 1 || res[1].ErrorCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if len(snd.log) != 2 || snd.log[0].addr != "new:1" || snd.log[1].addr != "new:1" || string(snd.log[1].recs[0].Value) != "2" {
		t.Fatalf("log %+v", snd.log)
	}
	if snd.hits["old:1 t/0"] != 1 {
		t.Fatalf("old leader tried %d times: the second batch must go to the new leader", snd.hits["old:1 t/0"])
	}
}

func TestCheckBatches(t *testing.T) {
	good := buildBatch(t, "v")
	badMagic := append([]byte(nil), good...)
	badMagic[16] = 1
	for name, tc := range map[string]struct {
		batches []frontendapi.PartitionBatch
		want    error
		reason  string
	}{
		"no batch":      {nil, ErrMalformed, "no batch"},
		"short":         {[]frontendapi.PartitionBatch{{Batch: good[:20]}}, ErrBadBatch, "need 61"},
		"magic":         {[]frontendapi.PartitionBatch{{Batch: badMagic}}, ErrBadBatch, "magic 1"},
		"truncated":     {[]frontendapi.PartitionBatch{{Batch: good[:len(good)-1]}}, ErrBadBatch, "truncated"},
		"two in one":    {[]frontendapi.PartitionBatch{{Partition: 3, Batch: append(append([]byte(nil), good...), good...)}}, ErrBadBatch, "partition 3"},
		"second is bad": {[]frontendapi.PartitionBatch{{Batch: good}, {Batch: []byte("x")}}, ErrBadBatch, "batch 1"},
	} {
		_, _, err := CheckBatches(tc.batches)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v, want %v saying %q", name, err, tc.want, tc.reason)
		}
	}
}

// stallSender answers requests for the partitions in stall only when their
// context ends, as storageclient does, and passes the rest on.
type stallSender struct {
	inner Sender
	stall map[int32]bool
}

func (s stallSender) Produce(ctx context.Context, addr string, req *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error) {
	if s.stall[req.Partition] {
		<-ctx.Done()
		return protocol.ProduceResponse{}, protocol.RequestTimedOut.Err("%v", ctx.Err())
	}
	return s.inner.Produce(ctx, addr, req, batch)
}

func timeoutProducer(t *testing.T, stall ...int32) *Producer {
	meta := newFakeMeta()
	meta.set("t", "a:1", "a:1")
	st := stallSender{inner: newFakeSender(), stall: map[int32]bool{}}
	for _, p := range stall {
		st.stall[p] = true
	}
	cfg := DefaultConfig()
	cfg.Timeout = 50 * time.Millisecond
	p, err := NewProducer(cfg, meta, st, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProduceTimeoutKeepsWhatIsKnown(t *testing.T) {
	p := timeoutProducer(t, 1)
	res, err := p.Produce(context.Background(), "t", protocol.AcksAll, []Input{explicit(0), explicit(1), explicit(0)})
	if !errors.Is(err, ErrTimedOut) || protocol.CodeOf(err) != protocol.RequestTimedOut {
		t.Fatalf("err %v", err)
	}
	if res[0].Err != nil || res[2].Err != nil || res[2].Offset != 1 {
		t.Fatalf("acknowledged records lost their offsets: %+v", res)
	}
	if protocol.CodeOf(res[1].Err) != protocol.RequestTimedOut || !strings.Contains(res[1].Err.Error(), "outcome unknown") {
		t.Fatalf("stalled record: %v", res[1].Err)
	}
}

func TestProduceBatchesTimeout(t *testing.T) {
	p := timeoutProducer(t, 1)
	body := []frontendapi.PartitionBatch{
		{Partition: 1, Batch: buildBatch(t, "stalls")}, {Partition: 0, Batch: buildBatch(t, "ok")}, {Partition: 1, Batch: buildBatch(t, "waits")},
	}
	res, err := p.ProduceBatches(context.Background(), "t", protocol.AcksAll, body)
	if !errors.Is(err, ErrTimedOut) {
		t.Fatalf("err %v", err)
	}
	if res[1].ErrorCode != 0 || res[1].BaseOffset != 0 {
		t.Fatalf("acknowledged batch: %+v", res[1])
	}
	if res[0].ErrorCode != int16(protocol.RequestTimedOut) || !strings.Contains(res[0].Error, "outcome unknown") {
		t.Fatalf("stalled batch: %+v", res[0])
	}
	if res[2].ErrorCode != int16(protocol.RequestTimedOut) || !strings.Contains(res[2].Error, "not sent") {
		t.Fatalf("queued batch: %+v", res[2])
	}
}

func TestStorageTimeoutLeavesAMargin(t *testing.T) {
	for _, whole := range []time.Duration{20 * time.Millisecond, time.Second, 30 * time.Second} {
		ctx, cancel := context.WithTimeout(context.Background(), whole)
		got := time.Duration(storageTimeoutMs(ctx, whole)) * time.Millisecond
		cancel()
		if got >= whole || got < whole*8/10 {
			t.Errorf("%v: storage timeout %v", whole, got)
		}
	}
}

func TestBudget(t *testing.T) {
	m := NewMetrics(nil)
	b := NewBudget(100, m)
	if !b.TryAcquire(60) || !b.TryAcquire(40) {
		t.Fatal("within budget refused")
	}
	if b.TryAcquire(1) {
		t.Fatal("over budget accepted")
	}
	if g, n := testutil.ToFloat64(m.InFlightBytes), testutil.ToFloat64(m.Throttled); g != 100 || n != 1 {
		t.Fatalf("gauge %v, throttled %v", g, n)
	}
	b.Release(60)
	if !b.TryAcquire(0) || !b.TryAcquire(60) || b.InUse() != 100 {
		t.Fatalf("after release: in use %d", b.InUse())
	}
	var wg sync.WaitGroup
	b = NewBudget(1000, NewMetrics(nil))
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				if b.TryAcquire(100) {
					if u := b.InUse(); u > 1000 {
						t.Errorf("in use %d over the budget", u)
					}
					b.Release(100)
				}
			}
		}()
	}
	wg.Wait()
	if b.InUse() != 0 {
		t.Fatalf("in use %d after all released", b.InUse())
	}
}
