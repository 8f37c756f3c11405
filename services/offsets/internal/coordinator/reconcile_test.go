package coordinator

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// sim drives the pure rules like real members would: each member remembers
// its id, epoch and owned partitions, and reports them honestly.
type sim struct {
	t     *testing.T
	g     *fsm.Group
	parts map[string]int32
	owned map[string][]groups.TP // member -> what it owns as it last understood
	epoch map[string]int32
	ids   int
}

func newSim(t *testing.T, parts map[string]int32) *sim {
	return &sim{t: t, g: &fsm.Group{Name: "g"}, parts: parts, owned: map[string][]groups.TP{}, epoch: map[string]int32{}}
}

func (s *sim) newID() string { s.ids++; return fmt.Sprintf("m%d", s.ids) }

func (s *sim) join(topics ...string) string {
	s.t.Helper()
	resp, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, Topics: topics}, s.parts, s.newID, DefaultSettings())
	if err != nil {
		s.t.Fatal(err)
	}
	s.apply(resp)
	return resp.MemberID
}

// beat sends a heartbeat; the member revokes at once whatever the answer
// leaves out (the next beat reports it released).
func (s *sim) beat(id string) *groups.HeartbeatResponse {
	s.t.Helper()
	m := s.g.Members[id]
	req := groups.HeartbeatRequest{MemberID: id, MemberEpoch: s.epoch[id], InstanceID: m.InstanceID, Topics: m.Topics, Owned: groups.Group(slices.Clone(s.owned[id]))}
	resp, err := Heartbeat(s.g, req, s.parts, s.newID, DefaultSettings())
	if err != nil {
		s.t.Fatalf("heartbeat of %s: %v", id, err)
	}
	s.apply(resp)
	return resp
}

func (s *sim) apply(resp *groups.HeartbeatResponse) {
	s.epoch[resp.MemberID] = resp.MemberEpoch
	s.owned[resp.MemberID] = groups.Flatten(resp.Assignment)
	s.checkDisjoint()
}

// checkDisjoint: no partition is held by two members, and no member owns (in
// its own view) a partition the coordinator thinks another member holds.
func (s *sim) checkDisjoint() {
	s.t.Helper()
	holder := map[groups.TP]string{}
	for id, m := range s.g.Members {
		for _, p := range append(slices.Clone(m.Assigned), m.Revoking...) {
			if other, ok := holder[p]; ok {
				s.t.Fatalf("%s held by %s and %s", p, other, id)
			}
			holder[p] = id
		}
	}
	for id, owned := range s.owned {
		if s.g.Members[id] == nil {
			continue
		}
		for _, p := range owned {
			if h := holder[p]; h != id {
				s.t.Fatalf("member %s owns %s but the coordinator has it with %q", id, p, h)
			}
		}
	}
}

func (s *sim) stable() bool {
	for _, m := range s.g.Members {
		if len(m.Revoking) > 0 || !slices.Equal(m.Assigned, m.Target) || !slices.Equal(s.owned[m.ID], m.Assigned) {
			return false
		}
	}
	return true
}

func (s *sim) settle() {
	s.t.Helper()
	for round := 0; round < 10; round++ {
		for _, m := range s.g.SortedMembers() {
			s.beat(m.ID)
		}
		if s.stable() {
			return
		}
	}
	s.t.Fatalf("group did not settle: %+v", s.g.Members)
}

func tps(topic string, ps ...int32) []groups.TP {
	var out []groups.TP
	for _, p := range ps {
		out = append(out, groups.TP{Topic: topic, Partition: p})
	}
	return out
}

func TestRevokeBeforeReassign(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 6})
	m1 := s.join("t")
	if got := s.owned[m1]; !slices.Equal(got, tps("t", 0, 1, 2, 3, 4, 5)) || s.epoch[m1] < 1 {
		t.Fatalf("first member owns %v at epoch %d, want all six", got, s.epoch[m1])
	}
	m2 := s.join("t")
	if len(s.owned[m2]) != 0 {
		t.Fatalf("second member got %v while the first still holds everything", s.owned[m2])
	}
	// m1 is told to give up half; until it reports them released m2 gets none.
	before := s.epoch[m1]
	s.beat(m1)
	if len(s.owned[m1]) != 3 || s.epoch[m1] <= before || len(s.g.Members[m1].Revoking) != 3 {
		t.Fatalf("after retarget m1 owns %v (epoch %d), revoking %v", s.owned[m1], s.epoch[m1], s.g.Members[m1].Revoking)
	}
	if s.beat(m2); len(s.owned[m2]) != 0 {
		t.Fatalf("m2 got %v before m1 released", s.owned[m2])
	}
	s.beat(m1) // reports the three released
	if s.beat(m2); len(s.owned[m2]) != 3 {
		t.Fatalf("m2 owns %v after m1 released, want 3", s.owned[m2])
	}
	if !s.stable() || s.g.State() != groups.StateStable {
		t.Fatalf("group not stable: %+v", s.g.Members)
	}
}

