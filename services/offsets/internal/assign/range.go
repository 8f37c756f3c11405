package assign

import "github.com/sluicemq/sluice/libs/groups"

// rangeAssignor is Kafka's RangeAssignor.
type rangeAssignor struct{}

func (rangeAssignor) Name() string { return groups.AssignorRange }

// Assign gives, per topic, contiguous ranges to the subscribing members in id
// order, one extra partition to each of the first (partitions % members).
func (rangeAssignor) Assign(in Input) map[string][]groups.TP {
	g := newGroup(in)
	lists := make([][]groups.TP, len(g.ids))
	for _, t := range g.topics {
		subs := g.subscribers[t]
		n, m := int(g.count[t]), len(subs)
		next := int32(0)
		for k, i := range subs {
			size := n / m
			if k < n%m {
				size++
			}
			for range size {
				lists[i] = append(lists[i], groups.TP{Topic: t, Partition: next})
				next++
			}
		}
	}
	return g.result(lists)
}
