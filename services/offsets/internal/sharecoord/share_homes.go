package sharecoord

import (
	"sync"
	"time"
)

// homes spreads the members of each share group over the partitions of
// the topic they read: a member's acquisitions visit first the partition
// its place picks (visitFirst), then the others in order, so that each
// member reads mostly the partitions of its own and the records it is
// given follow one another in them. A consumer that is given scattered
// ranges of every partition fetches every partition's batches and skips
// what others took, so that the group reads the topic once per member.
//
// It is the leader's memory only, a hint for the order of a visit: an
// acquisition visits every partition whatever its place, and a new leader
// starts the places again.
type homes struct {
	mu     sync.Mutex
	groups map[string]map[string]*place // group -> member -> place
	swept  time.Time
}

// place is a member's rank in its group (the smallest free when it was
// first seen), when it was last seen, and how many acquisitions it made.
type place struct {
	rank  int
	seen  time.Time
	turns uint64
}

// homeIdle is how long a member that makes no acquisition keeps its place.
const homeIdle = 30 * time.Second

// visitFirst returns the partition, of n, that member's acquisition visits
// first, at now: with m members placed, the member of rank r visits first
// partition (r + m*t) mod n at its t'th acquisition. With m a multiple of n
// (as many members as partitions, or several each) every member keeps one
// partition and each partition has m/n members; otherwise a member turns
// over the partitions r mod gcd(m, n) picks, and the members together
// cover them all.
func (h *homes) visitFirst(group, member string, n int32, now time.Time) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.swept) > homeIdle {
		h.sweep(now)
	}
	g := h.groups[group]
	if g == nil {
		if h.groups == nil {
			h.groups = map[string]map[string]*place{}
		}
		g = map[string]*place{}
		h.groups[group] = g
	}
	p := g[member]
	if p == nil {
		p = &place{rank: freeRank(g)}
		g[member] = p
	}
	p.seen = now
	first := (uint64(p.rank) + uint64(len(g))*p.turns) % uint64(n)
	p.turns++
	return int32(first)
}

// freeRank returns the smallest rank no member of g holds.
func freeRank(g map[string]*place) int {
	taken := make([]bool, len(g))
	for _, p := range g {
		if p.rank < len(taken) {
			taken[p.rank] = true
		}
	}
	for r, t := range taken {
		if !t {
			return r
		}
	}
	return len(g)
}

// leave forgets a member that left its group.
func (h *homes) leave(group, member string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.groups[group]; g != nil {
		delete(g, member)
		if len(g) == 0 {
			delete(h.groups, group)
		}
	}
}

// sweep forgets the members idle for homeIdle, and the groups left empty.
func (h *homes) sweep(now time.Time) {
	h.swept = now
	for name, g := range h.groups {
		for m, p := range g {
			if now.Sub(p.seen) > homeIdle {
				delete(g, m)
			}
		}
		if len(g) == 0 {
			delete(h.groups, name)
		}
	}
}
