package fsm

import (
	"fmt"
	"math"
)

// Producer id allocation (Kafka's InitProducerId without transactions, and
// its ProducerIdsRecord). The FSM keeps one counter, the next id never
// handed out; AllocProducerIDs reserves the block [counter, counter+Count)
// for whoever proposed it and moves the counter past it. Ids are therefore
// unique and never reused; a reserved block that is not used up (a leader
// lost its leadership or restarted) is abandoned, leaving a gap.
const (
	// FirstProducerID is the counter's value in a new cluster, and in a
	// snapshot or log written before producer ids existed. Ids below it are
	// never allocated: 0 is int64's zero value, so a header or body that
	// forgot to set the id reads as 0 and must not name a real producer
	// (-1, record.NoProducerID, means "no producer id").
	FirstProducerID int64 = 1000
	// MaxProducerIDBlock bounds one AllocProducerIDs' Count.
	MaxProducerIDBlock int64 = 1_000_000
)

// allocProducerIDs reserves c.Count ids and returns the first one.
func (s *state) allocProducerIDs(c *AllocProducerIDs) (int64, error) {
	if c.Count < 1 || c.Count > MaxProducerIDBlock {
		return 0, fmt.Errorf("%w: producer id block of %d is outside 1..%d", ErrMalformedCommand, c.Count, MaxProducerIDBlock)
	}
	first := s.nextProducerID
	if first > math.MaxInt64-c.Count {
		return 0, fmt.Errorf("%w: %d ids left after %d, %d asked", ErrProducerIDsExhausted, math.MaxInt64-first, first, c.Count)
	}
	s.nextProducerID = first + c.Count
	return first, nil
}

// NextProducerID returns the lowest producer id no block holds yet.
func (f *FSM) NextProducerID() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.nextProducerID
}
