package txncoord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// complete starts writing the markers of a prepared transaction unless a
// goroutine does already.
func (x *Coordinator) complete(id string) { x.completion(id, false) }

// completion returns the goroutine completing id's prepared transaction,
// starting one unless one runs that has not handed its completion over;
// with wait it registers the caller as a request waiting for it
// (leaveCompletion ends the wait). Nil once the coordinator stops.
func (x *Coordinator) completion(id string, wait bool) *completion {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopped {
		return nil
	}
	c, ok := x.completing[id]
	if !ok {
		c = &completion{done: make(chan struct{})}
		x.completing[id] = c
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			defer func() {
				x.mu.Lock()
				if x.completing[id] == c {
					delete(x.completing, id)
				}
				x.mu.Unlock()
				close(c.done)
			}()
			x.completeLoop(id, c)
		}()
	}
	if wait {
		c.waiters++
	}
	return c
}

// completeLoop writes the markers of a prepared transaction, retrying until
// every partition has its marker, then proposes the Complete state (with
// the offsets, for a commit), unless a request waits to begin the
// producer's next transaction: that request's entry completes this one
// (join). It gives up when this replica stops coordinating: the next
// leader completes the transaction.
func (x *Coordinator) completeLoop(id string, c *completion) {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-x.stop:
			return
		default:
		}
		if !x.co.Ready() {
			return
		}
		t, _, err := x.co.FSM().Txn(id)
		if err != nil || t == nil || !t.Preparing() {
			return
		}
		err = x.writeMarkers(t)
		if err == nil {
			x.mu.Lock()
			if c.waiters > 0 {
				// Handed over: the waiting request completes it (or hands
				// it back with restartCompletion).
				c.marked = t.Version
				x.handed[id] = t.Version
				delete(x.completing, id)
				x.mu.Unlock()
				return
			}
			x.mu.Unlock()
			if err = x.completeEntry(id, t); err == nil {
				return
			}
		}
		x.co.Logger().Warn("completing a transaction failed; retrying", "transactional_id", id, "state", t.State, "err", err, "backoff", backoff)
		select {
		case <-x.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// completeEntry proposes the Complete state of t, whose markers are
// written, unless the id's state moved on meanwhile (a request completed
// it).
func (x *Coordinator) completeEntry(id string, t *fsm.Txn) error {
	ctx, cancel := context.WithTimeout(context.Background(), x.s.MarkerTimeout)
	defer cancel()
	defer x.lock(id)()
	if cur, _, err := x.co.FSM().Txn(id); err != nil || cur == nil || cur.Version != t.Version {
		return err
	}
	done := t.Clone()
	commit := t.State == fsm.TxnPrepareCommit
	done.State = fsm.TxnCompleteAbort
	if commit {
		done.State = fsm.TxnCompleteCommit
	}
	done.Partitions, done.Groups, done.StartMs = nil, nil, 0
	if !commit {
		done.Offsets = nil
	}
	moveOn(done)
	if err := x.put(ctx, t.Version, done, commit); err != nil {
		return err
	}
	x.completed(done, commit)
	return nil
}

// completed counts and logs a transaction's completion.
func (x *Coordinator) completed(t *fsm.Txn, commit bool) {
	if commit {
		x.counts.Committed.Add(1)
	} else {
		x.counts.Aborted.Add(1)
	}
	x.co.Logger().Debug("transaction completed", "transactional_id", t.ID, "committed", commit, "producer_id", t.ProducerID, "epoch", t.Epoch)
}

// writeMarkers writes t's marker to each of its partitions (the writer
// sends the markers of the transactions that end together in one request
// per storage node).
func (x *Coordinator) writeMarkers(t *fsm.Txn) error {
	commit := t.State == fsm.TxnPrepareCommit
	ms := make([]Marker, len(t.Partitions))
	for i, tp := range t.Partitions {
		ms[i] = Marker{TP: tp, ProducerID: t.ProducerID, Epoch: t.Epoch, Commit: commit}
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.s.MarkerTimeout)
	defer cancel()
	errs := x.markers.WriteMarkers(ctx, ms)
	for i := range errs {
		if errs[i] != nil {
			x.counts.MarkerFailures.Add(1)
			errs[i] = fmt.Errorf("%s: %w", ms[i].TP, errs[i])
		}
	}
	return errors.Join(errs...)
}

// check aborts the transactions open longer than their timeout and resumes
// the completion of prepared ones (a new leader finds them so).
func (x *Coordinator) check() {
	if !x.co.Ready() {
		return
	}
	all, err := x.co.FSM().Txns()
	if err != nil {
		x.co.Logger().Warn("reading the transactions failed", "err", err)
		return
	}
	now := x.co.Now().UnixMilli()
	for _, t := range all {
		switch {
		case t.Preparing() && !x.isHanded(t.ID, t.Version):
			x.complete(t.ID)
		case t.State == fsm.TxnOngoing && now-t.StartMs > int64(t.TimeoutMs):
			x.abortExpired(t.ID, now)
		}
	}
}

// abortExpired aborts a transaction past its timeout, fencing its producer.
func (x *Coordinator) abortExpired(id string, now int64) {
	defer x.lock(id)()
	t, _, err := x.co.FSM().Txn(id)
	if err != nil || t == nil || t.State != fsm.TxnOngoing || now-t.StartMs <= int64(t.TimeoutMs) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.s.MarkerTimeout)
	defer cancel()
	if err := x.prepare(ctx, t, false, true, false); err != nil {
		x.co.Logger().Warn("aborting a timed-out transaction failed", "transactional_id", id, "err", err)
		return
	}
	x.counts.TimedOut.Add(1)
	x.co.Logger().Info("transaction timed out and aborted", "transactional_id", id, "timeout_ms", t.TimeoutMs)
}
