package client

import (
	"context"
	"errors"
	"fmt"
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
	for {
		if !p.ensureIdentity() {
			return
		}
		wait := p.dispatch()
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

// ensureIdentity gets a producer id from metadata when the producer needs a
// new one, retrying until it succeeds or the producer stops.
func (p *Producer) ensureIdentity() bool {
	backoff := p.cfg.RetryBackoff
	for {
		p.mu.Lock()
		stale := p.ident.stale
		p.mu.Unlock()
		if !stale {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.RequestTimeout)
		r, err := p.meta.InitProducerID(ctx)
		cancel()
		if err == nil {
			p.mu.Lock()
			p.ident = producerIdentity{id: r.ProducerID, epoch: r.ProducerEpoch, gen: p.ident.gen + 1}
			p.mu.Unlock()
			p.log.Info("idempotent producer id allocated", "producer_id", r.ProducerID, "producer_epoch", r.ProducerEpoch)
			return true
		}
		p.log.Warn("allocating a producer id failed; retrying", "err", err)
		select {
		case <-time.After(backoff):
		case <-p.stop:
			return false
		}
		backoff = min(2*backoff, p.cfg.MaxRetryBackoff)
	}
}

// dispatch starts requests for the batches that should go now and returns
// how long the sender may sleep before the next linger expires.
func (p *Producer) dispatch() time.Duration {
	now := time.Now()
	wait := time.Hour
	byTopic := map[string][]*batchBuf{}
	var expired []completion
	p.mu.Lock()
	for _, t := range p.topics {
		for _, ps := range t.parts {
			if ps.inFlight || len(ps.queue) == 0 {
				continue
			}
			head := ps.queue[0]
			if now.Sub(head.created) > p.cfg.DeliveryTimeout {
				ps.queue = ps.queue[1:]
				expired = append(expired, p.finishLocked(head, 0, protocol.RequestTimedOut.Err("%v: not sent within %v", errDeliveryTimeout, p.cfg.DeliveryTimeout)))
				continue
			}
			due := head.created.Add(p.cfg.Linger)
			ready := len(ps.queue) > 1 || head.b.Size() >= p.cfg.BatchSize || p.flushing > 0 || p.closed || !now.Before(due)
			if !ready {
				wait = min(wait, due.Sub(now))
				continue
			}
			if _, started := byTopic[t.name]; !started && p.inFlight+len(byTopic) >= p.cfg.MaxInFlight {
				continue // woken again when a request ends
			}
			ps.queue = ps.queue[1:]
			ps.inFlight = true
			p.stampLocked(ps, head)
			byTopic[t.name] = append(byTopic[t.name], head)
		}
	}
	p.inFlight += len(byTopic)
	p.mu.Unlock()
	for _, c := range expired {
		c.run()
	}
	for topic, batches := range byTopic {
		p.wg.Add(1)
		go p.deliver(topic, batches)
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
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.RequestTimeout)
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
				case code.Retriable():
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
		case <-p.stop:
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
// takes a new producer id (sequences restart) before its next batch.
func (p *Producer) finish(bb *batchBuf, base int64, err error) {
	p.mu.Lock()
	bb.part.inFlight = false
	if err != nil && !p.cfg.DisableIdempotence {
		p.ident.stale = true
	}
	c := p.finishLocked(bb, base, err)
	p.mu.Unlock()
	c.run()
	p.signal()
}

func keep(bs []*batchBuf, f func(*batchBuf) bool) []*batchBuf {
	out := bs[:0]
	for _, b := range bs {
		if f(b) {
			out = append(out, b)
		}
	}
	return out
}
