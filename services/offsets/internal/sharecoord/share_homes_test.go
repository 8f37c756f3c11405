package sharecoord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator/coordtest"
)

// TestHomesSpreadMembers: as many members as partitions each keep a
// partition of their own; four times as many keep four to a partition;
// fewer members turn over partitions that together cover the topic; a
// member that leaves or stays idle gives its place up.
func TestHomesSpreadMembers(t *testing.T) {
	now := time.Unix(1000, 0)
	firsts := func(h *homes, group string, members, turns int, n int32) map[string][]int32 {
		out := map[string][]int32{}
		for range turns {
			for m := range members {
				name := fmt.Sprintf("m%d", m)
				out[name] = append(out[name], h.visitFirst(group, name, n, now))
			}
		}
		return out
	}
	var h homes
	four := firsts(&h, "four", 4, 3, 4)
	seen := map[int32]string{}
	for m, ps := range four {
		for _, p := range ps[1:] {
			if p != ps[0] {
				t.Fatalf("4 members on 4 partitions: %s visits %v first, not one partition", m, ps)
			}
		}
		if other, ok := seen[ps[0]]; ok {
			t.Fatalf("4 members on 4 partitions: %s and %s both start at %d", m, other, ps[0])
		}
		seen[ps[0]] = m
	}
	per := map[int32]int{}
	for m, ps := range firsts(&h, "sixteen", 16, 2, 4) {
		if ps[0] != ps[1] {
			t.Fatalf("16 members on 4 partitions: %s visits %v first", m, ps)
		}
		per[ps[0]]++
	}
	if len(per) != 4 || per[0] != 4 || per[1] != 4 || per[2] != 4 || per[3] != 4 {
		t.Fatalf("16 members on 4 partitions: members per partition %v, want 4 each", per)
	}
	for _, members := range []int{1, 2, 3} {
		covered := map[int32]bool{}
		for _, ps := range firsts(&h, fmt.Sprintf("few%d", members), members, 4, 4) {
			for _, p := range ps {
				covered[p] = true
			}
		}
		if len(covered) != 4 {
			t.Fatalf("%d members on 4 partitions visit first only %v", members, covered)
		}
	}

	// m1 leaves: the next member takes its place, and its partition.
	before := h.visitFirst("four", "m1", 4, now)
	h.leave("four", "m1")
	if got := h.visitFirst("four", "new", 4, now); got != before {
		t.Fatalf("a member joining after m1 left starts at %d, want m1's %d", got, before)
	}
	// Idle members are forgotten: a group whose members all went quiet
	// starts again from the first place, and the quiet groups are dropped.
	if got := h.visitFirst("sixteen", "late", 4, now.Add(2*homeIdle)); got != 0 || len(h.groups["sixteen"]) != 1 {
		t.Fatalf("the only member after the others went idle starts at %d among %d members, want 0 and 1", got, len(h.groups["sixteen"]))
	}
	if len(h.groups) != 1 {
		t.Fatalf("groups kept after everyone went idle: %d, want 1", len(h.groups))
	}
}

// TestAcquisitionsFollowTheMembersPartitions: four consumers of a topic of
// four partitions are each given records of a partition of their own, in
// order, acquisition after acquisition.
func TestAcquisitionsFollowTheMembersPartitions(t *testing.T) {
	co, _ := startCo(t, coordtest.Topics{"t": 4})
	s := New(co, fixedBounds(1000), nil)
	ctx := context.Background()
	if err := s.Configure(ctx, "q", map[string]string{shares.ConfigAutoOffsetReset: "earliest"}); err != nil {
		t.Fatal(err)
	}
	home := map[string]int32{}
	next := map[string]int64{}
	owner := map[int32]string{}
	for turn := range 3 {
		for _, m := range []string{"a", "b", "c", "d"} {
			got, err := s.Acquire(ctx, "q", shares.AcquireRequest{MemberID: m, Topic: "t", MaxRecords: 10})
			if err != nil || len(got.Acquired) != 1 {
				t.Fatalf("%s, turn %d: acquired %+v, %v", m, turn, got, err)
			}
			a := got.Acquired[0]
			if turn == 0 {
				if o, ok := owner[a.Partition]; ok {
					t.Fatalf("%s and %s were both given partition %d first", m, o, a.Partition)
				}
				owner[a.Partition], home[m] = m, a.Partition
			} else if a.Partition != home[m] || a.FirstOffset != next[m] {
				t.Fatalf("%s, turn %d: given %d at %d-%d, want its partition %d from %d", m, turn, a.Partition, a.FirstOffset, a.LastOffset, home[m], next[m])
			}
			next[m] = a.LastOffset + 1
		}
	}
}
