package bench

import (
	"sync"
)

// tracker follows, per partition, what e2e producers had acknowledged and
// how far the consumers have read, to tell when every acknowledged record
// was consumed. It is safe for concurrent use.
type tracker struct {
	mu        sync.Mutex
	start     []int64       // where consuming starts: the partition ends before producing
	pos       []int64       // the next offset to consume (the highest consumed + 1), at least start
	maxAcked  []int64       // the highest acknowledged offset, -1 none
	ackedN    []int64       // acknowledged records
	producing bool          // producers may still acknowledge records
	done      chan struct{} // closed once producing ended and every acknowledged record was consumed
	closed    bool
}

// newTracker starts tracking from the given partition ends.
func newTracker(start []int64) *tracker {
	t := &tracker{start: start, pos: append([]int64(nil), start...), maxAcked: make([]int64, len(start)),
		ackedN: make([]int64, len(start)), producing: true, done: make(chan struct{})}
	for i := range t.maxAcked {
		t.maxAcked[i] = -1
	}
	return t
}

// acked notes an acknowledged record (offset -1: written, offset unknown).
func (t *tracker) acked(partition int32, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(partition) >= len(t.ackedN) || partition < 0 {
		return
	}
	t.ackedN[partition]++
	t.maxAcked[partition] = max(t.maxAcked[partition], offset)
}

// consumed notes records returned by a consumer's poll.
func (t *tracker) consumed(recs []polled) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range recs {
		if p := recs[i].partition; p >= 0 && int(p) < len(t.pos) {
			t.pos[p] = max(t.pos[p], recs[i].offset+1)
		}
	}
	t.checkLocked()
}

// startOf is where a consumer given the partition starts: past what any
// member consumed already (a partition that moved between members), and
// never before the partition's end as it was before producing.
func (t *tracker) startOf(partition int32) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pos[partition]
}

// producingEnded notes that no more records will be acknowledged.
func (t *tracker) producingEnded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.producing = false
	t.checkLocked()
}

func (t *tracker) checkLocked() {
	if t.closed || t.producing {
		return
	}
	for p := range t.pos {
		if t.pos[p] <= t.maxAcked[p] {
			return
		}
	}
	t.closed = true
	close(t.done)
}

// unconsumed returns the acknowledged records not consumed: per partition
// the offsets from the consumers' position to the highest acknowledged one,
// at most the records acknowledged there.
func (t *tracker) unconsumed() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for p := range t.pos {
		if gap := t.maxAcked[p] + 1 - t.pos[p]; gap > 0 {
			n += min(gap, t.ackedN[p])
		}
	}
	return n
}
