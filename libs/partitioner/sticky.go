package partitioner

import (
	"math/rand/v2"
	"sync"
)

// Sticky is the partitioner for records without a key, in the manner of
// Kafka's sticky partitioner (KIP-480): every keyless record goes to the
// current partition until the producer closes the batch for it and calls
// Next, which moves to a different partition chosen at random. Batches fill
// faster and requests carry fewer, larger batches than with round robin,
// while load still spreads over all partitions.
//
// Use one Sticky per topic. It is safe for concurrent use.
type Sticky struct {
	mu         sync.Mutex
	partitions int // partition count of the topic; guarded by mu
	current    int // the sticky partition, -1 when partitions < 1; guarded by mu
}

// NewSticky returns a Sticky over partitions partitions, starting on one
// chosen at random.
func NewSticky(partitions int) *Sticky {
	s := &Sticky{}
	s.SetPartitions(partitions)
	return s
}

// Partition returns the current partition: the one for the next keyless
// record. It is -1 when the partition count is below 1.
func (s *Sticky) Partition() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Partitions returns the partition count the Sticky chooses among.
func (s *Sticky) Partitions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.partitions
}

// Next moves to a new partition, different from the current one when there
// is more than one, and returns it. A producer calls it when the batch for
// the current partition is full or sent.
func (s *Sticky) Next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextLocked()
	return s.current
}

// NextAfter moves to a new partition only if the current one is still prev,
// and returns the current partition afterwards. When several goroutines
// finish a batch on the same partition at once, each calls NextAfter with
// the partition it used and the Sticky moves once, not once per goroutine
// (Kafka's StickyPartitionCache.nextPartition does the same).
func (s *Sticky) NextAfter(prev int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == prev {
		s.nextLocked()
	}
	return s.current
}

// SetPartitions changes the partition count, as when a topic grows. The
// current partition stays if it is still in range; otherwise a new one is
// chosen. A count below 1 makes Partition return -1 until a valid count is
// set.
func (s *Sticky) SetPartitions(partitions int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partitions = partitions
	switch {
	case partitions < 1:
		s.current = -1
	case s.current < 0 || s.current >= partitions:
		s.current = rand.IntN(partitions)
	}
}

// nextLocked picks a partition uniformly among those other than the current
// one. s.mu must be held.
func (s *Sticky) nextLocked() {
	switch {
	case s.partitions < 1:
		s.current = -1
	case s.partitions == 1:
		s.current = 0
	case s.current < 0:
		s.current = rand.IntN(s.partitions)
	default:
		p := rand.IntN(s.partitions - 1)
		if p >= s.current {
			p++ // skip the current partition
		}
		s.current = p
	}
}