func TestStaleOwnedReportDoesNotRelease(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 4})
	m1 := s.join("t")
	s.join("t")
	oldEpoch := s.epoch[m1]
	s.beat(m1) // now revoking two
	// A delayed heartbeat from before the revocation (old epoch, owning only
	// what it had then minus everything) must not release the revoking set.
	_, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: m1, MemberEpoch: oldEpoch, Topics: []string{"t"}, Owned: nil}, s.parts, s.newID, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.g.Members[m1].Revoking) != 2 {
		t.Fatalf("old-epoch report released partitions: revoking %v", s.g.Members[m1].Revoking)
	}
}

func TestLeaveFreesPartitionsAtOnce(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 6})
	m1, m2 := s.join("t"), s.join("t")
	s.settle()
	resp, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: m2, MemberEpoch: groups.LeaveEpoch}, s.parts, s.newID, DefaultSettings())
	if err != nil || resp.MemberEpoch != groups.LeaveEpoch {
		t.Fatalf("leave: %+v, %v", resp, err)
	}
	delete(s.owned, m2)
	if s.beat(m1); len(s.owned[m1]) != 6 {
		t.Fatalf("after the leave m1 owns %v, want all six at its next heartbeat", s.owned[m1])
	}
}

func TestRemovedMemberPartitionsMove(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 6})
	m1, m2, m3 := s.join("t"), s.join("t"), s.join("t")
	s.settle()
	kept := slices.Clone(s.owned[m1])
	RemoveMember(s.g, m3, s.parts)
	delete(s.owned, m3)
	s.settle()
	if len(s.owned[m1])+len(s.owned[m2]) != 6 || len(s.owned[m1]) != 3 {
		t.Fatalf("after removal m1 %v m2 %v", s.owned[m1], s.owned[m2])
	}
	for _, p := range kept {
		if !slices.Contains(s.owned[m1], p) {
			t.Fatalf("sticky: m1 lost %s it had before (had %v, has %v)", p, kept, s.owned[m1])
		}
	}
}

func TestHeartbeatErrors(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 2})
	m1 := s.join("t")
	for _, tc := range []struct {
		name string
		req  groups.HeartbeatRequest
		want protocol.Code
	}{
		{"unknown member", groups.HeartbeatRequest{MemberID: "gone", MemberEpoch: 1, Topics: []string{"t"}}, protocol.UnknownMemberID},
		{"epoch ahead", groups.HeartbeatRequest{MemberID: m1, MemberEpoch: 99, Topics: []string{"t"}}, protocol.FencedMemberEpoch},
		{"join with a bad id", groups.HeartbeatRequest{MemberID: "a b", MemberEpoch: 0, Topics: []string{"t"}}, protocol.InvalidRequest},
		{"join without topics", groups.HeartbeatRequest{MemberEpoch: 0}, protocol.InvalidRequest},
		{"bad topic", groups.HeartbeatRequest{MemberEpoch: 0, Topics: []string{"a b"}}, protocol.InvalidTopic},
		{"bad assignor", groups.HeartbeatRequest{MemberEpoch: 0, Topics: []string{"t"}, Assignor: "nope"}, protocol.InvalidRequest},
		{"bad isolation", groups.HeartbeatRequest{MemberEpoch: 0, Topics: []string{"t"}, Isolation: "read_some"}, protocol.InvalidRequest},
		{"session too short", groups.HeartbeatRequest{MemberEpoch: 0, Topics: []string{"t"}, SessionTimeoutMs: 10}, protocol.InvalidRequest},
		{"negative epoch", groups.HeartbeatRequest{MemberID: m1, MemberEpoch: -5, Topics: []string{"t"}}, protocol.InvalidRequest},
	} {
		_, err := Heartbeat(s.g, tc.req, s.parts, s.newID, DefaultSettings())
		if got := protocol.CodeOf(err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if len(s.g.Members) != 1 {
		t.Fatalf("failed joins left members behind: %v", s.g.Members)
	}
}

func TestRetriedJoinIsIdempotent(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 4})
	s.join("t")
	join := groups.HeartbeatRequest{MemberID: "client-1-abc", MemberEpoch: groups.JoinEpoch, Topics: []string{"t"}}
	first, err := Heartbeat(s.g, join, s.parts, s.newID, DefaultSettings())
	if err != nil || first.MemberID != "client-1-abc" {
		t.Fatalf("join with a member-made id: %+v, %v", first, err)
	}
	epoch := s.g.Epoch
	again, err := Heartbeat(s.g, join, s.parts, s.newID, DefaultSettings())
	if err != nil || again.MemberID != first.MemberID || again.MemberEpoch != first.MemberEpoch || len(s.g.Members) != 2 || s.g.Epoch != epoch {
		t.Fatalf("retried join: %+v, %v; members %d, group epoch %d (was %d): want the same member answered again", again, err, len(s.g.Members), s.g.Epoch, epoch)
	}
}

