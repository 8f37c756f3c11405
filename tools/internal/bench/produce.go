package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/client"
)

// plan decides, for records about to be sent, whether they are sent at all
// and whether they count: records sent before warmupEnd are warm-up; after
// it, limit records count (or, with limit 0, those sent before end). It is
// safe for concurrent use by the producers.
type plan struct {
	warmupEnd time.Time
	end       time.Time // the end of the measured period; unused with limit
	limit     int64     // records to count; 0: until end
	claimed   atomic.Int64
}

// take returns how many of n records to send now (0: stop sending) and
// whether they count.
func (p *plan) take(now time.Time, n int) (int, bool) {
	if now.Before(p.warmupEnd) {
		return n, false
	}
	if p.limit == 0 {
		if now.Before(p.end) {
			return n, true
		}
		return 0, false
	}
	after := p.claimed.Add(int64(n))
	switch over := after - p.limit; {
	case over <= 0:
		return n, true
	case over < int64(n):
		return n - int(over), true
	}
	return 0, false
}

// producing is the produce side of a run, shared by its producers; the
// producers' callbacks update it concurrently.
type producing struct {
	side
	sent     atomic.Int64 // records handed to the SDK or posted, warm-up included
	failures *Failures    // the run's
	lats     []*Latencies // one per producer
	tracker  *tracker     // e2e: acknowledged offsets; nil otherwise
}

// outcome accounts for one record's outcome, n records of a JSON request
// sharing it: m.Err, or success at m.Partition/m.Offset (n == 1 for e2e).
func (pr *producing) outcome(lat *Latencies, sentAt time.Time, counted bool, valueSize int, n int64, m client.RecordMetadata) {
	if m.Err != nil {
		pr.failures.Add(m.Err, n)
		return
	}
	now := time.Now()
	if pr.tracker != nil {
		pr.tracker.acked(m.Partition, m.Offset)
	}
	if !counted {
		pr.warmup.Add(n)
		return
	}
	lat.RecordN(now.Sub(sentAt), n)
	pr.count(n, n*int64(valueSize), now)
}

// acked returns the records that succeeded so far, warm-up included.
func (pr *producing) acked() int64 { return pr.counted.Load() + pr.warmup.Load() }

// newValue returns a value of size printable random bytes (random uppercase
// and lowercase letters and digits, as kafka-producer-perf-test's payload):
// one per producer, reused for every record (the SDK copies it).
func newValue(size int, seed uint64) []byte {
	v := make([]byte, size)
	fillRandom(mrand.New(mrand.NewPCG(seed, 1)), v)
	return v
}

// stamp writes t as big-endian Unix nanoseconds into the first 8 bytes of v.
func stamp(v []byte, t time.Time) { binary.BigEndian.PutUint64(v, uint64(t.UnixNano())) }

// stampOf reads the send time stamped into v; ok is false for a value too
// short to hold one.
func stampOf(v []byte) (int64, bool) {
	if len(v) < stampSize {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

// sdkProducer sends records with one SDK Producer until the plan says stop,
// ctx ends or Send fails (stop is then called with the reason), then closes
// the producer: what is buffered is sent and the outcomes are awaited, up to
// drain. It runs on its own goroutine, owned by the run.
//
// With --txn-records it sends in transactions of that many records,
// committing each (its latency goes to r.commits[i]); the last, shorter
// one is committed at the end.
func (r *run) sdkProducer(ctx, drain context.Context, i int, p *client.Producer, pacer *Pacer, stop func(error)) {
	inTxn := 0 // records sent in the open transaction
	end := r.txnCommitter(i, stop, p.CommitTxn)
	commit := func(c context.Context) bool {
		if !end(c) {
			return false
		}
		inTxn = 0
		return true
	}
	defer func() {
		if inTxn > 0 {
			commit(drain)
		}
		if err := p.Close(drain); err != nil && drain.Err() == nil {
			r.stderrf("producer %d: close: %v", i, err)
		}
	}()
	txn := r.cfg.TxnRecords
	keys := r.cfg.Keys.NewGen(r.seed+uint64(i), i)
	value := newValue(r.cfg.RecordSize, r.seed+uint64(i))
	lat := r.prod.lats[i]
	size := r.cfg.RecordSize
	for {
		sentAt, ok := pace(ctx, pacer, 1)
		if !ok {
			return
		}
		n, counted := r.plan.take(sentAt, 1)
		if n == 0 {
			return
		}
		if r.cfg.Mode == ModeE2E {
			stamp(value, sentAt)
		}
		if txn > 0 && inTxn == 0 {
			if err := p.BeginTxn(ctx); err != nil {
				if ctx.Err() == nil {
					stop(fmt.Errorf("producer %d: begin a transaction: %w", i, err))
				}
				return
			}
		}
		rec := client.ProducerRecord{Topic: r.cfg.Topic, Partition: -1, Key: keys.Next(), Value: value, Timestamp: sentAt.UnixMilli()}
		err := p.Send(ctx, rec, func(m client.RecordMetadata) { r.prod.outcome(lat, sentAt, counted, size, 1, m) })
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.prod.failures.Add(err, 1)
			stop(fmt.Errorf("producer %d: send: %w", i, err))
			return
		}
		r.prod.sent.Add(1)
		if txn > 0 {
			if inTxn++; inTxn == txn && !commit(ctx) {
				return
			}
		}
	}
}

// txnCommitter returns producer i's commit of its open transaction by end:
// its latency goes to the run's commit latencies; a failure stops the run
// (unless the commit's context ended) and is false.
func (r *run) txnCommitter(i int, stop func(error), end func(context.Context) error) func(context.Context) bool {
	return func(c context.Context) bool {
		start := time.Now()
		if err := end(c); err != nil {
			if c.Err() == nil {
				stop(fmt.Errorf("producer %d: commit: %w", i, err))
			}
			return false
		}
		r.commits[i].Record(time.Since(start))
		return true
	}
}

// errUnanswered is the failure of records whose outcome was still unknown
// when the run was interrupted.
var errUnanswered = errors.New("no answer before the run was interrupted")
