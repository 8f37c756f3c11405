package quota

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimiterDebtAndRefill(t *testing.T) {
	clk := &clock{t: time.Unix(100, 0)}
	l := NewLimiter(clk.now)
	const rate = 1000 // bytes per second; the burst is 1000 bytes
	if w := l.Admit("a", rate); w != 0 {
		t.Fatalf("a new client waits %v", w)
	}
	l.Charge("a", rate, 3000) // larger than the burst: admitted, 2000 in debt
	if w := l.Admit("a", rate); w != 2*time.Second {
		t.Fatalf("wait after a 3000-byte request = %v, want 2s", w)
	}
	if w := l.Admit("b", rate); w != 0 {
		t.Fatalf("another client is throttled too: %v", w)
	}
	clk.advance(1500 * time.Millisecond)
	if w := l.Admit("a", rate); w != 500*time.Millisecond {
		t.Fatalf("wait 1.5s later = %v, want 500ms", w)
	}
	clk.advance(500 * time.Millisecond)
	if w := l.Admit("a", rate); w != 0 {
		t.Fatalf("still throttled once the debt is paid: %v", w)
	}
	// A long pause refills only up to the burst.
	clk.advance(time.Hour)
	l.Charge("a", rate, 1500)
	if w := l.Admit("a", rate); w != 500*time.Millisecond {
		t.Fatalf("after an hour idle and 1500 bytes: wait %v, want 500ms (burst is one second)", w)
	}
	// No quota: nothing is ever throttled or kept.
	l.Charge("c", 0, 1<<30)
	if w := l.Admit("c", 0); w != 0 {
		t.Fatalf("unlimited client waits %v", w)
	}
	if _, kept := l.buckets["c"]; kept {
		t.Fatal("a bucket was kept for an unlimited client")
	}
}

func TestLimiterForgetsIdleClients(t *testing.T) {
	clk := &clock{t: time.Unix(100, 0)}
	l := NewLimiter(clk.now)
	for _, id := range []string{"x", "y", "z"} {
		l.Charge(id, 10, 5)
	}
	clk.advance(2 * maxIdle)
	l.Admit("x", 10)
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets after the others idled for %v", len(l.buckets), 2*maxIdle)
	}
}

func TestTableDefaultAndOwn(t *testing.T) {
	var tb Table
	if q := tb.For("any"); q.ProduceBytesPerSec != 0 || q.FetchBytesPerSec != 0 {
		t.Fatalf("empty table: %+v", q)
	}
	tb.Set([]cluster.Quota{{ClientID: "", ProduceBytesPerSec: 100}, {ClientID: "big", ProduceBytesPerSec: 5000, FetchBytesPerSec: 7}})
	if q := tb.For("big"); q.ProduceBytesPerSec != 5000 || q.FetchBytesPerSec != 7 {
		t.Fatalf("own quota: %+v", q)
	}
	if q := tb.For("other"); q.ProduceBytesPerSec != 100 || q.FetchBytesPerSec != 0 {
		t.Fatalf("default quota: %+v", q)
	}
	tb.Set(nil)
	if q := tb.For("big"); q.ProduceBytesPerSec != 0 {
		t.Fatalf("after clearing: %+v", q)
	}
}