func TestNewPartitionsAreAssigned(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 2})
	m1, m2 := s.join("t"), s.join("t")
	s.settle()
	s.parts = map[string]int32{"t": 4}
	s.settle()
	if len(s.owned[m1]) != 2 || len(s.owned[m2]) != 2 {
		t.Fatalf("after growing to 4 partitions: %v / %v", s.owned[m1], s.owned[m2])
	}
}

// TestRandomMembershipKeepsOwnershipExclusive runs random joins, leaves,
// removals and heartbeats; checkDisjoint runs after every answer, and with
// membership left alone the group converges to its target.
func TestRandomMembershipKeepsOwnershipExclusive(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 50; round++ {
		s := newSim(t, map[string]int32{"a": int32(1 + rng.Intn(8)), "b": int32(1 + rng.Intn(8))})
		for step := 0; step < 60; step++ {
			members := s.g.SortedMembers()
			switch r := rng.Intn(10); {
			case r == 0 || len(members) == 0:
				topics := [][]string{{"a"}, {"b"}, {"a", "b"}}[rng.Intn(3)]
				s.join(topics...)
			case r == 1:
				id := members[rng.Intn(len(members))].ID
				if _, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: id, MemberEpoch: groups.LeaveEpoch}, s.parts, s.newID, DefaultSettings()); err != nil {
					t.Fatal(err)
				}
				delete(s.owned, id)
			case r == 2:
				id := members[rng.Intn(len(members))].ID
				RemoveMember(s.g, id, s.parts)
				delete(s.owned, id)
			default:
				s.beat(members[rng.Intn(len(members))].ID)
			}
			s.checkDisjoint()
		}
		if len(s.g.Members) > 0 {
			s.settle()
			covered := map[groups.TP]bool{}
			for _, m := range s.g.Members {
				for _, p := range m.Assigned {
					covered[p] = true
				}
			}
			want := 0
			for _, n := range s.g.Partitions {
				want += int(n)
			}
			if len(covered) != want {
				t.Fatalf("round %d: settled group covers %d partitions, want %d", round, len(covered), want)
			}
		}
	}
}

// TestGrantEpochFencesDelayedCommits: a partition taken from a member and
// later given back carries the epoch of the new grant; a commit from the
// earlier ownership (older epoch) is refused, one at the new epoch is not.
func TestGrantEpochFencesDelayedCommits(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 2})
	m1 := s.join("t")
	oldEpoch := s.epoch[m1] // m1 owns t-0 and t-1 at this epoch
	m2 := s.join("t")
	s.settle() // one partition moved to m2
	moved := s.owned[m2][0]
	RemoveMember(s.g, m2, s.parts) // m2 crashes: the partition comes back to m1
	delete(s.owned, m2)
	s.settle()
	if !slices.Contains(s.owned[m1], moved) {
		t.Fatalf("m1 owns %v, want %s back", s.owned[m1], moved)
	}
	commit := func(epoch int32) error {
		return fsm.CheckCommit(s.g, &fsm.Commit{Group: "g", MemberID: m1, MemberEpoch: epoch,
			Offsets: []groups.Offset{{Topic: moved.Topic, Partition: moved.Partition, Offset: 1}}})
	}
	if err := commit(oldEpoch); protocol.CodeOf(err) != protocol.StaleMemberEpoch {
		t.Fatalf("commit from the earlier ownership (epoch %d): %v, want STALE_MEMBER_EPOCH", oldEpoch, err)
	}
	if err := commit(s.epoch[m1]); err != nil {
		t.Fatalf("commit at the current epoch: %v", err)
	}
}

