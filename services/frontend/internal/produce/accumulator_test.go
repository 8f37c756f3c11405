package produce

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// gateSender passes requests on to inner, holding those that hold picks (by
// call number, from 1) until release is closed or their context ends, as a
// storage call would. Every call is announced on arrived first.
type gateSender struct {
	inner   Sender
	hold    func(call int) bool
	arrived chan int
	release chan struct{}

	mu    sync.Mutex
	calls int // guarded by mu
}

func newGateSender(inner Sender, hold func(call int) bool) *gateSender {
	return &gateSender{inner: inner, hold: hold, arrived: make(chan int, 1000), release: make(chan struct{})}
}

func (s *gateSender) Produce(ctx context.Context, addr string, req *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	s.arrived <- n
	if s.hold(n) {
		select {
		case <-s.release:
		case <-ctx.Done():
			return protocol.ProduceResponse{}, protocol.RequestTimedOut.Err("%v", ctx.Err())
		}
	}
	return s.inner.Produce(ctx, addr, req, batch)
}

func lingerProducer(t testing.TB, meta Metadata, send Sender, tune func(*Config)) *Producer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Linger = 5 * time.Millisecond
	cfg.RetryBackoff = time.Millisecond
	cfg.MaxRetryBackoff = 5 * time.Millisecond
	cfg.Retries = 3
	if tune != nil {
		tune(&cfg)
	}
	p, err := NewProducer(cfg, meta, send, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// queued returns the records waiting in a lane (-1: no lane).
func queued(p *Producer, k laneKey) int {
	p.acc.mu.Lock()
	l := p.acc.lanes[k]
	p.acc.mu.Unlock()
	if l == nil {
		return -1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	if l.open != nil {
		n = l.open.count
	}
	for _, b := range l.full {
		n += b.count
	}
	return n
}

// values returns explicit-partition records with the given values.
func values(part int32, vs ...string) []Input {
	out := make([]Input, len(vs))
	for i, v := range vs {
		out[i] = Input{Record: record.Record{Value: []byte(v)}, Partition: part, Explicit: true}
	}
	return out
}

// stored maps each record the fake leader appended to partition part to its
// offset, by value.
func stored(snd *fakeSender, topic string, part int32) map[string]int64 {
	snd.mu.Lock()
	defer snd.mu.Unlock()
	at := map[string]int64{}
	var next int64
	for _, s := range snd.log {
		if s.req.Topic != topic || s.req.Partition != part {
			continue
		}
		for _, r := range s.recs {
			at[string(r.Value)] = next
			next++
		}
	}
	return at
}

// histogram returns a histogram's sample count and sum.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0].GetHistogram()
	return m.GetSampleCount(), m.GetSampleSum()
}

// The linger tests run on testing/synctest's clock: lingers, request
// timeouts and retry back-offs pass at once and in a fixed order, with the
// in-process fakes of the metadata and the storage call.

func TestLingerSharesABatchAcrossRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		gate := newGateSender(snd, func(call int) bool { return call == 1 })
		p := lingerProducer(t, meta, gate, nil)

		// The first request's batch is held on the leader; ten more requests
		// gather behind it into the partition's open batch.
		first := make(chan []Result, 1)
		go func() {
			res, _ := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, "first"))
			first <- res
		}()
		<-gate.arrived
		const n = 10
		got := make([][]Result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, fmt.Sprintf("r%d-a", i), fmt.Sprintf("r%d-b", i)))
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
				got[i] = res
			})
		}
		testkit.WaitFor(t, 5*time.Second, "every request in the open batch", func() bool { return queued(p, laneKey{"t", 0, protocol.AcksAll}) == 2*n })
		close(gate.release)
		wg.Wait()
		if res := <-first; res[0].Err != nil || res[0].Offset != 0 {
			t.Fatalf("first request: %+v", res)
		}
		if len(snd.log) != 2 || len(snd.log[1].recs) != 2*n {
			t.Fatalf("%d batches sent, want the first and one shared by %d requests", len(snd.log), n)
		}
		at := stored(snd, "t", 0)
		for i, res := range got {
			for j, r := range res {
				v := fmt.Sprintf("r%d-%c", i, 'a'+j)
				if r.Err != nil || r.Partition != 0 || r.Offset != at[v] {
					t.Errorf("request %d record %d: %+v, stored at %d", i, j, r, at[v])
				}
			}
			if res[1].Offset != res[0].Offset+1 {
				t.Errorf("request %d out of order: %+v", i, res)
			}
		}
		if count, sum := histogram(t, p.metrics.BatchRecords); count != 2 || sum != 2*n+1 {
			t.Fatalf("batch records histogram: %d batches, %v records", count, sum)
		}
	})
}

func TestLingerKeepsAcksLevelsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		p := lingerProducer(t, meta, snd, func(c *Config) { c.Linger = 50 * time.Millisecond })
		var wg sync.WaitGroup
		for _, acks := range []int8{protocol.AcksAll, protocol.AcksLeader, protocol.AcksAll, protocol.AcksNone} {
			wg.Go(func() {
				if _, err := p.Produce(context.Background(), "t", acks, values(0, fmt.Sprint(acks))); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		perAcks := map[int8]int{}
		for _, s := range snd.log {
			for _, r := range s.recs {
				if string(r.Value) != fmt.Sprint(s.req.Acks) {
					t.Errorf("record %q sent with acks %d", r.Value, s.req.Acks)
				}
			}
			perAcks[s.req.Acks]++
		}
		if len(perAcks) != 3 || len(snd.log) > 4 {
			t.Fatalf("batches per acks %v", perAcks)
		}
	})
}

func TestLingerSplitsLargeRequestsAndStopsAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		p := lingerProducer(t, meta, snd, func(c *Config) { c.BatchMaxBytes = 1024 })
		val := strings.Repeat("v", 90)
		var vs []string
		for i := range 40 {
			vs = append(vs, fmt.Sprintf("%02d%s", i, val))
		}
		res, err := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, vs...))
		if err != nil {
			t.Fatal(err)
		}
		if len(snd.log) < 4 {
			t.Fatalf("%d batches for 40 records of 92 bytes under 1 KiB", len(snd.log))
		}
		var order []string
		for _, s := range snd.log {
			b := record.NewBuilder(record.CodecNone)
			for _, r := range s.recs {
				b.Append(r)
				order = append(order, string(r.Value))
			}
			if b.Size() > 1024 {
				t.Errorf("a batch of %d bytes", b.Size())
			}
		}
		if strings.Join(order, ",") != strings.Join(vs, ",") {
			t.Fatal("the split batches do not hold the records in request order")
		}
		for i, r := range res {
			if r.Err != nil || r.Offset != int64(i) {
				t.Fatalf("record %d: %+v", i, r)
			}
		}

		// The second batch of a request fails for good: the first keeps its
		// offsets, the rest are not sent and carry the failure's code.
		before := len(snd.log)
		snd.fail = func(_ string, _ *protocol.ProduceRequest, attempt int) error {
			if attempt == before+2 {
				return protocol.InvalidRecord.Err("refused")
			}
			return nil
		}
		res, err = p.Produce(context.Background(), "t", protocol.AcksAll, values(0, vs...))
		if err != nil {
			t.Fatal(err)
		}
		if len(snd.log) != before+1 {
			t.Fatalf("%d batches appended after the failure, want only the first", len(snd.log)-before)
		}
		firstLen := len(snd.log[before].recs)
		notSent := 0 // where the records of the batches after the failed one start
		for i, r := range res {
			switch {
			case i < firstLen:
				if r.Err != nil || r.Offset != 40+int64(i) {
					t.Fatalf("record %d of the first batch: %+v", i, r)
				}
			case protocol.CodeOf(r.Err) != protocol.InvalidRecord:
				t.Fatalf("record %d: %v, want INVALID_RECORD", i, r.Err)
			case strings.Contains(r.Err.Error(), "not sent"):
				if notSent == 0 {
					notSent = i
				}
			case notSent > 0:
				t.Fatalf("record %d: %v after records not sent", i, r.Err)
			}
		}
		if notSent <= firstLen+1 {
			t.Fatalf("records not sent from %d on, the failed batch started at %d", notSent, firstLen)
		}
	})
}

func TestLingerRecordsStillQueuedWhenTimeRunsOutAreNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		gate := newGateSender(snd, func(call int) bool { return call == 1 })
		p := lingerProducer(t, meta, gate, nil)
		first := make(chan []Result, 1)
		go func() {
			res, _ := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, "held"))
			first <- res
		}()
		<-gate.arrived

		// This request's records wait behind the held batch until its own
		// (shorter) time runs out.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res, err := p.Produce(ctx, "t", protocol.AcksAll, values(0, "late-1", "late-2"))
		if !errors.Is(err, ErrTimedOut) {
			t.Fatalf("err %v", err)
		}
		for _, r := range res {
			if protocol.CodeOf(r.Err) != protocol.RequestTimedOut || !strings.Contains(r.Err.Error(), "not sent") {
				t.Fatalf("queued record: %+v", r)
			}
		}
		close(gate.release)
		if r := <-first; r[0].Err != nil {
			t.Fatalf("held request: %+v", r)
		}
		testkit.WaitFor(t, 5*time.Second, "the lane to empty", func() bool { return queued(p, laneKey{"t", 0, protocol.AcksAll}) == -1 })
		if len(snd.log) != 1 || string(snd.log[0].recs[0].Value) != "held" {
			t.Fatalf("sent %+v, want only the held batch", snd.log)
		}
	})
}

