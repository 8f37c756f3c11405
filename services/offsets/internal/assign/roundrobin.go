package assign

import "github.com/sluicemq/sluice/libs/groups"

// roundRobinAssignor is Kafka's RoundRobinAssignor.
type roundRobinAssignor struct{}

func (roundRobinAssignor) Name() string { return groups.AssignorRoundRobin }

// Assign deals the partitions, sorted by (topic, partition), to the members
// in id order, skipping a member that does not subscribe the partition's
// topic; the turn passes on from the member that took the partition.
func (roundRobinAssignor) Assign(in Input) map[string][]groups.TP {
	g := newGroup(in)
	lists := make([][]groups.TP, len(g.ids))
	next := 0
	for _, p := range g.partitions() {
		// Ends: p's topic is in g.topics, so some member subscribes it.
		for !g.subscribed[next][p.Topic] {
			next = (next + 1) % len(g.ids)
		}
		lists[next] = append(lists[next], p)
		next = (next + 1) % len(g.ids)
	}
	return g.result(lists)
}
