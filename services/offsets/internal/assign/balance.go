package assign

import (
	"math"
	"sort"

	"github.com/sluicemq/sluice/libs/groups"
)

// balancer is sticky's state for mixed subscriptions. owner, held and load
// always describe the same assignment: only give and take change them.
type balancer struct {
	g     *group
	prev  map[groups.TP]int           // the member each valid previous partition belongs to
	owner map[groups.TP]int           // current owner of each assigned partition
	held  []map[string]map[int32]bool // per member, per topic: partitions owned
	load  []int                       // per member: partitions owned
}

func newBalancer(g *group, previous map[string][]groups.TP) *balancer {
	b := &balancer{
		g:     g,
		prev:  g.previousOwners(previous),
		owner: make(map[groups.TP]int),
		held:  make([]map[string]map[int32]bool, len(g.ids)),
		load:  make([]int, len(g.ids)),
	}
	for i := range b.held {
		b.held[i] = make(map[string]map[int32]bool)
	}
	return b
}

// assign keeps every valid previous partition, places the others greedily,
// then shifts partitions along chains until no chain improves the balance.
func (b *balancer) assign() [][]groups.TP {
	for p, i := range b.prev {
		b.give(p, i)
	}
	b.placeOrphans()
	for b.rebalanceStep() {
	}
	lists := make([][]groups.TP, len(b.g.ids))
	for p, i := range b.owner {
		lists[i] = append(lists[i], p) // sorted by group.result
	}
	return lists
}

// give makes member i own the unowned partition p.
func (b *balancer) give(p groups.TP, i int) {
	b.owner[p] = i
	if b.held[i][p.Topic] == nil {
		b.held[i][p.Topic] = make(map[int32]bool)
	}
	b.held[i][p.Topic][p.Partition] = true
	b.load[i]++
}

// take removes p from its owner.
func (b *balancer) take(p groups.TP) {
	i := b.owner[p]
	delete(b.owner, p)
	delete(b.held[i][p.Topic], p.Partition)
	b.load[i]--
}

// placeOrphans gives each unowned partition to the least-loaded member
// subscribing its topic (lowest id on ties), partitions of topics with the
// fewest subscribers first, since they have the fewest places to go.
func (b *balancer) placeOrphans() {
	var orphans []groups.TP
	for _, p := range b.g.partitions() {
		if _, ok := b.owner[p]; !ok {
			orphans = append(orphans, p)
		}
	}
	subs := b.g.subscribers
	sort.SliceStable(orphans, func(x, y int) bool {
		return len(subs[orphans[x].Topic]) < len(subs[orphans[y].Topic])
	})
	for _, p := range orphans {
		best := subs[p.Topic][0]
		for _, i := range subs[p.Topic] {
			if b.load[i] < b.load[best] {
				best = i
			}
		}
		b.give(p, best)
	}
}

// hop is one step of a chain: from gives a partition of topic to the next
// member of the chain.
type hop struct {
	from  int
	topic string
}

// rebalanceStep finds a chain from a member to one holding at least two
// partitions fewer, trying the most loaded members first, and shifts one
// partition along it: the first member loses one, the last gains one, those
// between give one and get one. It reports false when no such chain exists.
// Each shift lowers the sum of squared loads by at least two, so repeated
// calls end.
func (b *balancer) rebalanceStep() bool {
	order := make([]int, len(b.load))
	minLoad := math.MaxInt
	for i := range order {
		order[i] = i
		minLoad = min(minLoad, b.load[i])
	}
	sort.SliceStable(order, func(x, y int) bool { return b.load[order[x]] > b.load[order[y]] })
	for _, src := range order {
		if b.load[src] < minLoad+2 {
			return false
		}
		if chain, dst := b.chain(src); chain != nil {
			b.shift(chain, dst)
			return true
		}
	}
	return false
}

// chain searches, from src, the cheapest chain to a member holding at most
// load(src)-2 partitions: cheapest in previous partitions moved away from
// their member, then in hops, then lowest id (Dijkstra over the members; an
// edge u->v exists when u owns a partition of a topic v subscribes, and costs
// nothing when u owns one of that topic that is not a previous one of u). It
// returns the hops in order and the last member, or nil.
func (b *balancer) chain(src int) ([]hop, int) {
	n := len(b.g.ids)
	cost, hops, via, done := make([]int, n), make([]int, n), make([]hop, n), make([]bool, n)
	for i := range cost {
		cost[i] = math.MaxInt
	}
	cost[src] = 0
	for {
		u := -1
		for i := range n {
			if !done[i] && cost[i] != math.MaxInt &&
				(u < 0 || cost[i] < cost[u] || cost[i] == cost[u] && hops[i] < hops[u]) {
				u = i
			}
		}
		if u < 0 {
			return nil, -1
		}
		done[u] = true
		if u != src && b.load[u] <= b.load[src]-2 {
			var chain []hop
			for v := u; v != src; v = via[v].from {
				chain = append([]hop{via[v]}, chain...)
			}
			return chain, u
		}
		for _, t := range b.g.topics {
			if len(b.held[u][t]) == 0 {
				continue
			}
			c, h := cost[u]+1, hops[u]+1
			if b.holdsMoved(u, t) {
				c--
			}
			for _, v := range b.g.subscribers[t] {
				if !done[v] && (c < cost[v] || c == cost[v] && h < hops[v]) {
					cost[v], hops[v], via[v] = c, h, hop{from: u, topic: t}
				}
			}
		}
	}
}

// shift moves one partition along each hop of chain, ending at dst. It works
// back from dst so that every member gives a partition it held before the
// shift, the one chain priced.
func (b *balancer) shift(chain []hop, dst int) {
	to := dst
	for k := len(chain) - 1; k >= 0; k-- {
		p := b.pick(chain[k].from, chain[k].topic)
		b.take(p)
		b.give(p, to)
		to = chain[k].from
	}
}

// holdsMoved reports whether member i owns a partition of topic t that was
// not its previous one (moving it again costs no extra movement).
func (b *balancer) holdsMoved(i int, t string) bool {
	for part := range b.held[i][t] {
		if !b.isPrevious(groups.TP{Topic: t, Partition: part}, i) {
			return true
		}
	}
	return false
}

// pick chooses which of member i's partitions of topic t to give away: one
// that was not its previous one if any, the highest-numbered among equals.
func (b *balancer) pick(i int, t string) groups.TP {
	best, bestMoved := int32(-1), false
	for part := range b.held[i][t] {
		moved := !b.isPrevious(groups.TP{Topic: t, Partition: part}, i)
		if moved && !bestMoved || moved == bestMoved && part > best {
			best, bestMoved = part, moved
		}
	}
	return groups.TP{Topic: t, Partition: best}
}

// isPrevious reports whether p is a valid previous partition of member i.
func (b *balancer) isPrevious(p groups.TP, i int) bool {
	owner, ok := b.prev[p]
	return ok && owner == i
}
