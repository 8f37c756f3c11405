package produce

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Budget bounds the memory of requests: the sum of the body sizes of the
// requests being served. A request takes its body's announced size before
// the body is read (the HTTP server streams bodies: only their first 8 KiB
// are read ahead) and gives it back once its answer is written; one that does
// not fit is refused at once (the frontend answers 429) rather than queued,
// so a burst cannot grow the frontend's memory and the client's retry lands
// on a frontend with room.
//
// What the budget bounds is everything a request holds while it waits on
// storage leaders: the body, its parsed records and the batches built from
// them, roughly two to three times the body. The accumulator (Config.Linger)
// stays inside it: it only refers to the records of requests still being
// served, and a batch shared by several requests holds a copy of their
// records, each request's within its own share. It is safe for concurrent use
// and never blocks.
type Budget struct {
	max  int64
	used atomic.Int64

	gauge     prometheus.Gauge
	throttled prometheus.Counter
}

// NewBudget returns a budget of max bytes reporting to the metrics (nil: to
// collectors of its own that nobody registers).
func NewBudget(max int64, m *Metrics) *Budget {
	if m == nil {
		return &Budget{max: max, gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "budget_bytes"}),
			throttled: prometheus.NewCounter(prometheus.CounterOpts{Name: "budget_refusals_total"})}
	}
	return &Budget{max: max, gauge: m.InFlightBytes, throttled: m.Throttled}
}

// TryAcquire takes n bytes and reports whether they fit; a caller that got
// true must Release the same n.
func (b *Budget) TryAcquire(n int) bool {
	for {
		cur := b.used.Load()
		if cur+int64(n) > b.max {
			b.throttled.Inc()
			return false
		}
		if b.used.CompareAndSwap(cur, cur+int64(n)) {
			b.gauge.Add(float64(n))
			return true
		}
	}
}

// Release gives back n bytes taken by TryAcquire.
func (b *Budget) Release(n int) {
	b.used.Add(-int64(n))
	b.gauge.Sub(float64(n))
}

// InUse returns the bytes taken now.
func (b *Budget) InUse() int64 { return b.used.Load() }

// Max returns the budget's size.
func (b *Budget) Max() int64 { return b.max }
