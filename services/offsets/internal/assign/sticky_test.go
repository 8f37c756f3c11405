package assign

import (
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
)

func subscribe(topics []string, ids ...string) []Member {
	var ms []Member
	for _, id := range ids {
		ms = append(ms, Member{ID: id, Topics: topics})
	}
	return ms
}

func TestStickyExact(t *testing.T) { runExact(t, groups.AssignorSticky, stickyExactCases) }

var onlyT = []string{"t"}

// stickyExactCases are sticky's answers worked out by hand.
var stickyExactCases = []exactCase{
	{
		// 7 over 3: quotas 3,2,2, the extra to the first id.
		name: "fresh",
		in:   Input{Members: subscribe(onlyT, "c", "b", "a"), Partitions: map[string]int32{"t": 7}},
		want: map[string][]groups.TP{"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4), "c": tps("t", 5, 6)},
	},
	{
		// The extra goes to b, who held more than 2, not to a.
		name: "extra to the holder",
		in: Input{
			Members: subscribe(onlyT, "a", "b", "c"), Partitions: map[string]int32{"t": 7},
			Previous: map[string][]groups.TP{"a": tps("t", 0, 1), "b": tps("t", 2, 3, 4), "c": tps("t", 5, 6)},
		},
		want: map[string][]groups.TP{"a": tps("t", 0, 1), "b": tps("t", 2, 3, 4), "c": tps("t", 5, 6)},
	},
	{
		// Ignored: a's t-9 (deleted), a's gone-0 (unknown topic), c's
		// partitions (c left). t-1 is claimed by a and b: the lowest id
		// keeps it.
		name: "invalid previous",
		in: Input{
			Members:    []Member{{ID: "a", Topics: []string{"t", "u"}}, {ID: "b", Topics: []string{"t", "u"}}},
			Partitions: map[string]int32{"t": 4, "u": 2},
			Previous: map[string][]groups.TP{
				"a": {tp("t", 1), tp("t", 9), tp("gone", 0)},
				"b": {tp("t", 1), tp("t", 3), tp("u", 0)},
				"c": {tp("t", 0), tp("u", 1)},
			},
		},
		want: map[string][]groups.TP{"a": {tp("t", 0), tp("t", 1), tp("t", 2)}, "b": {tp("t", 3), tp("u", 0), tp("u", 1)}},
	},
	{
		// b dropped u: its u-0 is free again, its t-3 stays.
		name: "unsubscribed",
		in: Input{
			Members:    []Member{{ID: "a", Topics: []string{"t", "u"}}, {ID: "b", Topics: []string{"t"}}},
			Partitions: map[string]int32{"t": 4, "u": 2},
			Previous:   map[string][]groups.TP{"a": tps("t", 1), "b": {tp("t", 3), tp("u", 0)}},
		},
		want: map[string][]groups.TP{"a": {tp("t", 1), tp("u", 0), tp("u", 1)}, "b": tps("t", 0, 2, 3)},
	},
	{
		// a{t} b{t,u} c{u}: c can only take u, so both u partitions move
		// from b to c and b takes two of a's t partitions; single moves
		// alone would stop at 3,2,1.
		name: "chain",
		in: Input{
			Members: []Member{
				{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t", "u"}}, {ID: "c", Topics: []string{"u"}},
			},
			Partitions: map[string]int32{"t": 4, "u": 2},
			Previous:   map[string][]groups.TP{"a": tps("t", 0, 1, 2, 3), "b": tps("u", 0, 1)},
		},
		want: map[string][]groups.TP{"a": tps("t", 0, 1), "b": tps("t", 2, 3), "c": tps("u", 0, 1)},
	},
	{
		// c must give a t partition to y: it gives t-1 (inherited from
		// d, moved anyway) rather than its own t-0.
		name: "moved partitions move first",
		in: Input{
			Members: []Member{
				{ID: "c", Topics: []string{"t", "u"}}, {ID: "x", Topics: []string{"u"}}, {ID: "y", Topics: []string{"t", "w"}},
			},
			Partitions: map[string]int32{"t": 2, "u": 6, "w": 2},
			Previous: map[string][]groups.TP{
				"c": tps("t", 0), "d": tps("t", 1), "x": tps("u", 0, 1, 2, 3, 4, 5), "y": tps("w", 0, 1),
			},
		},
		want: map[string][]groups.TP{
			"c": {tp("t", 0), tp("u", 4), tp("u", 5)}, "x": tps("u", 0, 1, 2, 3), "y": {tp("t", 1), tp("w", 0), tp("w", 1)},
		},
	},
	{
		// Mixed subscriptions, d leaves: its t-3 goes to a (least loaded
		// of a and b, lowest id), its u-3 to c (a has 3 by then).
		name: "mixed leave",
		in: Input{
			Members: []Member{
				{ID: "a", Topics: []string{"t", "u"}}, {ID: "b", Topics: []string{"t"}}, {ID: "c", Topics: []string{"u"}},
			},
			Partitions: map[string]int32{"t": 4, "u": 4},
			Previous: map[string][]groups.TP{
				"a": {tp("t", 0), tp("u", 0)}, "b": tps("t", 1, 2), "c": tps("u", 1, 2), "d": {tp("t", 3), tp("u", 3)},
			},
		},
		want: map[string][]groups.TP{"a": {tp("t", 0), tp("t", 3), tp("u", 0)}, "b": tps("t", 1, 2), "c": tps("u", 1, 2, 3)},
	},
}

func TestStickyLeave(t *testing.T) {
	prev := map[string][]groups.TP{"a": tps("t", 0, 1), "b": tps("t", 2, 3), "c": tps("t", 4, 5)}
	in := Input{Members: subscribe([]string{"t"}, "a", "b"), Partitions: map[string]int32{"t": 6}, Previous: prev}
	out := mustSticky(t, in)
	if got := moved(prev, out); !reflect.DeepEqual(got, prev["c"]) {
		t.Fatalf("moved %v, want only the leaver's %v (got %v)", got, prev["c"], out)
	}
	if spread(out, []string{"a", "b"}) != 0 {
		t.Fatalf("unbalanced: %v", out)
	}
}

func TestStickyJoin(t *testing.T) {
	// 12 partitions of two topics, 4 each over a, b, c; d joins.
	prev := map[string][]groups.TP{
		"a": {tp("t", 0), tp("t", 1), tp("t", 2), tp("u", 0)},
		"b": {tp("t", 3), tp("t", 4), tp("t", 5), tp("u", 1)},
		"c": {tp("u", 2), tp("u", 3), tp("u", 4), tp("u", 5)},
	}
	in := Input{Members: subscribe([]string{"t", "u"}, "d", "c", "b", "a"), Partitions: map[string]int32{"t": 6, "u": 6}, Previous: prev}
	out := mustSticky(t, in)
	m := moved(prev, out)
	if len(m) != 3 {
		t.Fatalf("moved %d partitions %v, want 3 (got %v)", len(m), m, out)
	}
	if !reflect.DeepEqual(m, out["d"]) {
		t.Fatalf("moved %v, but d got %v", m, out["d"])
	}
	if spread(out, memberIDs(out)) != 0 {
		t.Fatalf("unbalanced: %v", out)
	}
}

// TestStickyStable: sticky's own output, fed back with nothing else changed,
// comes back unchanged, for identical and mixed subscriptions.
func TestStickyStable(t *testing.T) {
	for name, in := range map[string]Input{
		"identical": {Members: subscribe([]string{"t", "u"}, "a", "b", "c"), Partitions: map[string]int32{"t": 5, "u": 3}},
		"mixed": {
			Members: []Member{
				{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t", "u"}}, {ID: "c", Topics: []string{"u", "v"}},
			},
			Partitions: map[string]int32{"t": 5, "u": 3, "v": 4},
		},
	} {
		first := mustSticky(t, in)
		in.Previous = first
		if again := mustSticky(t, in); !reflect.DeepEqual(again, first) {
			t.Errorf("%s: %v became %v", name, first, again)
		}
	}
}

func mustSticky(t *testing.T, in Input) map[string][]groups.TP {
	t.Helper()
	a, err := Get(groups.AssignorSticky)
	if err != nil {
		t.Fatal(err)
	}
	out := a.Assign(in)
	if err := verify(in, out); err != nil {
		t.Fatalf("%v: %v", err, out)
	}
	return out
}
