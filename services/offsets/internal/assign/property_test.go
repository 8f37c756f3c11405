package assign

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
)

const propertyCases = 500

// TestPropertiesAllAssignors checks, on random inputs, what every assignor
// promises: shape, coverage and eligibility; the same answer for any order of
// members and topics and for a redundant member entry; an input left as it
// was; balance where each assignor promises it.
func TestPropertiesAllAssignors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range propertyCases {
		in := randomInput(r)
		if r.IntN(2) == 0 {
			in.Previous = randomPrevious(r, in)
		}
		for _, name := range Names() {
			a, _ := Get(name)
			before := clone(in)
			out := a.Assign(in)
			if !reflect.DeepEqual(in, before) {
				t.Fatalf("case %d %s: %v", n, name, errInputChanged)
			}
			if err := verify(in, out); err != nil {
				t.Fatalf("case %d %s: %v\ninput %+v\nout %v", n, name, err, in, out)
			}
			for range 3 {
				if again := a.Assign(shuffled(r, in)); !reflect.DeepEqual(again, out) {
					t.Fatalf("case %d %s: reordered input gives %v, was %v\ninput %+v", n, name, again, out, in)
				}
			}
			checkBalance(t, n, name, in, out)
		}
	}
}

// checkBalance: range is balanced per topic; roundrobin with identical
// subscriptions; sticky always as well as the subscriptions allow, which
// implies members with identical subscriptions differ by at most one.
func checkBalance(t *testing.T, n int, name string, in Input, out map[string][]groups.TP) {
	t.Helper()
	subs := subscriptions(in)
	switch name {
	case groups.AssignorRange:
		for topic, count := range in.Partitions {
			perMember := map[string][]groups.TP{}
			var ids []string
			for id, s := range subs {
				if s[topic] {
					ids = append(ids, id)
				}
			}
			for _, id := range ids {
				for _, p := range out[id] {
					if p.Topic == topic {
						perMember[id] = append(perMember[id], p)
					}
				}
			}
			if len(ids) > 0 && count > 0 && spread(perMember, ids) > 1 {
				t.Fatalf("case %d range: topic %s spread over %v: %v", n, topic, ids, out)
			}
		}
	case groups.AssignorRoundRobin:
		if identicalSubscriptions(in) && spread(out, memberIDs(out)) > 1 {
			t.Fatalf("case %d roundrobin: identical subscriptions, sizes spread by more than one: %v", n, out)
		}
	case groups.AssignorSticky:
		if err := unbalanced(in, out); err != nil {
			t.Fatalf("case %d sticky: %v\ninput %+v\nout %v", n, err, in, out)
		}
		for a := range subs {
			for b := range subs {
				if mapsEqual(subs[a], subs[b]) && len(out[a]) > len(out[b])+1 {
					t.Fatalf("case %d sticky: %s and %s subscribe the same, sizes %d and %d", n, a, b, len(out[a]), len(out[b]))
				}
			}
		}
	}
}

// TestPropertiesSticky checks stickiness on random inputs with a random
// previous assignment: with identical subscriptions it moves exactly the
// fewest partitions any balanced assignment moves; its answer fed back comes
// back unchanged, and so does any other balanced answer (the same with
// partitions of one topic swapped between members); from that stable point a member leaving moves only its
// partitions and a member joining moves only what it receives. With mixed
// subscriptions movement is logged against the simple lower bound (forced
// moves plus what members must shed to reach their final sizes), which
// chains may exceed.
func TestPropertiesSticky(t *testing.T) {
	sticky, _ := Get(groups.AssignorSticky)
	r := rand.New(rand.NewPCG(3, 4))
	var uniform, mixed, mixedMoves, mixedBound, mixedTight int
	for n := range propertyCases {
		in := randomInput(r)
		if len(subscriptions(in)) == 0 {
			continue
		}
		in.Previous = randomPrevious(r, in)
		out := sticky.Assign(in)
		if err := verify(in, out); err != nil {
			t.Fatalf("case %d: %v", n, err)
		}
		m := len(moved(in.Previous, out))
		if identicalSubscriptions(in) {
			if len(subscriptions(in)) > 1 && len(out) > 0 && total(out) > 0 {
				uniform++
			}
			if want := uniformMinMoves(in); m != want {
				t.Fatalf("case %d: moved %d, the fewest possible is %d\ninput %+v\nout %v", n, m, want, in, out)
			}
			checkLeaveJoin(t, n, sticky, in, out)
		} else {
			mixed++
			bound := shedBound(in, out)
			if m < bound {
				t.Fatalf("case %d: moved %d, below the lower bound %d", n, m, bound)
			}
			mixedMoves, mixedBound = mixedMoves+m, mixedBound+bound
			if m == bound {
				mixedTight++
			}
		}
		stable := in
		stable.Previous = out
		if again := sticky.Assign(stable); !reflect.DeepEqual(again, out) {
			t.Fatalf("case %d: not stable: %v became %v\ninput %+v", n, out, again, stable)
		}
		stable.Previous = swapWithinTopics(r, out)
		if again := sticky.Assign(stable); !reflect.DeepEqual(again, stable.Previous) {
			t.Fatalf("case %d: balanced previous %v became %v\ninput %+v", n, stable.Previous, again, stable)
		}
	}
	if uniform < propertyCases/10 || mixed < propertyCases/10 {
		t.Fatalf("generator skewed: %d identical, %d mixed cases", uniform, mixed)
	}
	t.Logf("identical subscriptions: %d cases with 2+ members and partitions, all at the minimum; mixed: %d cases, %d moves against a lower bound of %d, %d cases at the bound",
		uniform, mixed, mixedMoves, mixedBound, mixedTight)
}

