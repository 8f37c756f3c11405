package produce

import (
	"context"
	"errors"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// errNotSent: flush left a built batch unsent (see flush).
var errNotSent = errors.New("batch not sent")

// flush builds batch b of lane l from the slices whose requests still wait,
// stamps it with the lane's producer id and next sequence (idempotence.go),
// sends it to the partition's leader (retries as sendWithRetry does) and
// answers its requests. Called by the lane's goroutine only, so a lane has
// one batch in flight at a time and its sequences reach the leader in order.
//
// The send's deadline is the latest of its requests' deadlines, so no
// request loses time to the batch it shares; a request whose own deadline
// passes first answers "outcome unknown" by itself, and the send is
// cancelled as soon as none of its requests waits any more.
func (a *accumulator) flush(l *lane, b *pendingBatch) {
	p, k := a.p, l.key
	bld := p.builders.Get().(*record.Builder)
	defer func() { bld.Reset(); p.builders.Put(bld) }()
	bld.Reset()

	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &inFlight{cancel: cancel}
	f.waiting.Store(1) // the builder's hold: no cancel before every slice is in
	taken, deadline := a.take(b, bld, f)
	if deadline.IsZero() { // a caller's context without deadline (not Produce's)
		deadline = time.Now().Add(p.cfg.Timeout)
	}
	f.deadline = deadline // before the hold goes: release reads it
	f.release()
	if len(taken) == 0 {
		return
	}
	ctx, cancelDeadline := context.WithDeadline(parent, deadline)
	defer cancelDeadline()

	stamped := false
	if k.acks == protocol.AcksAll {
		stamped = l.seq.stamp(ctx, &p.ids, bld)
	} else {
		bld.SetProducer(record.NoProducerID, record.NoProducerEpoch, record.NoSequence)
	}
	batch, err := bld.Build()
	var resp protocol.ProduceResponse
	switch {
	case err != nil:
		if errors.Is(err, record.ErrTooLarge) {
			err = protocol.MessageTooLarge.Err("%v", err)
		}
	case ctx.Err() != nil:
		// Every request gave up, or its time ran out, while the batch was
		// built: nobody waits for its answer, so it is not sent.
		err = errNotSent
	default:
		p.metrics.BatchRecords.Observe(float64(bld.Count()))
		if route, ok := p.meta.Route(k.topic); !ok {
			err = protocol.UnknownTopicOrPartition.Err("topic %q was deleted", k.topic)
		} else {
			resp, err = p.sendWithRetry(ctx, partRequest{dest: dest{k.topic, k.acks, route}, partition: k.partition, batch: batch, answers: &f.answers})
			if stamped {
				// Only a batch that may have reached a leader moves the
				// sequence or puts it in doubt; one never sent leaves it.
				l.seq.sent(bld.Count(), err)
			}
		}
		if err == nil {
			p.metrics.Bytes.Add(float64(len(batch)))
		}
	}
	a.deliver(taken, k.partition, resp.BaseOffset, err)
}

// take encodes into bld, in order, the slices of b whose requests still
// wait, marks them sent in f and returns them with the latest deadline of
// their requests. A slice is left out when its request gave up (it answered
// "not sent" itself), or when an earlier slice of the same request and
// partition failed (then it is answered here with that error's code: sending
// it would put the request's later records before the failed ones when the
// client retries).
//
// The records are copied under the request's lock, so a request that gives
// up never returns (letting its body be reused) while its records are being
// read.
func (a *accumulator) take(b *pendingBatch, bld *record.Builder, f *inFlight) ([]*slice, time.Time) {
	taken := b.slices[:0] // b is not used after this
	var deadline time.Time
	for _, s := range b.slices {
		w := s.w
		w.mu.Lock()
		switch {
		case w.gone:
		case s.part.failed != nil:
			err := protocol.CodeOf(s.part.failed).Err("not sent: earlier records of this request for partition %d failed: %v",
				s.part.partition, s.part.failed)
			for _, i := range s.index {
				w.results[i] = Result{Partition: s.part.partition, Err: err}
			}
			w.answerLocked(s)
		default:
			s.state, s.base, s.flight = sliceSent, bld.Count(), f
			f.waiting.Add(1)
			for _, i := range s.index {
				rec := w.recs[i].Record
				if rec.Timestamp == 0 {
					rec.Timestamp = s.part.ts
				}
				bld.Append(rec)
			}
			if w.deadline.After(deadline) {
				deadline = w.deadline
			}
			taken = append(taken, s)
		}
		w.mu.Unlock()
	}
	return taken, deadline
}

// deliver answers the sent slices of a batch: each record's offset (the
// batch's base offset plus the record's position in the batch), or the
// batch's error as settle words it for the record's request. Requests that
// gave up meanwhile have answered already and are skipped.
func (a *accumulator) deliver(taken []*slice, part int32, base int64, err error) {
	for _, s := range taken {
		w := s.w
		w.mu.Lock()
		if !w.gone {
			var e error
			switch {
			case errors.Is(err, errNotSent):
				e = protocol.RequestTimedOut.Err("not sent: the time (-produce-timeout %v) of every request in the batch of partition %d ran out before it was sent",
					a.p.cfg.Timeout, part)
				s.part.failed = e
			case err != nil:
				e = a.p.settle(w.ctx, part, err)
				s.part.failed = e
			}
			for j, i := range s.index {
				if e != nil {
					w.results[i] = Result{Partition: part, Err: e}
				} else {
					w.results[i] = Result{Partition: part, Offset: base + int64(s.base+j)}
				}
			}
			w.answerLocked(s)
		}
		w.mu.Unlock()
	}
}
