package assign

import (
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
)

func TestRoundRobinExact(t *testing.T) {
	both := []string{"t0", "t1"}
	runExact(t, groups.AssignorRoundRobin, []exactCase{
		{
			// The first example of Kafka's RoundRobinAssignor documentation.
			name: "kafka identical subscriptions",
			in: Input{
				Members:    []Member{{ID: "C1", Topics: both}, {ID: "C0", Topics: both}},
				Partitions: map[string]int32{"t0": 3, "t1": 3},
			},
			want: map[string][]groups.TP{
				"C0": {tp("t0", 0), tp("t0", 2), tp("t1", 1)},
				"C1": {tp("t0", 1), tp("t1", 0), tp("t1", 2)},
			},
		},
		{
			// The second example: skipped members do not lose their turn
			// order, the turn passes on from the member that took one.
			name: "kafka mixed subscriptions",
			in: Input{
				Members: []Member{
					{ID: "C2", Topics: []string{"t0", "t1", "t2"}},
					{ID: "C0", Topics: []string{"t0"}},
					{ID: "C1", Topics: []string{"t0", "t1"}},
				},
				Partitions: map[string]int32{"t0": 1, "t1": 2, "t2": 3},
			},
			want: map[string][]groups.TP{
				"C0": tps("t0", 0),
				"C1": tps("t1", 0),
				"C2": {tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)},
			},
		},
		{
			name: "unknown topic and idle member",
			in: Input{
				Members:    []Member{{ID: "a", Topics: []string{"t", "gone"}}, {ID: "b", Topics: []string{"gone"}}, {ID: "c", Topics: []string{"t"}}},
				Partitions: map[string]int32{"t": 3},
			},
			want: map[string][]groups.TP{"a": tps("t", 0, 2), "b": {}, "c": tps("t", 1)},
		},
		{
			name: "previous is ignored",
			in: Input{
				Members:    []Member{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t"}}},
				Partitions: map[string]int32{"t": 3},
				Previous:   map[string][]groups.TP{"b": tps("t", 0, 1, 2)},
			},
			want: map[string][]groups.TP{"a": tps("t", 0, 2), "b": tps("t", 1)},
		},
	})
}
