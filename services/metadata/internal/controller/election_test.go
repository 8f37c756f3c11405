package controller

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// states builds a liveness for nodes 1..4: alive unless listed.
func states(dead, leaving []int32) liveness {
	l := liveness{}
	for id := int32(1); id <= 4; id++ {
		switch {
		case slices.Contains(dead, id):
			l[id] = stateDead
		case slices.Contains(leaving, id):
			l[id] = stateLeaving
		default:
			l[id] = stateAlive
		}
	}
	return l
}

// part is a partition of replicas 1, 2, 3 with the given leader and ISR.
func part(leader int32, isr ...int32) cluster.Partition {
	return cluster.Partition{Replicas: []int32{1, 2, 3}, Leader: leader, ISR: isr, LeaderEpoch: 4, PartitionEpoch: 9}
}

func ids(v ...int32) []int32 { return v }

func TestElect(t *testing.T) {
	tests := []struct {
		name          string
		p             cluster.Partition
		dead, leaving []int32
		unclean       bool
		wantLeader    int32
		wantISR       []int32
		changed       bool
	}{
		// Node expiry (the node is dead).
		{name: "all alive: nothing to do", p: part(1, 1, 2, 3), wantLeader: 1, wantISR: ids(1, 2, 3)},
		{name: "dead follower leaves the ISR, leader stays", p: part(1, 1, 2, 3), dead: ids(3), wantLeader: 1, wantISR: ids(1, 2), changed: true},
		{name: "dead leader: first live ISR replica", p: part(1, 1, 2, 3), dead: ids(1), wantLeader: 2, wantISR: ids(2, 3), changed: true},
		{name: "dead leader: replica order, not ISR order", p: part(1, 1, 3, 2), dead: ids(1), wantLeader: 2, wantISR: ids(3, 2), changed: true},
		{name: "dead leader: skips live replicas outside the ISR", p: part(1, 1, 3), dead: ids(1), wantLeader: 3, wantISR: ids(3), changed: true},
		{name: "dead leader and dead ISR follower", p: part(1, 1, 2, 3), dead: ids(1, 2), wantLeader: 3, wantISR: ids(3), changed: true},
		{name: "last ISR member dies: ISR kept, offline", p: part(2, 2), dead: ids(2), wantLeader: -1, wantISR: ids(2), changed: true},
		{name: "whole ISR dies at once: ISR kept as is, offline", p: part(1, 1, 2), dead: ids(1, 2), wantLeader: -1, wantISR: ids(1, 2), changed: true},
		{name: "offline and still dead: nothing to do", p: part(-1, 2), dead: ids(2), wantLeader: -1, wantISR: ids(2)},
		// Unclean election.
		{name: "unclean: live replica outside the ISR leads alone", p: part(1, 1, 2), dead: ids(1, 2), unclean: true, wantLeader: 3, wantISR: ids(3), changed: true},
		{name: "unclean allowed but a clean choice exists", p: part(1, 1, 2), dead: ids(1), unclean: true, wantLeader: 2, wantISR: ids(2), changed: true},
		{name: "unclean: an offline partition gets a returning replica", p: part(-1, 1), dead: ids(1, 2), unclean: true, wantLeader: 3, wantISR: ids(3), changed: true},
		{name: "unclean: no live replica, offline", p: part(1, 1), dead: ids(1, 2, 3), unclean: true, wantLeader: -1, wantISR: ids(1), changed: true},
		{name: "unclean never picks a leaving replica", p: part(1, 1, 2), dead: ids(1, 2), leaving: ids(3), unclean: true, wantLeader: -1, wantISR: ids(1, 2), changed: true},
		// A node registers again (alive again).
		{name: "returning ISR member leads its offline partition", p: part(-1, 2), wantLeader: 2, wantISR: ids(2), changed: true},
		{name: "returning member of a kept ISR leads, the dead one leaves", p: part(-1, 1, 2), dead: ids(1), wantLeader: 2, wantISR: ids(2), changed: true},
		{name: "returning replica outside the ISR: no clean election", p: part(-1, 2), dead: ids(2), wantLeader: -1, wantISR: ids(2)},
		{name: "returning node is not put back into the ISR", p: part(2, 2, 3), wantLeader: 2, wantISR: ids(2, 3)},
		// Controlled shutdown (the node is leaving).
		{name: "leaving leader hands over to the first alive ISR replica", p: part(1, 1, 3, 2), leaving: ids(1), wantLeader: 2, wantISR: ids(3, 2), changed: true},
		{name: "leaving follower leaves the ISR", p: part(1, 1, 2, 3), leaving: ids(3), wantLeader: 1, wantISR: ids(1, 2), changed: true},
		{name: "leaving sole ISR member keeps leading", p: part(1, 1), leaving: ids(1), wantLeader: 1, wantISR: ids(1)},
		{name: "leaving leader, other ISR member dead: keeps leading", p: part(1, 1, 2), leaving: ids(1), dead: ids(2), wantLeader: 1, wantISR: ids(1), changed: true},
		{name: "leaving and dead: the leaving one stays in the ISR", p: part(2, 1, 2), leaving: ids(1), dead: ids(2), wantLeader: 1, wantISR: ids(1), changed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leader, isr, changed := elect(tc.p, states(tc.dead, tc.leaving), tc.unclean)
			if leader != tc.wantLeader || !slices.Equal(isr, tc.wantISR) || changed != tc.changed {
				t.Fatalf("elect = leader %d, ISR %v, changed %v; want %d, %v, %v", leader, isr, changed, tc.wantLeader, tc.wantISR, tc.changed)
			}
		})
	}
}

