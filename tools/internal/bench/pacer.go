package bench

import (
	"context"
	"time"
)

// maxPacerLag bounds how far behind its schedule a pacer may fall: a sender
// that stalled longer (a full buffer, a slow request) resumes at the rate
// instead of bursting to make up for the whole stall.
const maxPacerLag = 100 * time.Millisecond

// minPacerSleep is the shortest wait a sender sleeps: shorter ones are
// skipped (the record goes slightly early), since timers are not finer than
// this anyway; the schedule stays absolute, so the average rate is exact.
const minPacerSleep = time.Millisecond

// Pacer spaces sends at a fixed rate on an absolute schedule: the n-th
// record (from 0) is due at start + n/rate. It keeps no clock of its own
// (callers pass now), so tests drive it without waiting. One sender uses it;
// it is not safe for concurrent use.
type Pacer struct {
	interval float64   // nanoseconds per record
	start    time.Time // when record 0 was due (moves forward after a stall)
	n        int64     // records reserved so far
}

// NewPacer returns a pacer for rate records/s (> 0) starting at start.
func NewPacer(rate float64, start time.Time) *Pacer {
	return &Pacer{interval: float64(time.Second) / rate, start: start}
}

// Reserve takes the next n records and returns how long after now they are
// due (0 when they are due already).
func (p *Pacer) Reserve(now time.Time, n int) time.Duration {
	due := p.start.Add(time.Duration(float64(p.n) * p.interval))
	if lag := now.Sub(due); lag > maxPacerLag {
		// Too far behind: move the schedule so the backlog is maxPacerLag.
		p.start = p.start.Add(lag - maxPacerLag)
		due = now.Add(-maxPacerLag)
	}
	p.n += int64(n)
	if d := due.Sub(now); d > 0 {
		return d
	}
	return 0
}

// pace waits for n records of pacer p (nil: unthrottled) and returns the
// time they went due (read once: the clock is not free on every machine). ok
// is false when ctx ended first.
func pace(ctx context.Context, p *Pacer, n int) (now time.Time, ok bool) {
	now = time.Now()
	if p == nil {
		return now, ctx.Err() == nil
	}
	d := p.Reserve(now, n)
	if d < minPacerSleep {
		return now, ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return time.Now(), true
	case <-ctx.Done():
		return now, false
	}
}