func TestLingerTimeoutIsPerRequestInASharedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		gate := newGateSender(snd, func(int) bool { return true })
		p := lingerProducer(t, meta, gate, func(c *Config) { c.Linger = 30 * time.Millisecond })

		// Two requests share a batch that the leader holds; the one with the
		// shorter time gives up alone, the other gets its offsets.
		long := make(chan []Result, 1)
		go func() {
			res, _ := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, "long"))
			long <- res
		}()
		testkit.WaitFor(t, 5*time.Second, "the first record in the lane", func() bool { return queued(p, laneKey{"t", 0, protocol.AcksAll}) == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		res, err := p.Produce(ctx, "t", protocol.AcksAll, values(0, "short"))
		if !errors.Is(err, ErrTimedOut) || !strings.Contains(res[0].Err.Error(), "outcome unknown") {
			t.Fatalf("short request: %v %+v", err, res)
		}
		close(gate.release)
		r := <-long
		if r[0].Err != nil {
			t.Fatalf("long request: %+v", r)
		}
		if len(snd.log) != 1 || len(snd.log[0].recs) != 2 {
			t.Fatalf("sent %+v, want one batch holding both", snd.log)
		}
		if at := stored(snd, "t", 0); at["long"] != r[0].Offset {
			t.Fatalf("long stored at %d, answered %d", at["long"], r[0].Offset)
		}
	})
}

func TestLingerCloseSendsWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		p := lingerProducer(t, meta, snd, func(c *Config) { c.Linger = 5 * time.Second })
		done := make(chan []Result, 1)
		go func() { res, _ := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, "a")); done <- res }()
		testkit.WaitFor(t, 5*time.Second, "the record in the lane", func() bool { return queued(p, laneKey{"t", 0, protocol.AcksAll}) == 1 })
		// On the bubble's clock: Close sends the open batch at once, not
		// after the 5 s linger.
		start := time.Now()
		p.Close()
		if r := <-done; r[0].Err != nil || time.Since(start) != 0 {
			t.Fatalf("after close: %+v in %v", r, time.Since(start))
		}
		// Later requests go straight to the leader.
		if res, err := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, "b")); err != nil || res[0].Offset != 1 {
			t.Fatalf("after close: %+v %v", res, err)
		}
	})
}

func TestLingerZeroKeepsOneBatchPerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newFakeMeta()
		meta.set("t", "a:1")
		snd := newFakeSender()
		p := lingerProducer(t, meta, snd, func(c *Config) { c.Linger = 0 })
		if p.acc != nil {
			t.Fatal("an accumulator with linger 0")
		}
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				if _, err := p.Produce(context.Background(), "t", protocol.AcksAll, values(0, fmt.Sprint(i), fmt.Sprint(i))); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if len(snd.log) != 10 {
			t.Fatalf("%d batches for 10 requests", len(snd.log))
		}
	})
}

func TestRecordSizeBound(t *testing.T) {
	big := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		recs []record.Record
	}{
		{"null key and value", []record.Record{{}, {}}},
		{"small", []record.Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1}, {Value: []byte("w"), Timestamp: 1 << 40}}},
		{"headers", []record.Record{{Value: []byte(big), Headers: []record.RecordHeader{{Key: "h", Value: nil}, {Key: big, Value: []byte(big)}}}}},
		{"timestamps far apart", []record.Record{{Timestamp: -1 << 62, Value: []byte{}}, {Timestamp: 1 << 62, Key: []byte{}}}},
	} {
		b := record.NewBuilder(record.CodecNone)
		bound := record.HeaderSize
		for i := 0; i < 200; i++ {
			r := tc.recs[i%len(tc.recs)]
			bound += recordSizeBound(&r, i)
			b.Append(r)
			if b.Size() > bound {
				t.Fatalf("%s: %d records take %d bytes, bound %d", tc.name, i+1, b.Size(), bound)
			}
		}
	}
}
