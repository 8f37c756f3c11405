package replica

import (
	"slices"
	"time"
)

// FollowerState is what a leader knows of one follower from its fetches.
type FollowerState struct {
	// LEO is the follower's log end offset: the offset of its last fetch.
	LEO int64
	// Flushed is the offset below which the follower's log is fsynced.
	Flushed int64
	// CaughtUpAt is the last time the follower's fetch reached the leader's
	// log end offset (Kafka's lastCaughtUpTime).
	CaughtUpAt time.Time
	// prevLeaderEnd and prevFetchAt are the leader's log end offset and the
	// time of the follower's previous fetch: a fetch that reaches that end
	// shows the follower was caught up then, even if the leader appended
	// more meanwhile (Kafka's lastFetchLeaderLogEndOffset).
	prevLeaderEnd int64
	prevFetchAt   time.Time
}

// Progress is a replica's position as it counts toward the high watermark:
// its flushed offset under the fsync flush policy, its log end otherwise.
func (f FollowerState) Progress(durable bool) int64 {
	if durable {
		return min(f.Flushed, f.LEO)
	}
	return f.LEO
}

// HighWatermark is the ISR rule of the high watermark: the smallest progress
// over the in-sync replicas (the leader's own included as self), never below
// the current high watermark (it only moves forward on a leader). Replicas in
// the ISR the leader has not heard from count as 0.
func HighWatermark(current int64, self int32, leader FollowerState, isr []int32, followers map[int32]FollowerState, durable bool) int64 {
	hw := leader.Progress(durable)
	for _, id := range isr {
		if id == self {
			continue
		}
		f, ok := followers[id]
		if !ok {
			return current
		}
		hw = min(hw, f.Progress(durable))
	}
	return max(hw, current)
}

// ShrinkISR returns the ISR without the followers that have not caught up
// within maxLag (Kafka's replica.lag.time.max.ms), and whether it changed.
// The leader always stays.
func ShrinkISR(isr []int32, self int32, followers map[int32]FollowerState, now time.Time, maxLag time.Duration) ([]int32, bool) {
	out := make([]int32, 0, len(isr))
	for _, id := range isr {
		f, ok := followers[id]
		if id == self || (ok && now.Sub(f.CaughtUpAt) <= maxLag) {
			out = append(out, id)
		}
	}
	return out, len(out) != len(isr)
}

// ExpandISR returns the ISR with the replicas outside it whose log end offset
// reached the high watermark and whose fetches are current (caught up within
// maxLag), in replica order, and whether it changed.
func ExpandISR(isr, replicas []int32, followers map[int32]FollowerState, hw int64, now time.Time, maxLag time.Duration) ([]int32, bool) {
	out := slices.Clone(isr)
	for _, id := range replicas {
		if slices.Contains(isr, id) {
			continue
		}
		f, ok := followers[id]
		if ok && f.LEO >= hw && now.Sub(f.CaughtUpAt) <= maxLag {
			out = append(out, id)
		}
	}
	return out, len(out) != len(isr)
}

// CaughtUp updates a follower's state for a fetch at fetchOffset when the
// leader's log ends at leaderEnd. A fetch that reaches the leader's end marks
// the follower caught up now; one that reaches the end the leader had at the
// follower's previous fetch marks it caught up as of that fetch. So a follower
// keeping pace with a continuous stream of appends stays in the ISR although
// the leader's end moves on between its fetches.
func CaughtUp(f FollowerState, fetchOffset, flushed, leaderEnd int64, now time.Time) FollowerState {
	f.LEO = fetchOffset
	if flushed >= 0 {
		f.Flushed = flushed
	}
	switch {
	case fetchOffset >= leaderEnd:
		f.CaughtUpAt = now
	case !f.prevFetchAt.IsZero() && fetchOffset >= f.prevLeaderEnd && f.prevFetchAt.After(f.CaughtUpAt):
		f.CaughtUpAt = f.prevFetchAt
	}
	f.prevLeaderEnd, f.prevFetchAt = leaderEnd, now
	return f
}
