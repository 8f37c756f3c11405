package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progressInterval is how often the progress line is refreshed.
const progressInterval = time.Second

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress refreshes one status line on w every progressInterval with \r,
// from line(elapsed since the previous call). Start and Stop are called by
// the run that owns it.
type progress struct {
	w    io.Writer
	line func(interval time.Duration) string
	stop chan struct{}
	wg   sync.WaitGroup
}

func startProgress(w io.Writer, line func(time.Duration) string) *progress {
	p := &progress{w: w, line: line, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p
}

func (p *progress) run() {
	defer p.wg.Done()
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	last, width := time.Now(), 0
	for {
		select {
		case <-p.stop:
			if width > 0 {
				fmt.Fprint(p.w, "\r"+strings.Repeat(" ", width)+"\r")
			}
			return
		case now := <-t.C:
			s := p.line(now.Sub(last))
			last = now
			pad := max(width-len(s), 0)
			width = len(s)
			fmt.Fprint(p.w, "\r"+s+strings.Repeat(" ", pad))
		}
	}
}

// Stop clears the line and waits for the goroutine; p may be nil.
func (p *progress) Stop() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
}

// progressLine is the run's status: phase, counts, the rate over the last
// interval, failures.
func (r *run) progressLine() func(time.Duration) string {
	var prev int64
	return func(interval time.Duration) string {
		now := time.Now()
		var b strings.Builder
		done := r.cons.counted.Load() + r.cons.warmup.Load()
		if r.cfg.Mode == ModeProduce {
			done = r.prod.acked()
		}
		rate := float64(done-prev) / interval.Seconds()
		prev = done
		fmt.Fprintf(&b, "%s: ", r.cfg.Mode)
		switch {
		case now.Before(r.plan.warmupEnd):
			fmt.Fprintf(&b, "warm-up %.0f/%.0fs", now.Sub(r.start).Seconds(), r.cfg.Warmup.Seconds())
		case r.cfg.Duration > 0:
			fmt.Fprintf(&b, "%.0f/%.0fs", min(now.Sub(r.plan.warmupEnd), r.cfg.Duration).Seconds(), r.cfg.Duration.Seconds())
		default:
			counted := r.prod.counted.Load()
			if r.cfg.Mode != ModeProduce {
				counted = r.cons.counted.Load()
			}
			fmt.Fprintf(&b, "%.1f%% (%s/%s)", 100*float64(counted)/float64(r.cfg.Records), count(counted), count(r.cfg.Records))
		}
		fmt.Fprintf(&b, "  %s rec/s", count(int64(rate)))
		if producesIn(r.cfg.Mode) {
			fmt.Fprintf(&b, "  sent %s  acked %s  failed %s", count(r.prod.sent.Load()), count(r.prod.acked()), count(r.prod.failures.Count()))
		}
		if r.cfg.Mode != ModeProduce {
			fmt.Fprintf(&b, "  consumed %s", count(done))
		}
		return b.String()
	}
}
