package produce

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// The accumulator lets the records of concurrent record-body requests bound
// for one partition share a RecordBatch (Config.Linger > 0).
//
// Records go into lanes, one per (topic, partition, acks): a batch's produce
// request carries one acks level, so records with different acks never share
// a batch. A lane has an open batch taking appends and, ahead of it, batches
// sealed because they were full. One goroutine per lane sends its batches one
// after the other, each only after the previous one was answered (retries
// included), so a lane has at most one batch in flight and its order on the
// leader is its append order.
//
// A request appends all its records for a partition under the lane's lock in
// one go, in request order, so they are contiguous in the lane: in one batch,
// or, past Config.BatchMaxBytes, in consecutive batches.
//
// The open batch is sent when its linger has passed and the previous batch was
// answered, or sealed at once when it is full. It stays open while the batch
// before it is in flight: as in Kafka's accumulator, linger makes a batch
// ready, not closed. Sealing at the linger would cap a partition at one
// linger's worth of records per leader round trip and queue the rest behind
// it whenever the round trip is longer than the linger (acks=all with fsync).
//
// The lanes hold references to records, not copies: the records are the
// requests' own (admitted by the in-flight Budget and kept by them until they
// answer). They are encoded when their batch is sent, under the request's
// lock, and only for requests still waiting; a request that gives up first
// marks itself gone, answers "not sent" for its queued records and drops its
// records, which its batch then skips. So the accumulator never holds records
// of a request that has answered, and the only bytes it owns are one batch in
// flight per lane, cancelled once none of its requests waits any more.
//
// Lock order: accumulator.mu, then lane.mu, then waiter.mu. No lane lock is
// held while a batch is built, sent or answered.
type accumulator struct {
	p        *Producer
	linger   time.Duration
	maxBytes int
	// closed is set by close: no lane starts any more and lanes send their
	// open batch without waiting for the linger.
	closed atomic.Bool

	mu    sync.Mutex
	lanes map[laneKey]*lane // lanes with records queued or a batch in flight; guarded by mu
	// seqs are the lanes' idempotent identities (idempotence.go), kept
	// while their lanes come and go: one small entry per (topic, partition,
	// acks) ever produced to, never dropped (a deleted topic's stay too).
	// The map is guarded by mu; each entry is used by its lane's goroutine.
	seqs map[laneKey]*laneSeq
	wg   sync.WaitGroup // the lanes' goroutines; Add under mu while !closed
}

// laneKey names a lane.
type laneKey struct {
	topic     string
	partition int32
	acks      int8
}

// lane is one (topic, partition, acks) queue of records. Its goroutine (run)
// is started with it and removes it from the accumulator when it has nothing
// left.
type lane struct {
	key laneKey
	seq *laneSeq // its identity; used by the goroutine only
	// wake tells the goroutine that a batch was sealed full or that the
	// accumulator is closing; buffered (1), signalled without blocking.
	wake chan struct{}

	mu   sync.Mutex
	open *pendingBatch   // taking appends, nil when none; guarded by mu
	full []*pendingBatch // sealed because full, oldest first, all older than open; guarded by mu
}

// pendingBatch is a batch being gathered: slices of requests' records, not
// yet encoded.
type pendingBatch struct {
	firstAt time.Time // when its first record was appended
	size    int       // upper bound of its encoded size (recordSizeBound)
	count   int       // records appended
	slices  []*slice  // in append order
}

func newAccumulator(p *Producer, linger time.Duration, maxBytes int) *accumulator {
	return &accumulator{p: p, linger: linger, maxBytes: maxBytes, lanes: make(map[laneKey]*lane), seqs: make(map[laneKey]*laneSeq)}
}

// add appends request w's records for the partition of g (positions in w's
// records, in request order) to the lane of (topic, partition, acks). Records
// without a timestamp get ts. It reports false, adding nothing, once the
// accumulator is closed; the caller then sends the records itself. Called
// from the request's goroutine, before it waits.
func (a *accumulator) add(w *waiter, topic string, acks int8, g *group, ts int64) bool {
	k := laneKey{topic: topic, partition: g.partition, acks: acks}
	a.mu.Lock()
	if a.closed.Load() {
		a.mu.Unlock()
		return false
	}
	l := a.lanes[k]
	if l == nil {
		seq := a.seqs[k]
		if seq == nil {
			seq = &laneSeq{id: record.NoProducerID, epoch: record.NoProducerEpoch}
			a.seqs[k] = seq
		}
		// The lane before it under k (if any) has ended its last flush: it
		// left a.lanes, under mu, only after.
		l = &lane{key: k, seq: seq, wake: make(chan struct{}, 1)}
		a.lanes[k] = l
		a.wg.Add(1)
		go a.run(l)
	}
	l.mu.Lock()
	a.mu.Unlock()
	sealed := l.appendLocked(w, &part{partition: g.partition, ts: ts}, g.index, a.maxBytes, time.Now())
	l.mu.Unlock()
	if sealed {
		l.signal()
	}
	return true
}

