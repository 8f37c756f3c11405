package placement

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

func TestEvacuateKeepsPositionsAndPrefersAFreeRack(t *testing.T) {
	// Nodes 1..5 in racks a, a, b, c, c; node 3 leaves.
	all := nodes("a", "a", "b", "c", "c")
	topics := []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{
		{ID: 0, Replicas: []int32{3, 1, 4}}, // racks b, a, c
		{ID: 1, Replicas: []int32{1, 2, 5}}, // not on 3: untouched
		{ID: 2, Replicas: []int32{2, 3}},    // racks a, b
		// Already moving (3 to 5): skipped, but its replicas count as load.
		{ID: 3, Replicas: []int32{3, 4, 5}, TargetReplicas: []int32{5, 4}, AddingReplicas: []int32{5}},
	}}}
	candidates := []Node{all[0], all[1], all[3], all[4]}
	moves, err := Evacuate(candidates, topics, []int32{3})
	if err != nil {
		t.Fatal(err)
	}
	want := []Move{
		// Partition 0 uses racks a and c besides 3, so no rack is free: of
		// the nodes it does not use, 2 and 5 hold two replicas each and the
		// lower id takes 3's slot (position 0: the preferred leader).
		{Topic: "t", Partition: 0, Replicas: []int32{2, 1, 4}},
		// Partition 2 uses rack a besides 3: rack c is free, and of its nodes
		// 4 and 5 hold two replicas each: the lower id.
		{Topic: "t", Partition: 2, Replicas: []int32{2, 4}},
	}
	if !reflect.DeepEqual(moves, want) {
		t.Fatalf("moves %+v\nwant  %+v", moves, want)
	}
}

func TestEvacuateNamesPartitionsWithoutRoom(t *testing.T) {
	topics := []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{
		{ID: 0, Replicas: []int32{1, 2, 3}},
		{ID: 1, Replicas: []int32{1, 2}},
	}}}
	moves, err := Evacuate(nodes("", "", ""), topics, []int32{1})
	if !errors.Is(err, ErrNotEnoughNodes) {
		t.Fatalf("err %v, want ErrNotEnoughNodes", err)
	}
	if want := []Move{{Topic: "t", Partition: 1, Replicas: []int32{3, 2}}}; !reflect.DeepEqual(moves, want) {
		t.Fatalf("moves %+v, want %+v", moves, want)
	}
}