func TestElectDoesNotAliasTheISR(t *testing.T) {
	p := part(-1, 1, 2)
	_, isr, _ := elect(p, states(ids(1, 2), nil), false)
	isr[0] = 99
	if p.ISR[0] != 1 {
		t.Fatal("elect returned the input's ISR slice")
	}
}

func TestPreferred(t *testing.T) {
	tests := []struct {
		name          string
		p             cluster.Partition
		dead, leaving []int32
		want          int32
		move          bool
	}{
		{name: "preferred leads already", p: part(1, 1, 2, 3), want: 1},
		{name: "preferred alive and in the ISR: moves back", p: part(2, 2, 3, 1), want: 1, move: true},
		{name: "preferred not in the ISR (still catching up)", p: part(2, 2, 3), want: 2},
		{name: "preferred dead", p: part(2, 1, 2, 3), dead: ids(1), want: 2},
		{name: "preferred shutting down", p: part(2, 1, 2, 3), leaving: ids(1), want: 2},
		{name: "offline partition whose preferred replica is in the ISR", p: part(-1, 1), want: 1, move: true},
		{name: "no replicas", p: cluster.Partition{Leader: -1}, want: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, move := preferred(tc.p, states(tc.dead, tc.leaving))
			if got != tc.want || move != tc.move {
				t.Fatalf("preferred = %d, %v; want %d, %v", got, move, tc.want, tc.move)
			}
		})
	}
}