// checkLeaveJoin starts from out, sticky's stable answer for in with
// identical subscriptions, and checks that the first member leaving moves only
// its partitions and that a new member joining takes partitions only from
// members above their new quota.
func checkLeaveJoin(t *testing.T, n int, sticky Assignor, in Input, out map[string][]groups.TP) {
	t.Helper()
	leaver := in.Members[0].ID
	leave := clone(in)
	leave.Previous, leave.Members = out, nil
	for _, m := range in.Members {
		if m.ID != leaver {
			leave.Members = append(leave.Members, m)
		}
	}
	if len(leave.Members) > 0 {
		after := sticky.Assign(leave)
		if got := moved(out, after); !slices.Equal(got, out[leaver]) {
			t.Fatalf("case %d: %s left holding %v, moved %v", n, leaver, out[leaver], got)
		}
	}
	join := clone(in)
	join.Previous = out
	join.Members = append(join.Members, Member{ID: "new", Topics: in.Members[0].Topics})
	after := sticky.Assign(join)
	got := moved(out, after)
	if !slices.Equal(got, after["new"]) || len(got) != total(out)/len(after) {
		t.Fatalf("case %d: joiner got %v of %d partitions over %d members, moved %v", n, after["new"], total(out), len(after), got)
	}
}

// shedBound is a lower bound on the moves of out: every previous partition
// whose member can no longer hold it, plus, per member, the valid previous
// partitions beyond the size out gives it.
func shedBound(in Input, out map[string][]groups.TP) int {
	subs := subscriptions(in)
	bound := 0
	for id, l := range in.Previous {
		valid := 0
		for _, p := range l {
			if p.Partition >= in.Partitions[p.Topic] || !anySubscribes(subs, p.Topic) {
				continue // deleted or wanted by nobody: no move
			}
			if subs[id][p.Topic] {
				valid++
			} else {
				bound++
			}
		}
		bound += max(0, valid-len(out[id]))
	}
	return bound
}

// total counts the partitions of an assignment.
func total(out map[string][]groups.TP) int {
	n := 0
	for _, l := range out {
		n += len(l)
	}
	return n
}

// swapWithinTopics returns out with random pairs of partitions of the same
// topic swapped between their owners. Every member keeps its size and the set
// of topics it holds, so the result is as balanced as out.
func swapWithinTopics(r *rand.Rand, out map[string][]groups.TP) map[string][]groups.TP {
	owner := map[groups.TP]string{}
	byTopic := map[string][]groups.TP{}
	for _, id := range memberIDs(out) {
		for _, p := range out[id] {
			owner[p] = id
			byTopic[p.Topic] = append(byTopic[p.Topic], p)
		}
	}
	for _, ps := range byTopic {
		groups.SortTPs(ps)
		for range len(ps) {
			x, y := ps[r.IntN(len(ps))], ps[r.IntN(len(ps))]
			owner[x], owner[y] = owner[y], owner[x]
		}
	}
	swapped := map[string][]groups.TP{}
	for id := range out {
		swapped[id] = []groups.TP{}
	}
	for p, id := range owner {
		swapped[id] = append(swapped[id], p)
	}
	for id := range swapped {
		groups.SortTPs(swapped[id])
	}
	return swapped
}
