package assign

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/libs/groups"
)

// The checkers below are written independently of the assignors (no shared
// helpers from the package) and return errors, so that a test can prove they
// catch broken assignments.

func tp(topic string, p int32) groups.TP { return groups.TP{Topic: topic, Partition: p} }

// tps builds a list of partitions of one topic.
func tps(topic string, parts ...int32) []groups.TP {
	out := []groups.TP{}
	for _, p := range parts {
		out = append(out, tp(topic, p))
	}
	return out
}

// subscriptions merges in.Members by id into sets of known topics (count > 0).
func subscriptions(in Input) map[string]map[string]bool {
	subs := map[string]map[string]bool{}
	for _, m := range in.Members {
		if subs[m.ID] == nil {
			subs[m.ID] = map[string]bool{}
		}
		for _, t := range m.Topics {
			if in.Partitions[t] > 0 {
				subs[m.ID][t] = true
			}
		}
	}
	return subs
}

// verify checks shape, coverage and eligibility.
func verify(in Input, out map[string][]groups.TP) error {
	subs := subscriptions(in)
	if len(out) != len(subs) {
		return fmt.Errorf("%d keys for %d members", len(out), len(subs))
	}
	owner := map[groups.TP]string{}
	for id, list := range out {
		if _, ok := subs[id]; !ok {
			return fmt.Errorf("key %q is no member", id)
		}
		if list == nil {
			return fmt.Errorf("member %q: nil slice", id)
		}
		for k, p := range list {
			if k > 0 && !list[k-1].Less(p) {
				return fmt.Errorf("member %q: %v not sorted or duplicated", id, list)
			}
			if !subs[id][p.Topic] || p.Partition < 0 || p.Partition >= in.Partitions[p.Topic] {
				return fmt.Errorf("member %q may not own %v", id, p)
			}
			if o, dup := owner[p]; dup {
				return fmt.Errorf("%v owned by %q and %q", p, o, id)
			}
			owner[p] = id
		}
	}
	for _, s := range subs {
		for t := range s {
			for p := range in.Partitions[t] {
				if _, ok := owner[tp(t, p)]; !ok {
					return fmt.Errorf("%v unassigned", tp(t, p))
				}
			}
		}
	}
	return nil
}

// spread is max-min of the assignment sizes of the given members.
func spread(out map[string][]groups.TP, ids []string) int {
	lo, hi := -1, -1
	for _, id := range ids {
		n := len(out[id])
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi - lo
}

// moved lists the partitions whose previous owner (prev has no conflicts)
// differs from their owner in out.
func moved(prev, out map[string][]groups.TP) []groups.TP {
	was := map[groups.TP]string{}
	for id, l := range prev {
		for _, p := range l {
			was[p] = id
		}
	}
	var m []groups.TP
	for id, l := range out {
		for _, p := range l {
			if o, ok := was[p]; ok && o != id {
				m = append(m, p)
			}
		}
	}
	return groups.SortTPs(m)
}

// uniformMinMoves is the fewest moves of any balanced assignment when all
// members subscribe the same topics and prev has no conflicts: P=M*q+r, a
// member can keep at most min(valid, q) plus one more for r of the members
// holding more than q; every other previously owned partition moves.
func uniformMinMoves(in Input) int {
	subs := subscriptions(in)
	total := 0
	for _, s := range subs {
		for t := range s {
			total += int(in.Partitions[t])
		}
		break // all identical
	}
	owned, keep, over := 0, 0, 0
	q, r := total/len(subs), total%len(subs)
	for id, l := range in.Previous {
		for _, p := range l {
			if !anySubscribes(subs, p.Topic) || p.Partition >= in.Partitions[p.Topic] {
				continue // deleted or unsubscribed by all: not counted as moved
			}
			owned++
		}
		if s, ok := subs[id]; ok {
			valid := 0
			for _, p := range l {
				if s[p.Topic] && p.Partition < in.Partitions[p.Topic] {
					valid++
				}
			}
			keep += min(valid, q)
			if valid > q {
				over++
			}
		}
	}
	return owned - keep - min(r, over)
}

func anySubscribes(subs map[string]map[string]bool, topic string) bool {
	for _, s := range subs {
		if s[topic] {
			return true
		}
	}
	return false
}

// unbalanced finds a chain of members m0 -> m1 -> ... -> mk where each owns a
// partition of a topic the next subscribes and mk owns at least two fewer
// partitions than m0 (a "cost-reducing path": Harvey et al., Semi-matchings
// for bipartite graphs and load balancing, 2006). Its absence means the loads
// are the best the subscriptions allow.
func unbalanced(in Input, out map[string][]groups.TP) error {
	subs := subscriptions(in)
	for src := range out {
		seen := map[string]bool{src: true}
		queue := []string{src}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			if len(out[u]) <= len(out[src])-2 {
				return fmt.Errorf("chain from %q (%d) reaches %q (%d)", src, len(out[src]), u, len(out[u]))
			}
			for v, s := range subs {
				if seen[v] {
					continue
				}
				for _, p := range out[u] {
					if s[p.Topic] {
						seen[v] = true
						queue = append(queue, v)
						break
					}
				}
			}
		}
	}
	return nil
}

