package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
)

// The sender: one goroutine decides which batches go now and starts a
// request goroutine per topic for them; request goroutines deliver their
// batches (with retries) and free the partitions for their next batch.

// runSender is the sender loop; it returns when stop is closed.
func (p *Producer) runSender() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var idRetry time.Time // when to ask for a producer id again after a failure
	backoff := p.cfg.RetryBackoff
	for {
		wait := time.Hour
		if p.needIdentity() {
			if now := time.Now(); !now.Before(idRetry) {
				if p.fetchIdentity() {
					backoff = p.cfg.RetryBackoff
				} else {
					idRetry = now.Add(backoff)
					backoff = min(2*backoff, p.cfg.MaxRetryBackoff)
				}
			}
			if p.needIdentity() {
				wait = max(time.Until(idRetry), time.Millisecond)
			}
		}
		wait = min(wait, p.dispatch())
		timer.Reset(wait)
		select {
		case <-p.wake:
		case <-timer.C:
		case <-p.stop:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// needIdentity reports whether batches wait for a (new) producer id.
func (p *Producer) needIdentity() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ident.stale && p.txn == nil // a transactional producer's comes from BeginTxn
}

// fetchIdentity asks metadata for a new producer id once.
func (p *Producer) fetchIdentity() bool {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
	defer cancel()
	r, err := p.meta.InitProducerID(ctx)
	if err != nil {
		p.log.Warn("allocating a producer id failed; retrying", "err", err)
		return false
	}
	p.mu.Lock()
	p.ident = producerIdentity{id: r.ProducerID, epoch: r.ProducerEpoch, gen: p.ident.gen + 1}
	p.mu.Unlock()
	p.log.Info("idempotent producer id allocated", "producer_id", r.ProducerID, "producer_epoch", r.ProducerEpoch)
	return true
}

// request is one HTTP request's batches, all of one topic.
type request struct {
	topic   string
	batches []*batchBuf
	size    int
}

// dispatch fails batches past their delivery timeout, starts requests for
// the batches that should go now (none while a producer id is awaited), and
// returns how long the sender may sleep before a linger or a timeout expires.
func (p *Producer) dispatch() time.Duration {
	now := time.Now()
	wait := time.Hour
	var reqs []*request
	var expired []completion
	p.mu.Lock()
	canSend := !p.ident.stale
	for _, t := range p.topics {
		var cur *request // the topic's request being filled
		for _, ps := range t.parts {
			for len(ps.queue) > 0 && now.Sub(ps.queue[0].created) > p.cfg.DeliveryTimeout {
				head := ps.queue[0]
				ps.queue = ps.queue[1:]
				expired = append(expired, p.finishLocked(head, 0, protocol.RequestTimedOut.Err("%v: not sent within %v", errDeliveryTimeout, p.cfg.DeliveryTimeout)))
			}
			if ps.inFlight != nil || len(ps.queue) == 0 {
				continue
			}
			head := ps.queue[0]
			wait = min(wait, head.created.Add(p.cfg.DeliveryTimeout).Sub(now))
			due := head.created.Add(p.cfg.Linger)
			ready := len(ps.queue) > 1 || head.b.Size() >= p.cfg.BatchSize || p.flushing > 0 || p.closed || !now.Before(due)
			if !ready {
				wait = min(wait, due.Sub(now))
				continue
			}
			if !canSend {
				continue // woken when the producer id arrives
			}
			if cur == nil || cur.size+head.b.Size() > p.cfg.MaxRequestBytes {
				if p.inFlight+len(reqs) >= p.cfg.MaxInFlight {
					continue // woken again when a request ends
				}
				cur = &request{topic: t.name}
				reqs = append(reqs, cur)
			}
			ps.queue = ps.queue[1:]
			ps.inFlight = head
			// The sticky partition's batch is sent: keyless records go
			// elsewhere meanwhile (KIP-480), so partitions' batches fill
			// and travel side by side instead of one after the other.
			t.sticky.NextAfter(int(ps.partition))
			p.stampLocked(ps, head)
			cur.batches = append(cur.batches, head)
			cur.size += head.b.Size()
		}
	}
	p.inFlight += len(reqs)
	p.mu.Unlock()
	for _, c := range expired {
		c.run()
	}
	for _, r := range reqs {
		p.wg.Add(1)
		go p.deliver(r.topic, r.batches)
	}
	return max(wait, time.Millisecond)
}

// stampLocked gives a batch its producer id, epoch and first sequence: a
// partition's sequences restart at 0 under each new producer id.
func (p *Producer) stampLocked(ps *partState, bb *batchBuf) {
	if p.cfg.DisableIdempotence {
		return
	}
	if ps.gen != p.ident.gen {
		ps.gen, ps.seq = p.ident.gen, 0
	}
	bb.b.SetProducer(p.ident.id, p.ident.epoch, ps.seq)
	bb.b.SetTransactional(p.txn != nil)
	bb.gen = p.ident.gen
	ps.seq = int32((int64(ps.seq) + int64(bb.b.Count())) % (1 << 31)) // wraps to 0, as Kafka
}

// deliver sends one topic's batches until each has an outcome: retriable
// failures are sent again (the same bytes) after a backoff.
func (p *Producer) deliver(topic string, todo []*batchBuf) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
		p.signal()
	}()
	for _, bb := range todo {
		if b, err := bb.b.Build(); err != nil {
			bb.bytes = nil
			p.finish(bb, 0, fmt.Errorf("building the batch: %w", err))
		} else {
			bb.bytes = b
		}
	}
	todo = keep(todo, func(bb *batchBuf) bool { return bb.bytes != nil })
	backoff := p.cfg.RetryBackoff
	for len(todo) > 0 {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
		resp, err := p.fe.post(ctx, topic, p.cfg.Acks, todo)
		cancel()
		var retry []*batchBuf
		pause := backoff
		switch {
		case err != nil && requestRetriable(err):
			retry = todo
			var th *throttledError
			if errors.As(err, &th) {
				pause = max(pause, th.retryAfter)
			}
			p.log.Debug("produce request failed; retrying", "topic", topic, "batches", len(todo), "err", err)
		case err != nil:
			for _, bb := range todo {
				p.finish(bb, 0, err)
			}
		case len(resp.Results) != len(todo):
			err := fmt.Errorf("frontend answered %d results for %d batches", len(resp.Results), len(todo))
			for _, bb := range todo {
				p.finish(bb, 0, err)
			}
		default:
			for i, r := range resp.Results {
				code := protocol.Code(r.ErrorCode)
				switch {
				case code == protocol.None:
					p.finish(todo[i], r.BaseOffset, nil)
				case code == protocol.DuplicateSequenceNumber:
					// Older than the batches the leader remembers: it was
					// written by an earlier attempt, at an offset no longer
					// known (Kafka's producer treats it the same way).
					p.finish(todo[i], -1, nil)
				case batchRetriable(code):
					retry = append(retry, todo[i])
				default:
					p.finish(todo[i], 0, &protocol.Error{Code: code, Message: r.Error})
				}
			}
		}
		todo = p.dropExpired(retry)
		if len(todo) == 0 {
			return
		}
		select {
		case <-time.After(pause):
		case <-p.ctx.Done():
			for _, bb := range todo {
				p.finish(bb, 0, ErrProducerClosed)
			}
			return
		}
		backoff = min(2*backoff, p.cfg.MaxRetryBackoff)
	}
}