// TestRegexSubscription: a member subscribed by regular expression gets the
// topics it matches (whole names only), a topic created later joins its
// subscription at its next heartbeat, a regex matching nothing is a member
// without partitions, a bad one is INVALID_REGULAR_EXPRESSION and adds no
// member, and "" goes back to topic names.
func TestRegexSubscription(t *testing.T) {
	s := newSim(t, map[string]int32{"orders-eu": 2, "orders-us": 1, "my-orders-eu": 1, "audit": 1})
	re := "orders-.*"
	resp, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, TopicRegex: &re, TopicsUnchanged: true}, s.parts, s.newID, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	s.apply(resp)
	id := resp.MemberID
	if m := s.g.Members[id]; !slices.Equal(m.Topics, []string{"orders-eu", "orders-us"}) || m.TopicRegex != re {
		t.Fatalf("member after a regex join: %+v", m)
	}
	s.parts["orders-asia"] = 1 // created later
	s.beat(id)
	s.beat(id)
	if got := s.g.Members[id].Assigned; len(got) != 4 || !slices.Contains(s.g.Members[id].Topics, "orders-asia") {
		t.Fatalf("after orders-asia was created: topics %v, assigned %v", s.g.Members[id].Topics, got)
	}
	none := "nothing-.*"
	if _, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: id, MemberEpoch: s.epoch[id], TopicRegex: &none, TopicsUnchanged: true,
		Owned: groups.Group(slices.Clone(s.owned[id]))}, s.parts, s.newID, DefaultSettings()); err != nil {
		t.Fatalf("a regex matching nothing: %v", err)
	}
	if len(s.g.Members[id].Topics) != 0 {
		t.Fatalf("a regex matching nothing: topics %v", s.g.Members[id].Topics)
	}
	bad := "orders-("
	before := len(s.g.Members)
	if _, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, TopicRegex: &bad}, s.parts, s.newID, DefaultSettings()); protocol.CodeOf(err) != protocol.InvalidRegularExpression || len(s.g.Members) != before {
		t.Fatalf("a bad regex: %v, %d members (was %d)", err, len(s.g.Members), before)
	}
	empty := ""
	if _, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: id, MemberEpoch: s.epoch[id], TopicRegex: &empty, Topics: []string{"audit"},
		Owned: groups.Group(slices.Clone(s.owned[id]))}, s.parts, s.newID, DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	if m := s.g.Members[id]; m.TopicRegex != "" || !slices.Equal(m.Topics, []string{"audit"}) {
		t.Fatalf("back to names: %+v", m)
	}
}

