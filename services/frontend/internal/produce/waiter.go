package produce

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
)

// waiter is one record-body request waiting on the accumulator: its records,
// where their results go, and its slices in the lanes.
type waiter struct {
	ctx      context.Context // the request's, with its timeout
	deadline time.Time       // ctx's
	// done is closed when pending reaches 0: every slice answered.
	done chan struct{}
	// pending counts the slices not answered yet, plus one while the request
	// is still adding (so done cannot close before every slice is added).
	pending atomic.Int32
	// slices are the request's slices in every lane; only the request's
	// goroutine uses the list (add, then wait).
	slices []*slice

	mu sync.Mutex
	// recs are the request's records, read by lanes while they build a
	// batch; nil once the request gave up. Guarded by mu (the request's own
	// goroutine reads it while adding, before any lane may write it).
	recs []Input
	// results are written by lanes as batches are answered, and by wait for
	// what is left when the request gives up. Guarded by mu.
	results []Result
	// gone: the request has stopped waiting and answered; lanes skip its
	// slices and touch neither recs nor results. Guarded by mu.
	gone bool
}

// part is one request's records for one partition: one slice, or several
// consecutive slices when they did not fit in one batch.
type part struct {
	partition int32
	ts        int64 // timestamp of records without one
	// failed is the error of the part's slice whose batch failed; the part's
	// later slices are then not sent. Guarded by the waiter's mu.
	failed error
}

// slice is a run of one request's records for one partition inside one
// pending batch, in request order.
type slice struct {
	w     *waiter
	part  *part
	index []int // positions in the request's records
	// The fields below are guarded by w.mu.
	state  sliceState
	base   int       // position of its first record in the built batch (sent)
	flight *inFlight // the batch carrying it (sent)
}

type sliceState uint8

const (
	sliceQueued   sliceState = iota // in a pending batch, not encoded
	sliceSent                       // encoded into a batch in flight
	sliceAnswered                   // its results are written
)

// inFlight is a built batch being sent: its send is cancelled once none of
// its requests waits for it any more.
type inFlight struct {
	waiting atomic.Int32 // requests waiting, plus one while the batch is being built
	cancel  context.CancelFunc
	// deadline is the send's; written before the builder's hold is
	// released, read by the release that brings waiting to 0.
	deadline time.Time
	// answers keeps the leader's last answer while the send is retried.
	answers lastAnswer
}

// release drops one waiting request (or the builder's hold). The last one
// cancels the send, unless the send's deadline has passed: then the
// deadline ends it, which also makes storageclient drop a connection that
// did not answer in time (a cancel would keep it).
func (f *inFlight) release() {
	if f.waiting.Add(-1) == 0 && time.Now().Before(f.deadline) {
		f.cancel()
	}
}

func newWaiter(ctx context.Context, recs []Input, results []Result) *waiter {
	w := &waiter{ctx: ctx, done: make(chan struct{}), recs: recs, results: results}
	w.deadline, _ = ctx.Deadline()
	w.pending.Store(1)
	return w
}

// track counts a new slice of the request. Called by add (the request's
// goroutine) before the slice can be seen by its lane's goroutine.
func (w *waiter) track(s *slice) {
	w.pending.Add(1)
	w.slices = append(w.slices, s)
}

// answerLocked marks s answered (its results written) and closes done after
// the last one. w.mu must be held.
func (w *waiter) answerLocked(s *slice) {
	s.state = sliceAnswered
	if w.pending.Add(-1) == 0 {
		close(w.done)
	}
}

// wait waits until every slice of the request is answered or the request's
// context ends. Then it settles what is left: records still queued were
// never sent and will not be (REQUEST_TIMED_OUT, "not sent"), records in a
// batch in flight have an unknown outcome (REQUEST_TIMED_OUT, "outcome
// unknown"), and the request's records are dropped so that its lanes no
// longer reach them. Called once, from the request's goroutine, after the
// last add.
func (w *waiter) wait(p *Producer) {
	w.mu.Lock()
	if w.pending.Add(-1) == 0 {
		close(w.done)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-w.ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gone = true
	w.recs = nil
	for _, s := range w.slices {
		var err error
		switch s.state {
		case sliceAnswered:
			continue
		case sliceQueued:
			err = p.notSentInTime(w.ctx, s.part.partition)
		case sliceSent:
			err = p.settle(w.ctx, s.part.partition, s.flight.answers.wrap(w.ctx.Err()))
			s.flight.release()
		}
		for _, i := range s.index {
			w.results[i] = Result{Partition: s.part.partition, Err: err}
		}
	}
}

// notSentInTime is the error of records that waited in a lane until their
// request's context ended.
func (p *Producer) notSentInTime(ctx context.Context, part int32) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return protocol.RequestTimedOut.Err("not sent: the request's time (-produce-timeout %v) ran out while its records waited for the batch of partition %d before theirs",
			p.cfg.Timeout, part)
	}
	return fmt.Errorf("not sent: %w", ctx.Err())
}

// produceLingered serves a request's partition groups through the
// accumulator and fills results; it returns when every record has its
// result (answered, failed, or given up at ctx's end). Groups the closed
// accumulator refuses are sent directly, as with Linger 0.
func (p *Producer) produceLingered(ctx context.Context, d dest, groups []group, recs []Input, ts int64, results []Result) {
	w := newWaiter(ctx, recs, results)
	var direct sync.WaitGroup
	for gi := range groups {
		g := &groups[gi]
		if !p.acc.add(w, d.topic, d.acks, g, ts) {
			// Disjoint positions of results: no lock needed against lanes.
			direct.Go(func() { p.produceGroup(ctx, d, g, recs, ts, results) })
		}
	}
	w.wait(p)
	direct.Wait()
}