func TestPlans(t *testing.T) {
	p := func(id, leader int32, replicas []int32, isr ...int32) cluster.Partition {
		return cluster.Partition{ID: id, Replicas: replicas, Leader: leader, ISR: isr}
	}
	topics := []cluster.Topic{
		{Name: "clean", ReplicationFactor: 2, Partitions: []cluster.Partition{
			p(0, 1, ids(1, 2), 1, 2), // node 1 leads: 2 takes over
			p(1, 2, ids(2, 1), 2),    // nothing to do
			p(2, 1, ids(1, 3), 1),    // only ISR member dies: offline
		}},
		{Name: "dirty", ReplicationFactor: 2, Config: map[string]string{cluster.ConfigUncleanElection: "true"}, Partitions: []cluster.Partition{
			p(0, 1, ids(1, 3), 1), // unclean: 3 leads
		}},
		{Name: "back", ReplicationFactor: 2, Partitions: []cluster.Partition{
			p(0, 2, ids(1, 2), 2, 1), // preferred 1 is dead: no move
			p(1, 3, ids(2, 3), 3, 2), // preferred 2 in the ISR: move
		}},
	}
	live := states(ids(1), nil)
	got := planElections(topics, live)
	want := []change{
		{topic: "clean", from: topics[0].Partitions[0], leader: 2, isr: ids(2)},
		{topic: "clean", from: topics[0].Partitions[2], leader: -1, isr: ids(1)},
		{topic: "dirty", from: topics[1].Partitions[0], leader: 3, isr: ids(3)},
		{topic: "back", from: topics[2].Partitions[0], leader: 2, isr: ids(2)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("planElections =\n%+v\nwant\n%+v", got, want)
	}
	for i, inv := range []bool{true, true, true, true} {
		if got[i].involves(1) != inv {
			t.Errorf("change %d involves(1) = %v", i, !inv)
		}
	}
	if got[0].involves(4) {
		t.Error("a change involves a node it does not name")
	}
	moves := planPreferred(topics, live)
	if len(moves) != 1 || moves[0].topic != "back" || moves[0].from.ID != 1 || moves[0].leader != 2 || !slices.Equal(moves[0].isr, ids(3, 2)) {
		t.Fatalf("planPreferred = %+v", moves)
	}
	if n := ledBy(topics, 1); n != 3 {
		t.Fatalf("ledBy(1) = %d; want 3", n)
	}
}

func TestLivenessOf(t *testing.T) {
	v := fsm.View{Snapshot: &cluster.Snapshot{Nodes: []cluster.Node{{ID: 1, Alive: true}, {ID: 2}, {ID: 3, Alive: true}}},
		ShuttingDown: map[int32]bool{3: true}}
	want := liveness{1: stateAlive, 2: stateDead, 3: stateLeaving}
	if got := livenessOf(v); !reflect.DeepEqual(got, want) {
		t.Fatalf("livenessOf = %v; want %v", got, want)
	}
	if livenessOf(v)[9] != stateDead {
		t.Fatal("an unknown node is not dead")
	}
}

func TestExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	const timeout = 6 * time.Second
	tests := []struct {
		name      string
		node      cluster.Node
		sess      *session // nil: none
		wantFence bool
		wantSess  *session // nil: none afterwards
	}{
		{"fresh session", cluster.Node{ID: 1, Epoch: 5, Alive: true}, &session{5, now.Add(-time.Second), true}, false, &session{5, now.Add(-time.Second), true}},
		{"exactly at the timeout", cluster.Node{ID: 1, Epoch: 5, Alive: true}, &session{5, now.Add(-timeout), true}, false, &session{5, now.Add(-timeout), true}},
		{"lapsed: fenced at its epoch", cluster.Node{ID: 1, Epoch: 5, Alive: true}, &session{5, now.Add(-timeout - 1), true}, true, &session{5, now.Add(-timeout - 1), true}},
		{"no session: grace from now", cluster.Node{ID: 1, Epoch: 5, Alive: true}, nil, false, &session{5, now, false}},
		{"session of an older registration: grace", cluster.Node{ID: 1, Epoch: 7, Alive: true}, &session{5, now.Add(-time.Hour), true}, false, &session{7, now, false}},
		{"dead node: session dropped", cluster.Node{ID: 1, Epoch: 8}, &session{5, now, true}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sessions := map[int32]session{42: {1, now, true}} // 42 is not registered: dropped
			if tc.sess != nil {
				sessions[1] = *tc.sess
			}
			fences := expire([]cluster.Node{tc.node}, sessions, now, timeout)
			wantFences := []fsm.FenceNode(nil)
			if tc.wantFence {
				wantFences = []fsm.FenceNode{{ID: 1, Epoch: tc.node.Epoch}}
			}
			if !reflect.DeepEqual(fences, wantFences) {
				t.Fatalf("fences = %+v; want %+v", fences, wantFences)
			}
			got, ok := sessions[1]
			if (tc.wantSess == nil) == ok || (ok && got != *tc.wantSess) {
				t.Fatalf("session = %+v (%v); want %+v", got, ok, tc.wantSess)
			}
			if _, ok := sessions[42]; ok || len(sessions) > 1 {
				t.Fatalf("sessions = %v", sessions)
			}
		})
	}
}