var errInputChanged = errors.New("assignor modified its input")

// clone deep-copies an Input.
func clone(in Input) Input {
	c := Input{Partitions: map[string]int32{}}
	for _, m := range in.Members {
		c.Members = append(c.Members, Member{ID: m.ID, Topics: slices.Clone(m.Topics)})
	}
	for t, n := range in.Partitions {
		c.Partitions[t] = n
	}
	if in.Previous != nil {
		c.Previous = map[string][]groups.TP{}
		for id, l := range in.Previous {
			c.Previous[id] = slices.Clone(l)
		}
	}
	return c
}

// shuffled returns in with Members and every subscription in a random order,
// plus a redundant second entry for one member (a subset of its topics),
// which must change nothing.
func shuffled(r *rand.Rand, in Input) Input {
	c := clone(in)
	for _, m := range c.Members {
		r.Shuffle(len(m.Topics), func(i, j int) { m.Topics[i], m.Topics[j] = m.Topics[j], m.Topics[i] })
	}
	if len(c.Members) > 0 {
		m := c.Members[r.IntN(len(c.Members))]
		c.Members = append(c.Members, Member{ID: m.ID, Topics: m.Topics[:len(m.Topics)/2]})
	}
	r.Shuffle(len(c.Members), func(i, j int) { c.Members[i], c.Members[j] = c.Members[j], c.Members[i] })
	return c
}

// randomInput: up to 8 members, up to 4 topics (some unknown, some with no
// partitions) of up to 12 partitions; half of the cases have identical
// subscriptions.
func randomInput(r *rand.Rand) Input {
	in := Input{Partitions: map[string]int32{}}
	var topics []string
	for k := range r.IntN(5) {
		t := fmt.Sprintf("t%d", k)
		topics = append(topics, t)
		if r.IntN(8) > 0 {
			in.Partitions[t] = int32(r.IntN(13))
		}
	}
	subset := func() []string {
		var s []string
		for _, t := range append(topics, "unknown") {
			if r.IntN(2) == 0 {
				s = append(s, t)
			}
		}
		return s
	}
	shared := subset()
	identical := r.IntN(2) == 0
	for _, k := range r.Perm(20)[:r.IntN(9)] {
		m := Member{ID: fmt.Sprintf("m%02d", k), Topics: shared}
		if !identical {
			m.Topics = subset()
		}
		in.Members = append(in.Members, m)
	}
	return clone(in) // members do not share the shared slice
}

// randomPrevious gives each partition (including deleted ones past the
// count, and those of topics nobody subscribes) no owner or one random owner
// among the members and two departed ones; no partition has two owners.
func randomPrevious(r *rand.Rand, in Input) map[string][]groups.TP {
	pool := []string{"gone1", "gone2"}
	for _, m := range in.Members {
		pool = append(pool, m.ID)
	}
	topics := make([]string, 0, len(in.Partitions))
	for t := range in.Partitions {
		topics = append(topics, t)
	}
	sort.Strings(topics) // the seed alone decides the case
	prev := map[string][]groups.TP{}
	for _, t := range topics {
		for p := range in.Partitions[t] + 2 {
			if r.IntN(4) > 0 {
				id := pool[r.IntN(len(pool))]
				prev[id] = append(prev[id], tp(t, p))
			}
		}
	}
	return prev
}

// identicalSubscriptions reports whether all members subscribe the same known
// topics.
func identicalSubscriptions(in Input) bool {
	var first map[string]bool
	for _, s := range subscriptions(in) {
		if first == nil {
			first = s
		} else if !mapsEqual(first, s) {
			return false
		}
	}
	return true
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func memberIDs(out map[string][]groups.TP) []string {
	ids := make([]string, 0, len(out))
	for id := range out {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
