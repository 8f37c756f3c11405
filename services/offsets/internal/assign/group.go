package assign

import (
	"sort"

	"github.com/sluicemq/sluice/libs/groups"
)

// group is an Input normalized for the assignors: members sorted by id and
// merged, subscriptions restricted to topics that have partitions. Members
// are named by their index in ids from here on.
type group struct {
	ids         []string          // member ids, sorted, unique
	subscribed  []map[string]bool // per member: subscribed topics that have partitions
	topics      []string          // sorted: topics subscribed by at least one member
	count       map[string]int32  // partition count of each topic in topics
	subscribers map[string][]int  // per topic in topics: its members, ascending
}

func newGroup(in Input) *group {
	subs := make(map[string]map[string]bool, len(in.Members))
	for _, m := range in.Members {
		s := subs[m.ID]
		if s == nil {
			s = make(map[string]bool, len(m.Topics))
			subs[m.ID] = s
		}
		for _, t := range m.Topics {
			if in.Partitions[t] > 0 {
				s[t] = true
			}
		}
	}
	g := &group{count: make(map[string]int32), subscribers: make(map[string][]int)}
	for id := range subs {
		g.ids = append(g.ids, id)
	}
	sort.Strings(g.ids)
	for i, id := range g.ids {
		g.subscribed = append(g.subscribed, subs[id])
		for t := range subs[id] {
			if _, ok := g.count[t]; !ok {
				g.count[t] = in.Partitions[t]
				g.topics = append(g.topics, t)
			}
			g.subscribers[t] = append(g.subscribers[t], i) // i ascends: stays sorted
		}
	}
	sort.Strings(g.topics)
	return g
}

// partitions returns every partition of every subscribed topic, sorted.
func (g *group) partitions() []groups.TP {
	var all []groups.TP
	for _, t := range g.topics {
		for p := int32(0); p < g.count[t]; p++ {
			all = append(all, groups.TP{Topic: t, Partition: p})
		}
	}
	return all
}

// eligible reports whether member i may own p.
func (g *group) eligible(i int, p groups.TP) bool {
	return g.subscribed[i][p.Topic] && p.Partition >= 0 && p.Partition < g.count[p.Topic]
}

// uniform reports whether every member subscribes the same topics.
func (g *group) uniform() bool {
	for _, s := range g.subscribed[min(1, len(g.subscribed)):] {
		if len(s) != len(g.subscribed[0]) {
			return false
		}
		for t := range s {
			if !g.subscribed[0][t] {
				return false
			}
		}
	}
	return true
}

// previousOwners maps each partition of previous that a member may keep to
// that member, the lowest id when several list it.
func (g *group) previousOwners(previous map[string][]groups.TP) map[groups.TP]int {
	owners := make(map[groups.TP]int)
	for i, id := range g.ids {
		for _, p := range previous[id] {
			if _, taken := owners[p]; !taken && g.eligible(i, p) {
				owners[p] = i
			}
		}
	}
	return owners
}

// result turns per-member lists into an assignor's answer: every member a
// key, every slice a fresh, sorted, non-nil copy.
func (g *group) result(lists [][]groups.TP) map[string][]groups.TP {
	out := make(map[string][]groups.TP, len(g.ids))
	for i, id := range g.ids {
		l := make([]groups.TP, 0, len(lists[i]))
		out[id] = groups.SortTPs(append(l, lists[i]...))
	}
	return out
}
