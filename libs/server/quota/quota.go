// Package quota enforces byte-rate quotas per client id (Kafka's client
// quotas): each frontend and storage node throttles on its own, so a client
// spread over several of them gets the quota from each.
//
// The limiter is a token bucket that may go into debt: a request is admitted
// while the client's bucket is not negative, its bytes are charged after, and
// a client in debt waits until the refill pays it back. So a request larger
// than the burst is never refused for ever, and the long-run rate stays at the
// quota.
package quota

import (
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Burst is how many seconds of quota a client idle for that long may use at
// once.
const Burst = time.Second

// maxIdle is how long a bucket is kept after its last use; a bucket that
// refilled completely holds nothing worth keeping.
const maxIdle = time.Minute

// Limiter throttles clients by byte rate. The zero value is not usable; call
// NewLimiter.
type Limiter struct {
	now func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64 // bytes the client may still send; negative: its debt
	last   time.Time
}

// NewLimiter returns an empty limiter reading the clock with now (time.Now
// when nil).
func NewLimiter(now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, buckets: map[string]*bucket{}}
}

// Admit reports how long client must wait before a request is admitted at
// rate bytes per second: 0 when admitted now. A rate of 0 or less admits
// everything.
func (l *Limiter) Admit(client string, rate int64) time.Duration {
	if rate <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(client, rate)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / float64(rate) * float64(time.Second))
}

// Charge counts n bytes against client at rate bytes per second.
func (l *Limiter) Charge(client string, rate int64, n int) {
	if rate <= 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(client, rate).tokens -= float64(n)
}

// refill returns client's bucket brought up to now; callers hold mu.
func (l *Limiter) refill(client string, rate int64) *bucket {
	now := l.now()
	if now.Sub(l.lastSweep) > maxIdle {
		for id, b := range l.buckets {
			if now.Sub(b.last) > maxIdle {
				delete(l.buckets, id)
			}
		}
		l.lastSweep = now
	}
	burst := float64(rate) * Burst.Seconds()
	b := l.buckets[client]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		l.buckets[client] = b
		return b
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(burst, b.tokens+dt.Seconds()*float64(rate))
		b.last = now
	}
	return b
}

// Table is the quotas in force, replaced as a whole when the cluster model
// changes; safe for concurrent use.
type Table struct {
	mu     sync.RWMutex
	byID   map[string]cluster.Quota
	hasDef bool
	def    cluster.Quota
}

// Set replaces the quotas.
func (t *Table) Set(qs []cluster.Quota) {
	byID := make(map[string]cluster.Quota, len(qs))
	var def cluster.Quota
	hasDef := false
	for _, q := range qs {
		if q.ClientID == "" {
			def, hasDef = q, true
			continue
		}
		byID[q.ClientID] = q
	}
	t.mu.Lock()
	t.byID, t.def, t.hasDef = byID, def, hasDef
	t.mu.Unlock()
}

// For returns the quota that applies to client: its own, else the default,
// else none (zero rates).
func (t *Table) For(client string) cluster.Quota {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if q, ok := t.byID[client]; ok {
		return q
	}
	if t.hasDef {
		return t.def
	}
	return cluster.Quota{}
}