// TestStaticMembership: a static member's temporary leave (epoch -2) keeps
// its partitions out of the others' hands without a new group epoch; a
// member joining with its instance id takes them over at a higher member
// epoch, again without one; a second instance while the first is in the
// group is refused, the old member id and a wrong instance id are fenced,
// and a leave for good (-1) frees the partitions at once.
func TestStaticMembership(t *testing.T) {
	s := newSim(t, map[string]int32{"t": 4})
	other := s.join("t")
	join := func(id, instance string) (*groups.HeartbeatResponse, error) {
		return Heartbeat(s.g, groups.HeartbeatRequest{MemberID: id, MemberEpoch: groups.JoinEpoch, InstanceID: instance, Topics: []string{"t"}}, s.parts, s.newID, DefaultSettings())
	}
	resp, err := join("first", "pod-0")
	if err != nil {
		t.Fatal(err)
	}
	s.apply(resp)
	s.settle()
	held := slices.Clone(s.g.Members["first"].Assigned)
	if len(held) != 2 {
		t.Fatalf("the static member holds %v", held)
	}
	if _, err := join("second", "pod-0"); protocol.CodeOf(err) != protocol.UnreleasedInstanceID {
		t.Fatalf("a second instance while the first is in: %v", err)
	}
	groupEpoch, firstEpoch := s.g.Epoch, s.g.Members["first"].Epoch

	// The temporary leave: franz-go sends it without the instance id.
	resp, err = Heartbeat(s.g, groups.HeartbeatRequest{MemberID: "first", MemberEpoch: groups.StaticLeaveEpoch}, s.parts, s.newID, DefaultSettings())
	if err != nil || resp.MemberEpoch != groups.StaticLeaveEpoch {
		t.Fatalf("static leave: %+v %v", resp, err)
	}
	if m := s.g.Members["first"]; m == nil || !m.Away || !slices.Equal(m.Assigned, held) || s.g.Epoch != groupEpoch {
		t.Fatalf("after the leave: member %+v, group epoch %d (was %d)", m, s.g.Epoch, groupEpoch)
	}
	s.beat(other)
	if got := s.g.Members[other].Assigned; len(got) != 2 {
		t.Fatalf("the other member took the away member's partitions: %v", got)
	}
	if _, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: "first", MemberEpoch: firstEpoch, InstanceID: "pod-0", Topics: []string{"t"}}, s.parts, s.newID, DefaultSettings()); protocol.CodeOf(err) != protocol.FencedMemberEpoch {
		t.Fatalf("a heartbeat of the member that left: %v", err)
	}

	// The instance comes back under a new member id.
	resp, err = join("again", "pod-0")
	if err != nil {
		t.Fatal(err)
	}
	s.apply(resp)
	if !slices.Equal(groups.Flatten(resp.Assignment), held) || resp.MemberEpoch <= firstEpoch || s.g.Epoch != groupEpoch || s.g.Members["first"] != nil {
		t.Fatalf("rejoin: %+v (held %v, epoch above %d); group epoch %d (was %d); old member %+v", resp, held, firstEpoch, s.g.Epoch, groupEpoch, s.g.Members["first"])
	}
	for _, p := range held {
		if s.g.Members["again"].GrantedAt[partkey.String(p)] != resp.MemberEpoch {
			t.Fatalf("%s granted at %v", p, s.g.Members["again"].GrantedAt)
		}
	}
	// Kafka clients leave the instance id out of keepalive heartbeats.
	if _, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: "again", MemberEpoch: resp.MemberEpoch, TopicsUnchanged: true, OwnedUnchanged: true}, s.parts, s.newID, DefaultSettings()); err != nil {
		t.Fatalf("a keepalive heartbeat without the instance id: %v", err)
	}
	for name, req := range map[string]groups.HeartbeatRequest{
		"the replaced member id": {MemberID: "first", MemberEpoch: firstEpoch, InstanceID: "pod-0", Topics: []string{"t"}},
		"another instance id":    {MemberID: "again", MemberEpoch: resp.MemberEpoch, InstanceID: "pod-1", Topics: []string{"t"}},
		"a leave naming another": {MemberID: "again", MemberEpoch: groups.StaticLeaveEpoch, InstanceID: "pod-1"},
	} {
		if _, err := Heartbeat(s.g, req, s.parts, s.newID, DefaultSettings()); protocol.CodeOf(err) != protocol.FencedInstanceID {
			t.Errorf("%s: %v, want FENCED_INSTANCE_ID", name, err)
		}
	}
	s.settle()

	// A leave for good frees the partitions.
	if _, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberID: "again", MemberEpoch: groups.LeaveEpoch, InstanceID: "pod-0"}, s.parts, s.newID, DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	s.settle()
	if len(s.g.Members) != 1 || len(s.g.Members[other].Assigned) != 4 {
		t.Fatalf("after the static member left for good: %+v", s.g.Members)
	}
}

// TestRegexSubscriptionKeepsToReadableTopics: a regex is resolved with the
// principal's rights: a matching topic it may not consume is left out.
func TestRegexSubscriptionKeepsToReadableTopics(t *testing.T) {
	s := newSim(t, map[string]int32{"orders-eu": 1, "orders-secret": 1})
	re := "orders-.*"
	readable := func(topic string) bool { return topic != "orders-secret" }
	resp, err := Heartbeat(s.g, groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, TopicRegex: &re, TopicsUnchanged: true, Readable: readable},
		s.parts, s.newID, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if m := s.g.Members[resp.MemberID]; !slices.Equal(m.Topics, []string{"orders-eu"}) || len(resp.Assignment) != 1 || resp.Assignment[0].Topic != "orders-eu" {
		t.Fatalf("a regex under ACLs: topics %v, assignment %v", m.Topics, resp.Assignment)
	}
}