// appendLocked appends the records at positions index of w, in order, to
// the open batch, sealing it and opening the next one whenever a record
// would take it past maxBytes (a batch always takes its first record,
// however large). It reports whether it sealed a batch.
func (l *lane) appendLocked(w *waiter, pt *part, index []int, maxBytes int, now time.Time) (sealed bool) {
	var cur *slice // w's slice in the open batch
	for j, i := range index {
		b := l.open
		if b == nil {
			b = &pendingBatch{firstAt: now, size: record.HeaderSize}
			l.open = b
		}
		n := recordSizeBound(&w.recs[i].Record, b.count)
		if b.count > 0 && b.size+n > maxBytes {
			l.full = append(l.full, b)
			sealed = true
			b = &pendingBatch{firstAt: now, size: record.HeaderSize}
			l.open, cur = b, nil
			n = recordSizeBound(&w.recs[i].Record, 0)
		}
		if cur == nil {
			// index[j:j] grows over index's own array as records join it.
			cur = &slice{w: w, part: pt, index: index[j:j]}
			b.slices = append(b.slices, cur)
			w.track(cur)
		}
		cur.index = cur.index[:len(cur.index)+1]
		b.size += n
		b.count++
	}
	return sealed
}

// signal wakes the lane's goroutine without blocking.
func (l *lane) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run is a lane's goroutine: it sends the lane's batches one at a time until
// the lane is empty, then ends (the lane was removed by next).
func (a *accumulator) run(l *lane) {
	defer a.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		b := a.next(l, t)
		if b == nil {
			return
		}
		a.flush(l, b)
	}
}

// next returns the lane's next batch to send, waiting on t for the open
// batch's linger: the oldest full batch at once, else the open batch once
// its linger has passed (at once when closing). With nothing left it removes
// the lane from the accumulator and returns nil; appends that come later
// start a new lane.
func (a *accumulator) next(l *lane, t *time.Timer) *pendingBatch {
	for {
		l.mu.Lock()
		if len(l.full) > 0 {
			b := l.full[0]
			l.full[0] = nil
			l.full = l.full[1:]
			l.mu.Unlock()
			return b
		}
		if b := l.open; b != nil {
			wait := a.linger - time.Since(b.firstAt)
			if wait <= 0 || a.closed.Load() {
				l.open = nil
				l.mu.Unlock()
				return b
			}
			l.mu.Unlock()
			t.Reset(wait)
			select {
			case <-t.C:
			case <-l.wake:
				t.Stop()
			}
			continue
		}
		l.mu.Unlock()
		a.mu.Lock()
		l.mu.Lock()
		idle := l.open == nil && len(l.full) == 0
		if idle {
			delete(a.lanes, l.key)
		}
		l.mu.Unlock()
		a.mu.Unlock()
		if idle {
			return nil
		}
	}
}

// close makes the lanes send what they hold without lingering, refuses new
// records (add reports false) and waits for every lane's goroutine: until
// every batch is answered or abandoned by all its requests.
func (a *accumulator) close() {
	a.mu.Lock()
	a.closed.Store(true)
	for _, l := range a.lanes {
		l.signal()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// Upper bounds of the varints in a record whose values are not known when
// it is appended.
const (
	maxVarlongSize = 10 // the timestamp delta: the batch's first record may still change
)

// recordSizeBound is an upper bound of rec's encoded size as the
// offsetDelta-th record of a batch: exact (libs/record's encoding) but for
// the timestamp delta, counted at its largest, since the batch's base
// timestamp is its first record's and records of requests that give up are
// left out when the batch is built. Leaving records out only lowers the
// offset deltas, so the bound holds for the built batch.
func recordSizeBound(rec *record.Record, offsetDelta int) int {
	body := 1 + maxVarlongSize + uvarintSize(offsetDelta) + bytesFieldSize(rec.Key) + bytesFieldSize(rec.Value) +
		uvarintSize(len(rec.Headers))
	for i := range rec.Headers {
		h := &rec.Headers[i]
		body += uvarintSize(len(h.Key)) + len(h.Key) + bytesFieldSize(h.Value)
	}
	return uvarintSize(body) + body
}

// uvarintSize is the size of n >= 0 as a zigzag varint.
func uvarintSize(n int) int { return (bits.Len64(uint64(n)<<1|1) + 6) / 7 }

// bytesFieldSize is the size of a nullable bytes field (length -1 when nil).
func bytesFieldSize(b []byte) int {
	if b == nil {
		return 1
	}
	return uvarintSize(len(b)) + len(b)
}
