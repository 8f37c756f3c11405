package assign

import "github.com/sluicemq/sluice/libs/groups"

// stickyAssignor balances first, then keeps as much of Input.Previous as the
// balance allows. It takes a fast path with provably minimal movement when
// all subscriptions are identical and the general chain-balancing path
// otherwise, splitting the cases as Kafka's uniform assignor does
// (UniformHomogeneousAssignmentBuilder, UniformHeterogeneousAssignmentBuilder).
type stickyAssignor struct{}

func (stickyAssignor) Name() string { return groups.AssignorSticky }

// Assign keeps the guarantees of the package documentation.
func (stickyAssignor) Assign(in Input) map[string][]groups.TP {
	g := newGroup(in)
	if g.uniform() {
		return g.result(assignUniform(g, in.Previous))
	}
	return g.result(newBalancer(g, in.Previous).assign())
}

// assignUniform is sticky for identical subscriptions. With P partitions and
// M members every member gets a quota of P/M, and P%M of them one more: those
// first that held more than P/M valid previous partitions, in id order, then
// the others in id order. A member keeps its valid previous partitions up to
// its quota; the remaining partitions fill the quotas in id order. When no
// partition is listed under two members in previous, no balanced assignment
// keeps more previous partitions.
func assignUniform(g *group, previous map[string][]groups.TP) [][]groups.TP {
	lists := make([][]groups.TP, len(g.ids))
	all := g.partitions()
	if len(g.ids) == 0 || len(all) == 0 {
		return lists
	}
	for p, i := range g.previousOwners(previous) {
		lists[i] = append(lists[i], p)
	}
	base, extra := len(all)/len(g.ids), len(all)%len(g.ids)
	quota := make([]int, len(g.ids))
	for i := range quota {
		quota[i] = base
		if len(lists[i]) > base && extra > 0 {
			quota[i]++
			extra--
		}
	}
	for i := range quota {
		if quota[i] == base && extra > 0 {
			quota[i]++
			extra--
		}
	}
	owned := make(map[groups.TP]bool, len(all))
	for i, l := range lists {
		l = groups.SortTPs(l) // which ones are kept must not depend on map order
		lists[i] = l[:min(len(l), quota[i])]
		for _, p := range lists[i] {
			owned[p] = true
		}
	}
	free := make([]groups.TP, 0, len(all)-len(owned))
	for _, p := range all {
		if !owned[p] {
			free = append(free, p)
		}
	}
	for i := range lists {
		need := quota[i] - len(lists[i])
		lists[i] = append(lists[i], free[:need]...)
		free = free[need:]
	}
	return lists
}
