package assign

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
)

// benchInput: 100 members, 40 topics of 32 partitions; each member
// subscribes 10 random topics (mixed) or all of them (identical). With
// leave, the previous assignment is a balanced one from which 10 members
// left; otherwise the first member held every partition and 99 joined, the
// worst case for sticky's chain balancing.
func benchInput(identical, leave bool) Input {
	r := rand.New(rand.NewPCG(5, 6))
	in := Input{Partitions: map[string]int32{}}
	var topics []string
	for k := range 40 {
		t := fmt.Sprintf("topic-%02d", k)
		topics = append(topics, t)
		in.Partitions[t] = 32
	}
	for k := range 100 {
		m := Member{ID: fmt.Sprintf("member-%03d", k), Topics: topics}
		if !identical {
			m.Topics = nil
			for _, i := range r.Perm(len(topics))[:10] {
				m.Topics = append(m.Topics, topics[i])
			}
		}
		in.Members = append(in.Members, m)
	}
	sticky, _ := Get(groups.AssignorSticky)
	if leave {
		in.Previous = sticky.Assign(in)
		in.Members = in.Members[10:]
		return in
	}
	in.Previous = map[string][]groups.TP{}
	for _, t := range topics {
		for p := range int32(32) {
			in.Previous["member-000"] = append(in.Previous["member-000"], tp(t, p))
		}
	}
	return in
}

func BenchmarkAssign(b *testing.B) {
	for _, identical := range []bool{true, false} {
		for _, leave := range []bool{true, false} {
			in := benchInput(identical, leave)
			b.Run(fmt.Sprintf("identical=%v/leave=%v", identical, leave), func(b *testing.B) {
				for _, name := range Names() {
					a, _ := Get(name)
					b.Run(name, func(b *testing.B) {
						for b.Loop() {
							a.Assign(in)
						}
					})
				}
			})
		}
	}
}
