package assign

import (
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
)

// exactCase is an input with the one right answer.
type exactCase struct {
	name string
	in   Input
	want map[string][]groups.TP
}

func runExact(t *testing.T, name string, cases []exactCase) {
	t.Helper()
	a, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := a.Assign(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
			if err := verify(tc.in, got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRangeExact(t *testing.T) {
	both := []string{"t0", "t1"}
	runExact(t, groups.AssignorRange, []exactCase{
		{
			// The example of Kafka's RangeAssignor documentation.
			name: "kafka example",
			in: Input{
				Members:    []Member{{ID: "C1", Topics: both}, {ID: "C0", Topics: both}},
				Partitions: map[string]int32{"t0": 3, "t1": 3},
			},
			want: map[string][]groups.TP{
				"C0": {tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)},
				"C1": {tp("t0", 2), tp("t1", 2)},
			},
		},
		{
			name: "mixed subscriptions",
			in: Input{
				Members:    []Member{{ID: "c", Topics: []string{"u"}}, {ID: "b", Topics: []string{"u", "t"}}, {ID: "a", Topics: []string{"t"}}},
				Partitions: map[string]int32{"t": 5, "u": 2},
			},
			want: map[string][]groups.TP{"a": tps("t", 0, 1, 2), "b": {tp("t", 3), tp("t", 4), tp("u", 0)}, "c": tps("u", 1)},
		},
		{
			name: "more members than partitions",
			in: Input{
				Members:    []Member{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t"}}, {ID: "c", Topics: []string{"t"}}},
				Partitions: map[string]int32{"t": 2},
			},
			want: map[string][]groups.TP{"a": tps("t", 0), "b": tps("t", 1), "c": {}},
		},
		{
			name: "unknown and empty topics",
			in: Input{
				Members:    []Member{{ID: "a", Topics: []string{"gone"}}, {ID: "b", Topics: []string{"t", "empty", "t"}}, {ID: "c"}},
				Partitions: map[string]int32{"t": 3, "empty": 0},
			},
			want: map[string][]groups.TP{"a": {}, "b": tps("t", 0, 1, 2), "c": {}},
		},
		{
			name: "previous is ignored",
			in: Input{
				Members:    []Member{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t"}}},
				Partitions: map[string]int32{"t": 3},
				Previous:   map[string][]groups.TP{"b": tps("t", 0, 1, 2)},
			},
			want: map[string][]groups.TP{"a": tps("t", 0, 1), "b": tps("t", 2)},
		},
		{name: "no members", in: Input{Partitions: map[string]int32{"t": 3}}, want: map[string][]groups.TP{}},
	})
}
