package bench

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The latency histograms hold microseconds from 1 µs to 10 minutes with 3
// significant digits (a value is off by at most 0.1%); longer values are
// recorded as 10 minutes, negative ones (clock steps) as 0.
const (
	latencyLowest  = 1
	latencyHighest = int64(10 * time.Minute / time.Microsecond)
	latencyDigits  = 3
)

// maxDistinctErrors bounds the distinct error messages a run keeps.
const maxDistinctErrors = 5

// Latencies is a latency histogram, safe for concurrent use.
type Latencies struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram // guarded by mu
}

// NewLatencies returns an empty histogram.
func NewLatencies() *Latencies {
	return &Latencies{h: hdrhistogram.New(latencyLowest, latencyHighest, latencyDigits)}
}

// Record adds one latency.
func (l *Latencies) Record(d time.Duration) { l.RecordN(d, 1) }

// RecordN adds n records of the same latency (the records of one request).
func (l *Latencies) RecordN(d time.Duration, n int64) {
	us := min(max(d.Microseconds(), 0), latencyHighest)
	l.mu.Lock()
	_ = l.h.RecordValues(us, n) // in range by construction
	l.mu.Unlock()
}

// Merge adds every value of o.
func (l *Latencies) Merge(o *Latencies) {
	o.mu.Lock()
	snap := hdrhistogram.Import(o.h.Export())
	o.mu.Unlock()
	l.mu.Lock()
	l.h.Merge(snap)
	l.mu.Unlock()
}

// LatencySummary is a histogram's percentiles in milliseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Summary returns the percentiles, nil when nothing was recorded.
func (l *Latencies) Summary() *LatencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h.TotalCount() == 0 {
		return nil
	}
	ms := func(us int64) float64 { return round(float64(us)/1000, 3) }
	return &LatencySummary{
		Count: l.h.TotalCount(),
		Mean:  round(l.h.Mean()/1000, 3),
		P50:   ms(l.h.ValueAtQuantile(50)),
		P95:   ms(l.h.ValueAtQuantile(95)),
		P99:   ms(l.h.ValueAtQuantile(99)),
		P999:  ms(l.h.ValueAtQuantile(99.9)),
		Max:   ms(l.h.Max()),
	}
}

// ErrorCount is one distinct error message and how many records it failed.
type ErrorCount struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// Failures counts failed records and keeps the first distinct messages. It
// is safe for concurrent use.
type Failures struct {
	mu    sync.Mutex
	n     int64        // guarded by mu
	first []ErrorCount // guarded by mu; at most maxDistinctErrors
}

// Add counts n records failed with err.
func (f *Failures) Add(err error, n int64) {
	msg := err.Error()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n += n
	for i := range f.first {
		if f.first[i].Error == msg {
			f.first[i].Count += n
			return
		}
	}
	if len(f.first) < maxDistinctErrors {
		f.first = append(f.first, ErrorCount{Error: msg, Count: n})
	}
}

// Count returns the failed records.
func (f *Failures) Count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Errors returns the first distinct messages with their counts (never nil).
func (f *Failures) Errors() []ErrorCount {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ErrorCount{}, f.first...)
}

// side counts one direction of a run (records produced, or consumed).
type side struct {
	counted atomic.Int64 // records counted (after the warm-up)
	bytes   atomic.Int64 // their value bytes
	warmup  atomic.Int64 // records of the warm-up
	firstNs atomic.Int64 // Unix nanoseconds of the first counted record, 0 before
	lastNs  atomic.Int64 // Unix nanoseconds of the last counted record
}

// count adds n counted records of the given value bytes, done at at.
func (s *side) count(n, bytes int64, at time.Time) {
	s.counted.Add(n)
	s.bytes.Add(bytes)
	ns := at.UnixNano()
	s.firstNs.CompareAndSwap(0, ns)
	for {
		last := s.lastNs.Load()
		if ns <= last || s.lastNs.CompareAndSwap(last, ns) {
			return
		}
	}
}

// first and last return the times of the first and last counted records
// (zero times before any).
func (s *side) first() time.Time { return unixNano(s.firstNs.Load()) }
func (s *side) last() time.Time  { return unixNano(s.lastNs.Load()) }

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// SideSummary is the figures of one direction of a run. Throughput counts
// record values only; MB is 10^6 bytes.
type SideSummary struct {
	Records       int64           `json:"records"`        // counted (warm-up excluded)
	Bytes         int64           `json:"bytes"`          // value bytes of the counted records
	WarmupRecords int64           `json:"warmup_records"` // succeeded during the warm-up
	Seconds       float64         `json:"seconds"`        // the measured period
	RecordsPerSec float64         `json:"records_per_sec"`
	MBPerSec      float64         `json:"mb_per_sec"`
	Latency       *LatencySummary `json:"latency_ms,omitempty"`

	// Produce only.
	Sent   int64 `json:"sent,omitempty"`   // records handed to the SDK or posted, warm-up included
	Failed int64 `json:"failed,omitempty"` // records whose produce failed

	// Consume only. JoinSec: consume, from the start to the first record;
	// e2e, from the start until the group owned every partition.
	JoinSec               float64 `json:"join_sec,omitempty"`
	RecordsPerSecWithJoin float64 `json:"records_per_sec_with_join,omitempty"`
	MBPerSecWithJoin      float64 `json:"mb_per_sec_with_join,omitempty"`
	Unconsumed            int64   `json:"unconsumed,omitempty"` // e2e: acknowledged, not consumed within --grace
}

// newSideSummary computes the rates of records and bytes over seconds.
func newSideSummary(records, bytes, warmup int64, seconds float64, lat *Latencies) *SideSummary {
	s := &SideSummary{Records: records, Bytes: bytes, WarmupRecords: warmup, Seconds: round(seconds, 3)}
	s.RecordsPerSec, s.MBPerSec = rates(records, bytes, seconds)
	if lat != nil {
		s.Latency = lat.Summary()
	}
	return s
}

// rates returns records/s and MB/s (10^6 bytes) over seconds; 0 when the
// period is empty.
func rates(records, bytes int64, seconds float64) (float64, float64) {
	if seconds <= 0 {
		return 0, 0
	}
	return round(float64(records)/seconds, 1), round(float64(bytes)/1e6/seconds, 3)
}

// seconds returns to - from in seconds, 0 when either is unset or to is
// before from.
func seconds(from, to time.Time) float64 {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return 0
	}
	return to.Sub(from).Seconds()
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}
