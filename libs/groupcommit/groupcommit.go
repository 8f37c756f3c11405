// Package groupcommit gathers work submitted while a round of it is in
// flight into the next round: group commit, for the Raft entries of the
// offsets coordinators and the transaction markers sent to each storage
// node.
package groupcommit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Batcher is group commit: what is submitted while a round is in flight
// waits and goes, with everything else submitted meanwhile, into the next
// round. One round is in flight at a time; a submission to an idle Batcher
// starts a round at once, so batching adds no latency when idle and grows
// with the load.
//
// A round runs on a goroutine the Batcher starts when it has work and that
// ends when the queue is empty; Wait waits for it (the owner's Stop).
type Batcher[In, Out any] struct {
	round             func(ctx context.Context, in []In) ([]Out, error)
	maxItems, maxSize int
	size              func(In) int

	mu      sync.Mutex
	queue   []*call[In, Out]
	running bool
	wg      sync.WaitGroup

	rounds  atomic.Int64 // rounds run
	items   atomic.Int64 // inputs that went into a round
	observe func(items int, d time.Duration)
}

// New returns a Batcher whose rounds run round, which answers each input
// in order, or fails them all with an error. A round holds at most
// maxItems inputs and maxSize of their sizes (always at least one input).
func New[In, Out any](round func(ctx context.Context, in []In) ([]Out, error), maxItems, maxSize int, size func(In) int) *Batcher[In, Out] {
	return &Batcher[In, Out]{round: round, maxItems: maxItems, maxSize: maxSize, size: size}
}

// Observe has each round's size and duration reported to fn; it is set
// before the first submission.
func (b *Batcher[In, Out]) Observe(fn func(items int, d time.Duration)) { b.observe = fn }

// Counts reports the rounds run and the inputs they held.
func (b *Batcher[In, Out]) Counts() (rounds, items int64) { return b.rounds.Load(), b.items.Load() }

// Queued reports the inputs waiting for a round.
func (b *Batcher[In, Out]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// call is one submission and, once done is closed, its answer.
type call[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{}
}

// Do submits in and waits for its answer or ctx. A caller that gives up
// may still see its input go into a later round (as a proposal whose wait
// timed out may still commit); one whose ctx ended before its round
// started is left out of it.
func (b *Batcher[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	outs, errs := b.DoAll(ctx, []In{in})
	return outs[0], errs[0]
}

// DoAll submits ins together (they go into the same round unless its
// bounds split them) and waits for their answers or ctx.
func (b *Batcher[In, Out]) DoAll(ctx context.Context, ins []In) ([]Out, []error) {
	calls := make([]*call[In, Out], len(ins))
	for i, in := range ins {
		calls[i] = &call[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	}
	b.mu.Lock()
	b.queue = append(b.queue, calls...)
	if !b.running && len(calls) > 0 {
		b.running = true
		b.wg.Add(1)
		go b.run()
	}
	b.mu.Unlock()
	outs, errs := make([]Out, len(ins)), make([]error, len(ins))
	for i, c := range calls {
		select {
		case <-c.done:
			outs[i], errs[i] = c.out, c.err
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	return outs, errs
}

// run runs rounds until the queue is empty.
func (b *Batcher[In, Out]) run() {
	defer b.wg.Done()
	for {
		calls := b.next()
		if calls == nil {
			return
		}
		b.runRound(calls)
	}
}

// next takes the next round's calls off the queue, leaving out those whose
// caller gave up; nil when the queue is empty (the Batcher stops running).
func (b *Batcher[In, Out]) next() []*call[In, Out] {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if len(b.queue) == 0 {
			b.running = false
			return nil
		}
		var calls []*call[In, Out]
		n, size := 0, 0
		for n < len(b.queue) && (len(calls) == 0 || len(calls) < b.maxItems && size+b.size(b.queue[n].in) <= b.maxSize) {
			if c := b.queue[n]; c.ctx.Err() == nil {
				calls = append(calls, c)
				size += b.size(c.in)
			} else {
				c.err = c.ctx.Err()
				close(c.done)
			}
			n++
		}
		b.queue = append(b.queue[:0:0], b.queue[n:]...)
		if len(calls) > 0 {
			return calls
		}
	}
}

// runRound runs one round over calls and answers each.
func (b *Batcher[In, Out]) runRound(calls []*call[In, Out]) {
	in := make([]In, len(calls))
	for i, c := range calls {
		in[i] = c.in
	}
	ctx, cancel := roundContext(calls)
	start := time.Now()
	out, err := b.round(ctx, in)
	cancel()
	if b.observe != nil {
		b.observe(len(in), time.Since(start))
	}
	if err == nil && len(out) != len(in) {
		err = fmt.Errorf("a round of %d answered %d", len(in), len(out))
	}
	b.rounds.Add(1)
	b.items.Add(int64(len(calls)))
	for i, c := range calls {
		if err != nil {
			c.err = err
		} else {
			c.out = out[i]
		}
		close(c.done)
	}
}

// roundContext bounds a round by the latest deadline of its calls (none
// when one of them has none: the round's own default applies).
func roundContext[In, Out any](calls []*call[In, Out]) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		dl, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// Wait waits until no round runs.
func (b *Batcher[In, Out]) Wait() { b.wg.Wait() }
