package placement

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

func nodes(racks ...string) []Node {
	out := make([]Node, len(racks))
	for i, r := range racks {
		out[i] = Node{ID: int32(i + 1), Rack: r}
	}
	return out
}

func counts(assign [][]int32, existing []cluster.Topic) (leaders, replicas map[int32]int) {
	leaders, replicas = map[int32]int{}, map[int32]int{}
	add := func(rs []int32) {
		for i, id := range rs {
			replicas[id]++
			if i == 0 {
				leaders[id]++
			}
		}
	}
	for _, t := range existing {
		for _, p := range t.Partitions {
			add(p.Replicas)
		}
	}
	for _, rs := range assign {
		add(rs)
	}
	return leaders, replicas
}

func spread(m map[int32]int, ns []Node) int {
	lo, hi := int(^uint(0)>>1), 0
	for _, n := range ns {
		c := m[n.ID]
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi - lo
}

func topic(name string, replicas ...[]int32) cluster.Topic {
	t := cluster.Topic{Name: name}
	for i, rs := range replicas {
		t.Partitions = append(t.Partitions, cluster.Partition{ID: int32(i), Replicas: rs, Leader: rs[0]})
	}
	return t
}

func TestAssignEvenness(t *testing.T) {
	tests := []struct {
		name        string
		nodes       []Node
		existing    []cluster.Topic
		parts, rf   int
		maxLeadGap  int
		maxReplGap  int
		wantLeaders map[int32]int // optional exact check
	}{
		{name: "3 nodes rf3", nodes: nodes("", "", ""), parts: 6, rf: 3, maxLeadGap: 0, maxReplGap: 0},
		{name: "4 nodes rf2 4 partitions", nodes: nodes("", "", "", ""), parts: 4, rf: 2, maxLeadGap: 0, maxReplGap: 0},
		{name: "5 nodes rf3 7 partitions", nodes: nodes("", "", "", "", ""), parts: 7, rf: 3, maxLeadGap: 1, maxReplGap: 1},
		{name: "1 node rf1", nodes: nodes(""), parts: 3, rf: 1, maxLeadGap: 0, maxReplGap: 0},
		{name: "fills the node that holds less", nodes: nodes("", "", ""),
			existing: []cluster.Topic{topic("old", []int32{1, 2}, []int32{2, 1})}, parts: 1, rf: 1,
			wantLeaders: map[int32]int{1: 1, 2: 1, 3: 1}},
		{name: "balances on top of an unbalanced cluster", nodes: nodes("", "", ""),
			existing: []cluster.Topic{topic("old", []int32{1}, []int32{1}, []int32{1})}, parts: 6, rf: 1,
			maxLeadGap: 0, maxReplGap: 0},
		{name: "racks with even nodes", nodes: nodes("a", "a", "b", "b", "c", "c"), parts: 12, rf: 3, maxLeadGap: 0, maxReplGap: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Assign(tc.nodes, tc.existing, tc.parts, tc.rf)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.parts {
				t.Fatalf("%d partitions; want %d", len(got), tc.parts)
			}
			for p, rs := range got {
				if len(rs) != tc.rf {
					t.Fatalf("partition %d has %d replicas; want %d", p, len(rs), tc.rf)
				}
				seen := map[int32]bool{}
				for _, id := range rs {
					if seen[id] {
						t.Fatalf("partition %d repeats node %d: %v", p, id, rs)
					}
					seen[id] = true
				}
			}
			leaders, replicas := counts(got, tc.existing)
			if tc.wantLeaders != nil {
				if !reflect.DeepEqual(leaders, tc.wantLeaders) {
					t.Fatalf("leaders = %v; want %v", leaders, tc.wantLeaders)
				}
				return
			}
			if g := spread(leaders, tc.nodes); g > tc.maxLeadGap {
				t.Errorf("leader counts %v differ by %d; want <= %d (assignment %v)", leaders, g, tc.maxLeadGap, got)
			}
			if g := spread(replicas, tc.nodes); g > tc.maxReplGap {
				t.Errorf("replica counts %v differ by %d; want <= %d (assignment %v)", replicas, g, tc.maxReplGap, got)
			}
		})
	}
}

func TestAssignRackAware(t *testing.T) {
	tests := []struct {
		name         string
		nodes        []Node
		parts, rf    int
		wantDistinct int // distinct racks each partition must span
	}{
		{"3 racks rf3", nodes("a", "a", "b", "b", "c", "c"), 12, 3, 3},
		{"uneven racks rf3", nodes("a", "a", "a", "a", "b", "c"), 9, 3, 3},
		{"2 racks rf3 spans both", nodes("a", "a", "b", "b"), 8, 3, 2},
		{"4 racks rf2", nodes("a", "b", "c", "d", "a", "b"), 10, 2, 2},
		{"rackless nodes are racks of their own", nodes("a", "a", "", ""), 6, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Assign(tc.nodes, nil, tc.parts, tc.rf)
			if err != nil {
				t.Fatal(err)
			}
			rackOf := map[int32]string{}
			for _, n := range tc.nodes {
				rackOf[n.ID] = n.Rack
				if n.Rack == "" {
					rackOf[n.ID] = fmt.Sprint("own-", n.ID)
				}
			}
			for p, rs := range got {
				racks := map[string]bool{}
				for _, id := range rs {
					racks[rackOf[id]] = true
				}
				if len(racks) != tc.wantDistinct {
					t.Errorf("partition %d replicas %v span %d racks; want %d", p, rs, len(racks), tc.wantDistinct)
				}
			}
		})
	}
}

func TestAssignErrors(t *testing.T) {
	tests := []struct {
		name      string
		nodes     []Node
		parts, rf int
		want      error
	}{
		{"rf above live nodes", nodes("", ""), 1, 3, ErrNotEnoughNodes},
		{"no nodes", nil, 1, 1, ErrNotEnoughNodes},
		{"zero partitions", nodes(""), 0, 1, ErrInvalidRequest},
		{"zero rf", nodes(""), 1, 0, ErrInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Assign(tc.nodes, nil, tc.parts, tc.rf); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v; want %v", err, tc.want)
			}
		})
	}
}

func TestAssignDeterministic(t *testing.T) {
	ns := nodes("a", "b", "c", "a", "b")
	first, _ := Assign(ns, nil, 20, 3)
	for i := 0; i < 20; i++ {
		again, _ := Assign([]Node{ns[4], ns[2], ns[0], ns[3], ns[1]}, nil, 20, 3)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("assignment depends on input order:\n%v\n%v", first, again)
		}
	}
}

func TestLiveNodes(t *testing.T) {
	got := LiveNodes([]cluster.Node{{ID: 1, Alive: true, Rack: "a"}, {ID: 2}, {ID: 3, Alive: true}})
	want := []Node{{ID: 1, Rack: "a"}, {ID: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LiveNodes = %v; want %v", got, want)
	}
}
