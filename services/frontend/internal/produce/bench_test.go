package produce

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/libs/protocol"
)

// benchBody returns a body of n records of size-byte values with short keys.
func benchBody(b *testing.B, f Format, n, size int) []byte {
	val := strings.Repeat("v", size)
	if f == FormatJSON {
		var sb strings.Builder
		sb.WriteString(`{"records":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"key":"key-%d","value":%q}`, i, val)
		}
		sb.WriteString(`]}`)
		return []byte(sb.String())
	}
	recs := make([]any, n)
	for i := range recs {
		recs[i] = map[string]any{"key": []byte(fmt.Sprintf("key-%d", i)), "value": []byte(val)}
	}
	return mustMsgpack(b, map[string]any{"records": recs})
}

func benchmarkParse(b *testing.B, f Format) {
	body := benchBody(b, f, 1000, 100)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(f, body, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJSON(b *testing.B)    { benchmarkParse(b, FormatJSON) }
func BenchmarkParseMsgpack(b *testing.B) { benchmarkParse(b, FormatMsgpack) }

// BenchmarkProduce measures partitioning and batch building for a request of
// 1000 keyed records over 4 partitions, with a sender that answers at once.
func BenchmarkProduce(b *testing.B) {
	meta := newFakeMeta()
	meta.set("t", "a:1", "a:1", "a:1", "a:1")
	cfg := DefaultConfig()
	cfg.Linger = 0 // one request at a time: lingering would only add its wait
	p, err := NewProducer(cfg, meta, discardSender{}, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	body := benchBody(b, FormatMsgpack, 1000, 100)
	recs, err := Parse(FormatMsgpack, body, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Produce(context.Background(), "t", protocol.AcksAll, recs); err != nil {
			b.Fatal(err)
		}
	}
}

// discardSender answers every request at once.
type discardSender struct{}

func (discardSender) Produce(_ context.Context, _ string, _ *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error) {
	if len(batch) == 0 {
		return protocol.ProduceResponse{}, protocol.InvalidRequest.Err("empty")
	}
	return protocol.ProduceResponse{}, nil
}

// serialLeader answers after a fixed time per batch, one batch at a time per
// partition, as a leader appending (and syncing) batch after batch would.
type serialLeader struct {
	delay time.Duration
	parts [4]sync.Mutex
}

func (l *serialLeader) Produce(_ context.Context, _ string, req *protocol.ProduceRequest, _ []byte) (protocol.ProduceResponse, error) {
	mu := &l.parts[req.Partition%4]
	mu.Lock()
	defer mu.Unlock()
	<-time.After(l.delay) // the simulated append; a timer, as a leader's latency is not a test's wait
	return protocol.ProduceResponse{}, nil
}

// BenchmarkProduceLinger measures many concurrent small requests (10 records
// of 100 bytes, keyless, so one partition per request) to a 4-partition
// topic, through the accumulator (linger 1ms) or without it (linger 0),
// with a leader that answers at once (the frontend's own cost) or one that
// takes 100µs per batch, one batch at a time per partition (what batching
// is for). Under linger, ns/op is mostly the wait: cpu-ns/op is the
// process's CPU time per request, the frontend's cost.
func BenchmarkProduceLinger(b *testing.B) {
	for _, leader := range []string{"instant", "serial100us"} {
		for _, linger := range []time.Duration{0, time.Millisecond} {
			b.Run(fmt.Sprintf("leader=%s/linger=%v", leader, linger), func(b *testing.B) {
				meta := newFakeMeta()
				meta.set("t", "a:1", "a:1", "a:1", "a:1")
				var send Sender = discardSender{}
				if leader != "instant" {
					send = &serialLeader{delay: 100 * time.Microsecond}
				}
				cfg := DefaultConfig()
				cfg.Linger = linger
				p, err := NewProducer(cfg, meta, send, nil, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				body := benchBody(b, FormatMsgpack, 10, 100)
				recs, err := Parse(FormatMsgpack, body, 0)
				for i := range recs {
					recs[i].Key = nil // keyless: the sticky partition, one batch per request
				}
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				b.SetParallelism(32)
				cpu := processCPU()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := p.Produce(context.Background(), "t", protocol.AcksAll, recs); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
				reg := prometheus.NewRegistry()
				reg.MustRegister(p.metrics.BatchRecords)
				if mfs, err := reg.Gather(); err == nil && len(mfs) == 1 {
					h := mfs[0].GetMetric()[0].GetHistogram()
					b.ReportMetric(h.GetSampleSum()/float64(max(h.GetSampleCount(), 1)), "records/batch")
				}
			})
		}
	}
}