// dropExpired fails the batches past their delivery timeout and returns the others.
func (p *Producer) dropExpired(batches []*batchBuf) []*batchBuf {
	return keep(batches, func(bb *batchBuf) bool {
		if time.Since(bb.created) <= p.cfg.DeliveryTimeout {
			return true
		}
		p.finish(bb, 0, protocol.RequestTimedOut.Err("%v: no answer within %v", errDeliveryTimeout, p.cfg.DeliveryTimeout))
		return false
	})
}

// finish completes a delivered batch: its records get their outcome and its
// partition may send its next batch. A batch of an idempotent producer that
// failed for good leaves its partition's sequence in doubt, so the producer
// raises its epoch (raiseEpochLocked) before its next batch.
//
// The partition's next batch is sent only once this one's callbacks ran, so
// a partition's callbacks run in send order, as Kafka's do.
func (p *Producer) finish(bb *batchBuf, base int64, err error) {
	p.mu.Lock()
	part := bb.part
	switch {
	case err != nil && p.txn != nil && bb.gen == p.ident.gen:
		// The transaction cannot commit; its end (AbortTxn) raises the
		// epoch at the coordinator.
		p.txnFailedLocked(fmt.Errorf("a batch of %s-%d failed: %w", part.topic, part.partition, err))
	case err != nil && p.txn == nil && !p.cfg.DisableIdempotence:
		p.raiseEpochLocked(bb)
	}
	c := p.finishLocked(bb, base, err)
	p.mu.Unlock()
	c.run()
	p.mu.Lock()
	if part.inFlight == bb {
		part.inFlight = nil
	}
	p.mu.Unlock()
	p.signal()
}

// raiseEpochLocked moves the producer to the next epoch of its id after
// failed, a batch stamped with the current one, failed for good, as Kafka's
// producer bumps its epoch (KIP-360): every partition's sequence restarts at
// 0, and a leader refuses every batch of an older epoch once it saw the new
// one (INVALID_PRODUCER_EPOCH). So a copy of the failed batch still on its
// way (a frontend still sending it when the delivery timeout ran out) is
// stored before the next batch of its partition or not at all. The id is
// this producer's alone (metadata hands each out once), so raising its epoch
// needs nobody's leave; past the largest epoch the producer takes a new id.
// A failure of a batch stamped before the last raise raises nothing more.
func (p *Producer) raiseEpochLocked(failed *batchBuf) {
	if p.ident.stale || failed.gen != p.ident.gen {
		return
	}
	if p.ident.epoch == math.MaxInt16 {
		p.ident.stale = true
		return
	}
	p.ident.epoch++
	p.ident.gen++
}

// batchRetriable reports whether a batch's error may clear if the same bytes
// are sent again (protocol's produce outcome table: CORRUPT_RECORD, retriable
// on the wire as a transfer may damage bytes, settles a batch this producer
// built itself).
func batchRetriable(c protocol.Code) bool { return c.Resend() }

func keep(bs []*batchBuf, f func(*batchBuf) bool) []*batchBuf {
	out := bs[:0]
	for _, b := range bs {
		if f(b) {
			out = append(out, b)
		}
	}
	return out
}
