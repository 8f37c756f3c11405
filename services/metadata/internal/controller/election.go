package controller

import (
	"slices"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// The partition rules of this file are pure functions of the FSM's state: no
// clock, no I/O. The controller runs them on the Raft leader and proposes
// their outcome as UpdatePartition commands carrying the epochs they were
// computed from.

// nodeState is what the election rules need to know about a storage node.
type nodeState uint8

const (
	// stateDead: not registered, or fenced (session expired). A dead node
	// leaves every ISR where it is not the last member and never leads.
	stateDead nodeState = iota
	// stateLeaving: alive but in controlled shutdown. It leaves every ISR
	// where it is not the last alive member and leads only where no alive
	// ISR member can.
	stateLeaving
	// stateAlive: registered and heartbeating.
	stateAlive
)

// liveness maps node ids to their state; a missing id is dead.
type liveness map[int32]nodeState

// livenessOf derives liveness from the FSM's view.
func livenessOf(v fsm.View) liveness {
	l := make(liveness, len(v.Nodes))
	for _, n := range v.Nodes {
		switch {
		case !n.Alive:
			l[n.ID] = stateDead
		case v.ShuttingDown[n.ID]:
			l[n.ID] = stateLeaving
		default:
			l[n.ID] = stateAlive
		}
	}
	return l
}

// elect computes a partition's leader and ISR from node liveness. It is the
// rule applied after a node expires, asks for a controlled shutdown or
// registers again, and on every session check (it is idempotent, so it also
// finishes what a previous leader left half done):
//
//  1. ISR: dead and leaving members leave it. If that would empty it, the
//     leaving members stay; if it would still be empty, the ISR is kept as it
//     is (Kafka keeps the last replica so that a clean election is possible
//     when it returns). A node is never added to the ISR here.
//  2. Leader: the current leader stays while it is alive and in the ISR;
//     otherwise the first replica, in replica order, that is alive and in the
//     ISR; failing that a leaving ISR member (the current leader first); and
//     failing that no one (-1, offline).
//  3. Unclean election, only when the topic allows it and step 2 found no
//     one: the first alive replica (not one a reassignment is adding) leads and becomes the whole ISR (records
//     it lacks are lost).
//
// changed is false when the result equals the current state. A new leader
// means a new leader epoch when the change is applied; any change means a new
// partition epoch.
func elect(p cluster.Partition, live liveness, unclean bool) (leader int32, isr []int32, changed bool) {
	isr = shrinkISR(p.ISR, live)
	leader = chooseLeader(p, isr, live)
	if leader == -1 && unclean {
		for _, id := range p.Replicas {
			// A replica being added by a reassignment may hold nothing yet.
			if live[id] == stateAlive && !slices.Contains(p.AddingReplicas, id) {
				leader, isr = id, []int32{id}
				break
			}
		}
	}
	changed = leader != p.Leader || !slices.Equal(isr, p.ISR)
	return leader, isr, changed
}

// shrinkISR is step 1 of elect.
func shrinkISR(isr []int32, live liveness) []int32 {
	for _, least := range []nodeState{stateAlive, stateLeaving} {
		var out []int32
		for _, id := range isr {
			if live[id] >= least {
				out = append(out, id)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return slices.Clone(isr)
}

// chooseLeader is step 2 of elect.
func chooseLeader(p cluster.Partition, isr []int32, live liveness) int32 {
	for _, want := range []nodeState{stateAlive, stateLeaving} {
		if p.Leader >= 0 && live[p.Leader] == want && slices.Contains(isr, p.Leader) {
			return p.Leader
		}
		for _, id := range p.Replicas {
			if live[id] == want && slices.Contains(isr, id) {
				return id
			}
		}
	}
	return -1
}

// preferred is the preferred-leader rule: when the partition's first replica
// is alive (not leaving), in the ISR and not the leader, it should lead. The
// ISR does not change.
func preferred(p cluster.Partition, live liveness) (leader int32, move bool) {
	if len(p.Replicas) == 0 {
		return p.Leader, false
	}
	pref := p.Replicas[0]
	if pref == p.Leader || live[pref] != stateAlive || !slices.Contains(p.ISR, pref) {
		return p.Leader, false
	}
	return pref, true
}

// change is one partition's decided new state, with the state it was
// decided from (whose epochs the proposal carries).
type change struct {
	topic  string
	from   cluster.Partition
	leader int32
	isr    []int32
}

// involves reports whether the change concerns node id (as old leader or ISR
// member).
func (ch change) involves(id int32) bool {
	return ch.from.Leader == id || slices.Contains(ch.from.ISR, id)
}

// planElections applies elect to every partition and returns the changes,
// in topic and partition order. Unclean election follows each topic's
// unclean.leader.election.
func planElections(topics []cluster.Topic, live liveness) []change {
	var out []change
	for _, t := range topics {
		unclean := false
		if cfg, err := cluster.ParseTopicConfig(t.Config, t.ReplicationFactor); err == nil {
			unclean = cfg.UncleanElection
		}
		for _, p := range t.Partitions {
			if leader, isr, changed := elect(p, live, unclean); changed {
				out = append(out, change{topic: t.Name, from: p, leader: leader, isr: isr})
			}
		}
	}
	return out
}

// planPreferred applies preferred to every partition and returns the
// leadership moves, in topic and partition order.
func planPreferred(topics []cluster.Topic, live liveness) []change {
	var out []change
	for _, t := range topics {
		for _, p := range t.Partitions {
			if leader, move := preferred(p, live); move {
				out = append(out, change{topic: t.Name, from: p, leader: leader, isr: slices.Clone(p.ISR)})
			}
		}
	}
	return out
}

// ledBy counts the partitions node id leads.
func ledBy(topics []cluster.Topic, id int32) int {
	n := 0
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.Leader == id {
				n++
			}
		}
	}
	return n
}
