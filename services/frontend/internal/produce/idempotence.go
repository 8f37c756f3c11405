package produce

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/record"
)

// The accumulator's lanes are idempotent producers, as Kafka's REST proxy is
// for the batches it builds: each lane stamps its batches with a producer id
// of its own, the id's epoch and consecutive sequence numbers, so that a
// resend of a batch whose answer was lost (a deadline tore the shared storage
// connection down, the old copy still reaches the leader) is answered by the
// leader with its original offsets instead of being appended again, and a
// late copy is never appended after the lane's next batch.
//
// A lane whose batch failed for good (not retriable, retries exhausted, or
// given up with an unknown outcome) no longer knows which sequence the
// leader expects, so its next batch raises the id's epoch and starts at
// sequence 0, as a Kafka producer bumps its epoch (KIP-360): the leader then
// refuses every batch of the older epoch (INVALID_PRODUCER_EPOCH), so a copy
// of the failed batch still on its way (its connection torn down by a
// deadline, the leader stalled) can never land after the lane's next batch.
// The id is the lane's alone (metadata hands each out once), so raising its
// epoch needs nobody's leave; past the largest epoch the lane takes a new id.
// When no id can be had (metadata down), batches go unstamped: the frontend
// prefers producing at least once to refusing records.
//
// Only acks=all lanes are stamped, as Kafka allows idempotence with acks=all
// only: with acks leader or none a failover may lose a batch the old leader
// acknowledged, and the lane's next batch would skip a sequence and be
// refused (OUT_OF_ORDER_SEQUENCE_NUMBER) where an unstamped one goes through.
// Those lanes stay at-least-once.

// ProducerIDs hands out idempotent producer ids; *cluster.Client is one (POST
// /v1/producers: the metadata leader hands ids out of a reserved block, never
// twice). Called from lane goroutines concurrently.
type ProducerIDs interface {
	InitProducerID(ctx context.Context) (cluster.InitProducerIDResponse, error)
}

// Bounds of a producer id allocation.
const (
	pidAttempts = 3               // InitProducerID calls per allocation
	pidTimeout  = 2 * time.Second // one allocation, attempts and pauses included
	// pidCooldown: after an allocation failed, lanes without an id send
	// unstamped batches this long without asking metadata again, so an
	// outage costs one allocation's wait, not one per batch.
	pidCooldown = 5 * time.Second
)

// pidSource allocates producer ids for lanes, with retries, and remembers a
// failure for a while. It is safe for concurrent use.
type pidSource struct {
	src      ProducerIDs // nil: every batch goes unstamped
	log      *slog.Logger
	backoff  time.Duration // first pause between attempts, doubled after each
	timeout  time.Duration // bounds one allocation
	cooldown time.Duration // see pidCooldown

	mu       sync.Mutex
	retryAt  time.Time // no allocation before; guarded by mu
	degraded bool      // the warning was logged, no id obtained since; guarded by mu
}

// get returns a new producer id and its epoch, or ok false when none can be
// had now: no source, a recent failure (cooldown), or pidAttempts calls
// failed within pidTimeout. The first failure after a success logs a
// warning; the next success logs that ids are back. ctx is the batch's: when
// it ends first, get gives up without counting a failure.
func (s *pidSource) get(ctx context.Context) (id int64, epoch int16, ok bool) {
	if s.src == nil {
		return 0, 0, false
	}
	s.mu.Lock()
	cooling := time.Now().Before(s.retryAt)
	s.mu.Unlock()
	if cooling {
		return 0, 0, false
	}
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	backoff := s.backoff
	var err error
	for attempt := 0; attempt < pidAttempts && actx.Err() == nil; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-actx.Done():
			}
			t.Stop()
			backoff *= 2
			if actx.Err() != nil {
				break
			}
		}
		var r cluster.InitProducerIDResponse
		if r, err = s.src.InitProducerID(actx); err == nil {
			if r.ProducerID < 0 || r.ProducerEpoch < 0 {
				err = fmt.Errorf("metadata handed out producer id %d epoch %d", r.ProducerID, r.ProducerEpoch)
				continue
			}
			s.mu.Lock()
			if s.degraded {
				s.degraded = false
				s.log.Info("producer ids available again: record-body batches are idempotent again")
			}
			s.mu.Unlock()
			return r.ProducerID, r.ProducerEpoch, true
		}
	}
	if ctx.Err() != nil {
		return 0, 0, false // the batch's requests gave up: not metadata's failure
	}
	if err == nil {
		err = actx.Err()
	}
	s.mu.Lock()
	s.retryAt = time.Now().Add(s.cooldown)
	if !s.degraded {
		s.degraded = true
		s.log.Warn("no producer id from metadata: record-body batches go without one (at-least-once: a resend after a lost answer may duplicate or reorder a batch) until metadata answers",
			"err", err, "retry_after", s.cooldown)
	}
	s.mu.Unlock()
	return 0, 0, false
}

// laneSeq is a lane's idempotent identity and the sequence of its next
// batch. It outlives the lane's goroutines (a lane ends when idle and a new
// one starts with the next records): the accumulator keeps one per laneKey
// and hands it from one goroutine of the lane to the next under its mu, and
// only the lane's current goroutine uses it.
type laneSeq struct {
	id    int64 // record.NoProducerID: none yet, or dropped after a failure
	epoch int16
	seq   int32 // the next batch's base sequence
}

// stamp gives bld the lane's producer id, epoch and next sequence, getting
// an id first when the lane has none; without one the batch is unstamped.
// bld must hold the batch's records, and is stamped in every case (pooled
// builders keep their producer fields across Reset).
func (s *laneSeq) stamp(ctx context.Context, ids *pidSource, bld *record.Builder) (stamped bool) {
	if s.id == record.NoProducerID {
		if id, epoch, ok := ids.get(ctx); ok {
			s.id, s.epoch, s.seq = id, epoch, 0
		}
	}
	if s.id == record.NoProducerID {
		bld.SetProducer(record.NoProducerID, record.NoProducerEpoch, record.NoSequence)
		return false
	}
	bld.SetProducer(s.id, s.epoch, s.seq)
	return true
}

// sent records the outcome of a stamped batch of n records that went to a
// leader: on success the sequence moves past it (wrapping as Kafka's does);
// on failure the leader may or may not hold it, the next sequence is in
// doubt, and the next batch raises the epoch and starts at sequence 0 (at
// the largest epoch the lane drops its id: the next batch gets a fresh one).
func (s *laneSeq) sent(n int, err error) {
	switch {
	case err == nil:
		s.seq = record.IncrementSequence(s.seq, int32(n))
	case s.epoch < math.MaxInt16:
		s.epoch, s.seq = s.epoch+1, 0
	default:
		s.id, s.epoch, s.seq = record.NoProducerID, record.NoProducerEpoch, 0
	}
}
