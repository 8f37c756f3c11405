package assign

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
)

func TestGet(t *testing.T) {
	for _, tc := range []struct{ ask, want string }{
		{"", groups.DefaultAssignor},
		{groups.AssignorRange, "range"},
		{groups.AssignorRoundRobin, "roundrobin"},
		{groups.AssignorSticky, "sticky"},
	} {
		a, err := Get(tc.ask)
		if err != nil {
			t.Fatalf("Get(%q): %v", tc.ask, err)
		}
		if a.Name() != tc.want {
			t.Errorf("Get(%q).Name() = %q, want %q", tc.ask, a.Name(), tc.want)
		}
	}
	if groups.DefaultAssignor != groups.AssignorSticky {
		t.Errorf("default assignor is %q, the package documents sticky", groups.DefaultAssignor)
	}
}

func TestGetUnknown(t *testing.T) {
	for _, name := range []string{"bogus", "Range", " sticky"} {
		a, err := Get(name)
		if !errors.Is(err, ErrUnknownAssignor) || a != nil {
			t.Fatalf("Get(%q) = %v, %v; want nil, ErrUnknownAssignor", name, a, err)
		}
		for _, valid := range Names() {
			if !strings.Contains(err.Error(), valid) {
				t.Errorf("error %q does not name %q", err, valid)
			}
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{"range", "roundrobin", "sticky"}
	if got := Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	Names()[0] = "changed"
	if Names()[0] != "range" {
		t.Fatal("Names returns shared storage")
	}
}

// TestCheckersCatchBrokenAssignments proves the property tests' checkers can
// fail: each case breaks a correct assignment in one way.
func TestCheckersCatchBrokenAssignments(t *testing.T) {
	in := Input{
		Members:    []Member{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t", "u"}}},
		Partitions: map[string]int32{"t": 3, "u": 1},
	}
	good := map[string][]groups.TP{"a": tps("t", 0, 1), "b": {tp("t", 2), tp("u", 0)}}
	if err := verify(in, good); err != nil {
		t.Fatalf("verify rejects a good assignment: %v", err)
	}
	for name, bad := range map[string]map[string][]groups.TP{
		"missing member":   {"b": {tp("t", 0), tp("t", 1), tp("t", 2), tp("u", 0)}},
		"nil slice":        {"a": nil, "b": {tp("t", 0), tp("t", 1), tp("t", 2), tp("u", 0)}},
		"extra key":        {"a": tps("t", 0, 1), "b": {tp("t", 2), tp("u", 0)}, "c": {}},
		"unsorted":         {"a": tps("t", 1, 0), "b": {tp("t", 2), tp("u", 0)}},
		"twice":            {"a": tps("t", 0, 1, 2), "b": {tp("t", 2), tp("u", 0)}},
		"not subscribed":   {"a": {tp("t", 0), tp("t", 1), tp("u", 0)}, "b": tps("t", 2)},
		"no such part":     {"a": tps("t", 0, 1, 3), "b": {tp("t", 2), tp("u", 0)}},
		"partition missed": {"a": tps("t", 0), "b": {tp("t", 2), tp("u", 0)}},
	} {
		if err := verify(in, bad); err == nil {
			t.Errorf("verify accepts %s: %v", name, bad)
		}
	}
	// a{t} b{t,u} c{u}: a holds 3, c none; b is between, so the imbalance
	// needs a chain a -> b -> c to fix.
	chainIn := Input{
		Members:    []Member{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t", "u"}}, {ID: "c", Topics: []string{"u"}}},
		Partitions: map[string]int32{"t": 3, "u": 1},
	}
	if err := unbalanced(chainIn, map[string][]groups.TP{"a": tps("t", 0, 1, 2), "b": tps("u", 0), "c": {}}); err == nil {
		t.Error("unbalanced misses a chain a -> b -> c")
	}
	if err := unbalanced(chainIn, map[string][]groups.TP{"a": tps("t", 0, 1), "b": tps("t", 2), "c": tps("u", 0)}); err != nil {
		t.Errorf("unbalanced rejects a balanced assignment: %v", err)
	}
	if spread(good, []string{"a", "b"}) != 0 || spread(map[string][]groups.TP{"a": {}, "b": tps("t", 0, 1)}, []string{"a", "b"}) != 2 {
		t.Error("spread miscounts")
	}
	prev := map[string][]groups.TP{"a": tps("t", 0, 1, 2), "gone": tps("u", 0)}
	if got := moved(prev, good); !reflect.DeepEqual(got, []groups.TP{tp("t", 2), tp("u", 0)}) {
		t.Errorf("moved = %v", got)
	}
}

// TestUniformMinMoves checks the lower bound against hand-counted cases.
func TestUniformMinMoves(t *testing.T) {
	members := func(ids ...string) []Member {
		var ms []Member
		for _, id := range ids {
			ms = append(ms, Member{ID: id, Topics: []string{"t"}})
		}
		return ms
	}
	for _, tc := range []struct {
		name string
		in   Input
		want int
	}{
		{"leave", Input{Members: members("a", "b"), Partitions: map[string]int32{"t": 6},
			Previous: map[string][]groups.TP{"a": tps("t", 0, 1), "b": tps("t", 2, 3), "c": tps("t", 4, 5)}}, 2},
		{"join", Input{Members: members("a", "b", "c", "d"), Partitions: map[string]int32{"t": 12},
			Previous: map[string][]groups.TP{"a": tps("t", 0, 1, 2, 3), "b": tps("t", 4, 5, 6, 7), "c": tps("t", 8, 9, 10, 11)}}, 3},
		// 7 over 3: quotas 3,2,2; a and b hold 3 each, only one keeps 3.
		{"one extra", Input{Members: members("a", "b", "c"), Partitions: map[string]int32{"t": 7},
			Previous: map[string][]groups.TP{"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4, 5)}}, 1},
		// Deleted partition 9 and unowned 6 are no moves.
		{"deleted", Input{Members: members("a", "b"), Partitions: map[string]int32{"t": 7},
			Previous: map[string][]groups.TP{"a": tps("t", 0, 1, 2, 3, 4, 9), "b": tps("t", 5)}}, 1},
	} {
		if got := uniformMinMoves(tc.in); got != tc.want {
			t.Errorf("%s: uniformMinMoves = %d, want %d", tc.name, got, tc.want)
		}
	}
}
