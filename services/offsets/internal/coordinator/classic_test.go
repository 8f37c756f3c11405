package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// classicSettings are testSettings with a short initial rebalance delay.
func classicSettings() Settings {
	s := testSettings()
	s.InitialRebalanceDelay = 50 * time.Millisecond
	return s
}

func isCode(err error, c protocol.Code) bool { return errors.Is(err, &protocol.Error{Code: c}) }

// classicJoin is a consumer-type join of group "g" for topic t.
func classicJoin(id, instance string) groups.JoinRequest {
	return groups.JoinRequest{MemberID: id, InstanceID: instance, ClientID: "c", SessionTimeoutMs: 400, RebalanceTimeoutMs: 1000,
		ProtocolType: groups.ProtocolTypeConsumer, RequireKnownMemberID: true,
		Protocols: []groups.Protocol{{Name: "range", Metadata: []byte("meta-" + instance), Topics: []string{"t"}}}}
}

// joinAll joins every request concurrently (each waits for the join phase)
// and returns the answers in order.
func joinAll(t *testing.T, c *Coordinator, reqs ...groups.JoinRequest) []*groups.JoinResponse {
	t.Helper()
	out := make([]*groups.JoinResponse, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out[i], errs[i] = c.Join(ctx, "g", r)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
	}
	return out
}

// newMemberID does the MEMBER_ID_REQUIRED round of a first join.
func newMemberID(t *testing.T, c *Coordinator, instance string) string {
	t.Helper()
	if instance != "" {
		return "" // static members join without the round
	}
	r, err := c.Join(context.Background(), "g", classicJoin("", ""))
	if err != nil || r.ErrorCode != int16(protocol.MemberIDRequired) || r.MemberID == "" {
		t.Fatalf("first join: %+v, %v; want MEMBER_ID_REQUIRED with an id", r, err)
	}
	return r.MemberID
}

// syncAll sends every member's SyncGroup concurrently, the leader's with
// assignment, and returns each member's assignment.
func syncAll(t *testing.T, c *Coordinator, joined []*groups.JoinResponse, instances []string, assignment map[string][]groups.TopicPartitions) map[string]string {
	t.Helper()
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, j := range joined {
		req := groups.SyncRequest{MemberID: j.MemberID, InstanceID: instances[i], Generation: j.Generation}
		if j.MemberID == j.Leader {
			for _, m := range j.Members {
				req.Assignments = append(req.Assignments, groups.MemberAssignment{MemberID: m.MemberID,
					Assignment: []byte("for-" + m.MemberID), Partitions: assignment[m.MemberID]})
			}
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := c.Sync(ctx, "g", req)
			if err != nil {
				t.Errorf("sync of %s: %v", req.MemberID, err)
				return
			}
			mu.Lock()
			out[req.MemberID] = string(r.Assignment)
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// stableGroup brings two members (static when instances are given) to a
// stable first generation, partitions 0-1 to the first, 2-3 to the second.
func stableGroup(t *testing.T, c *Coordinator, instances ...string) []*groups.JoinResponse {
	t.Helper()
	if len(instances) == 0 {
		instances = []string{"", ""}
	}
	a, b := newMemberID(t, c, instances[0]), newMemberID(t, c, instances[1])
	joined := joinAll(t, c, classicJoin(a, instances[0]), classicJoin(b, instances[1]))
	if joined[0].Generation != 1 || joined[0].Generation != joined[1].Generation || joined[0].Leader != joined[1].Leader {
		t.Fatalf("join answers disagree: %+v / %+v", joined[0], joined[1])
	}
	if joined[0].ProtocolName != "range" || joined[0].ProtocolType != groups.ProtocolTypeConsumer {
		t.Fatalf("protocol %s/%s", joined[0].ProtocolType, joined[0].ProtocolName)
	}
	leaders := 0
	for _, j := range joined {
		if j.MemberID == j.Leader {
			leaders++
			if len(j.Members) != 2 {
				t.Fatalf("the leader got %d members", len(j.Members))
			}
		} else if len(j.Members) != 0 {
			t.Fatalf("a follower got the member list")
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
	got := syncAll(t, c, joined, instances, map[string][]groups.TopicPartitions{
		joined[0].MemberID: {{Topic: "t", Partitions: []int32{0, 1}}},
		joined[1].MemberID: {{Topic: "t", Partitions: []int32{2, 3}}},
	})
	for _, j := range joined {
		if got[j.MemberID] != "for-"+j.MemberID {
			t.Fatalf("member %s got assignment %q", j.MemberID, got[j.MemberID])
		}
	}
	return joined
}

func TestClassicJoinSyncAndCommit(t *testing.T) {
	c, f, _ := startWith(t, t.TempDir(), classicSettings())
	joined := stableGroup(t, c)
	a := joined[0]

	// The generation is written with its members and what they own.
	g, ok := f.Group("g")
	if !ok || !g.Classic() || g.Epoch != 1 || len(g.Members) != 2 || g.ProtocolName != "range" {
		t.Fatalf("written group: %+v", g)
	}
	if m := g.Members[a.MemberID]; !slices.Equal(m.Topics, []string{"t"}) || len(m.Assigned) != 2 || string(m.Assignment) != "for-"+a.MemberID {
		t.Fatalf("written member: %+v", m)
	}
	if err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: a.MemberID, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: a.MemberID, Generation: 0}); !isCode(err, protocol.IllegalGeneration) {
		t.Fatalf("heartbeat of an old generation: %v", err)
	}
	commit := func(id string, gen int32) error {
		return c.Commit(context.Background(), "g", groups.CommitRequest{MemberID: id, MemberEpoch: gen, Offsets: []groups.Offset{{Topic: "t", Partition: 3, Offset: 7}}})
	}
	if err := commit(a.MemberID, 1); err != nil {
		t.Fatalf("commit of the current generation: %v", err)
	}
	if err := commit(a.MemberID, 0); !isCode(err, protocol.IllegalGeneration) {
		t.Fatalf("commit of an old generation: %v", err)
	}
	if err := commit("nobody", 1); !isCode(err, protocol.UnknownMemberID) {
		t.Fatalf("commit of an unknown member: %v", err)
	}
	if err := commit("", 0); !isCode(err, protocol.UnknownMemberID) {
		t.Fatalf("a commit outside the membership of a group with members: %v", err)
	}
	// The written state answers a restart: the coordinator of a new term
	// loads it as stable.
	c.OnLeadership(false)
	c.OnLeadership(true)
	testkit.WaitFor(t, 10*time.Second, "the coordinator to be ready again", c.Ready)
	if err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: joined[1].MemberID, Generation: 1}); err != nil {
		t.Fatalf("heartbeat after a leadership change: %v", err)
	}
	if err := commit(joined[1].MemberID, 1); err != nil {
		t.Fatalf("commit after a leadership change: %v", err)
	}
}

func TestClassicRebalanceAfterLeaveAndExpiry(t *testing.T) {
	c, f, _ := startWith(t, t.TempDir(), classicSettings())
	joined := stableGroup(t, c)
	a, b := joined[0], joined[1]
	out, err := c.Leave(context.Background(), "g", groups.LeaveRequest{Members: []groups.LeavingMember{{MemberID: a.MemberID}, {MemberID: "stranger"}}})
	if err != nil || len(out.Members) != 2 || out.Members[0].ErrorCode != 0 || out.Members[1].ErrorCode != int16(protocol.UnknownMemberID) {
		t.Fatalf("leave: %+v, %v", out, err)
	}
	hb := groups.ClassicHeartbeatRequest{MemberID: b.MemberID, Generation: 1}
	if err := c.ClassicHeartbeat(context.Background(), "g", hb); !isCode(err, protocol.RebalanceInProgress) {
		t.Fatalf("heartbeat during the rebalance: %v", err)
	}
	// The zombie's commit is refused.
	if err := c.Commit(context.Background(), "g", groups.CommitRequest{MemberID: a.MemberID, MemberEpoch: 1, Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 1}}}); !isCode(err, protocol.UnknownMemberID) {
		t.Fatalf("commit of a member that left: %v", err)
	}
	j := joinAll(t, c, classicJoin(b.MemberID, ""))[0]
	if j.Generation != 2 || j.Leader != b.MemberID || len(j.Members) != 1 {
		t.Fatalf("rejoin: %+v", j)
	}
	syncAll(t, c, []*groups.JoinResponse{j}, []string{""}, nil)
	// b goes silent: its session expires and the group is written empty.
	testkit.Eventually(t, 5*time.Second, func() error {
		if g, ok := f.Group("g"); !ok || len(g.Members) != 0 || g.Epoch < 2 {
			return fmt.Errorf("the group was not emptied: %+v", g)
		}
		return nil
	})
	if err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: b.MemberID, Generation: 2}); !isCode(err, protocol.UnknownMemberID) {
		t.Fatalf("heartbeat of an expired member: %v", err)
	}
}

func TestClassicStaticMemberReturnsWithoutRebalance(t *testing.T) {
	c, f, _ := startWith(t, t.TempDir(), classicSettings())
	joined := stableGroup(t, c, "i1", "i2")
	var old *groups.JoinResponse
	for _, j := range joined {
		if j.MemberID != j.Leader {
			old = j
		}
	}
	instance := "i1"
	if old.MemberID == joined[1].MemberID {
		instance = "i2"
	}
	// The follower restarts: it joins with no member id and its instance id.
	r, err := c.Join(context.Background(), "g", classicJoin("", instance))
	if err != nil || r.Generation != 1 || r.MemberID == old.MemberID || r.ErrorCode != 0 {
		t.Fatalf("static rejoin: %+v, %v", r, err)
	}
	s, err := c.Sync(context.Background(), "g", groups.SyncRequest{MemberID: r.MemberID, InstanceID: instance, Generation: 1})
	if err != nil || string(s.Assignment) != "for-"+old.MemberID {
		t.Fatalf("static member's sync: %+v, %v; want its old assignment", s, err)
	}
	// The other member saw no rebalance; the old incarnation is fenced.
	for _, j := range joined {
		if j != old {
			other := map[string]string{"i1": "i2", "i2": "i1"}[instance]
			if err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: j.MemberID, InstanceID: other, Generation: 1}); err != nil {
				t.Fatalf("the other member's heartbeat: %v", err)
			}
		}
	}
	if err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: old.MemberID, InstanceID: instance, Generation: 1}); !isCode(err, protocol.FencedInstanceID) {
		t.Fatalf("old incarnation's heartbeat: %v", err)
	}
	if g, _ := f.Group("g"); g.Members[r.MemberID] == nil || g.Members[old.MemberID] != nil {
		t.Fatalf("the written group does not hold the new incarnation: %+v", g.Members)
	}
}

func TestClassicAndConsumerProtocolsExcludeEachOther(t *testing.T) {
	c, _, _ := startWith(t, t.TempDir(), classicSettings())
	stableGroup(t, c)
	_, err := c.Heartbeat(context.Background(), "g", groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, Topics: []string{"t"}})
	if !isCode(err, protocol.GroupIDNotFound) {
		t.Fatalf("consumer-protocol join of a classic group: %v", err)
	}
	other := classicJoin("", "")
	other.ProtocolType = "connect"
	if _, err := c.Join(context.Background(), "g", other); !isCode(err, protocol.InconsistentGroupProtocol) {
		t.Fatalf("join with another protocol type: %v", err)
	}
	other = classicJoin("", "")
	other.Protocols[0].Name = "roundrobin"
	if _, err := c.Join(context.Background(), "g", other); !isCode(err, protocol.InconsistentGroupProtocol) {
		t.Fatalf("join without a common protocol: %v", err)
	}
	// A consumer-protocol group refuses classic members.
	if _, err := c.Heartbeat(context.Background(), "h", groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(context.Background(), "h", classicJoin("", "")); !isCode(err, protocol.InconsistentGroupProtocol) {
		t.Fatalf("classic join of a consumer group: %v", err)
	}
}

func TestClassicLimitsAndBadAssignments(t *testing.T) {
	s := classicSettings()
	s.MaxGroupSize = 2
	s.MaxMemberMetadata = 1024
	c, _, _ := startWith(t, t.TempDir(), s)
	joined := stableGroup(t, c)
	if _, err := c.Join(context.Background(), "g", classicJoin("", "")); !isCode(err, protocol.GroupMaxSizeReached) {
		t.Fatalf("a third member: %v", err)
	}
	big := classicJoin("", "")
	big.Protocols[0].Metadata = make([]byte, 2048)
	if _, err := c.Join(context.Background(), "g2", big); !isCode(err, protocol.InvalidRequest) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("huge metadata: %v", err)
	}
	short := classicJoin("", "")
	short.SessionTimeoutMs = 1
	if _, err := c.Join(context.Background(), "g2", short); !isCode(err, protocol.InvalidSessionTimeout) {
		t.Fatalf("session timeout out of range: %v", err)
	}
	// A new rebalance whose leader hands out a partition twice, then one
	// that does not exist: both refused, the group still rebalancing.
	// New metadata (a changed subscription) makes every rejoin count.
	r0, r1 := classicJoin(joined[0].MemberID, ""), classicJoin(joined[1].MemberID, "")
	r0.Protocols[0].Metadata, r1.Protocols[0].Metadata = []byte("v2"), []byte("v2")
	j := joinAll(t, c, r0, r1)
	if j[0].Generation != 2 || j[1].Generation != 2 {
		t.Fatalf("generations %d, %d after both rejoined with new metadata", j[0].Generation, j[1].Generation)
	}
	leader := j[0]
	if leader.MemberID != leader.Leader {
		leader = j[1]
	}
	for _, bad := range [][]groups.MemberAssignment{
		{{MemberID: j[0].MemberID, Partitions: []groups.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}},
			{MemberID: j[1].MemberID, Partitions: []groups.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}}},
		{{MemberID: j[0].MemberID, Partitions: []groups.TopicPartitions{{Topic: "t", Partitions: []int32{9}}}}},
		{{MemberID: j[0].MemberID, Partitions: []groups.TopicPartitions{{Topic: "nope", Partitions: []int32{0}}}}},
	} {
		_, err := c.Sync(context.Background(), "g", groups.SyncRequest{MemberID: leader.MemberID, Generation: leader.Generation, Assignments: bad})
		if !isCode(err, protocol.InvalidRequest) {
			t.Fatalf("bad assignment %+v: %v", bad, err)
		}
	}
	if state, _, _ := c.ClassicState("g"); state != groups.StateCompletingRebalance {
		t.Fatalf("state after refused assignments: %s", state)
	}
}

func TestClassicOpaqueProtocolAndProtocolSelection(t *testing.T) {
	c, f, _ := startWith(t, t.TempDir(), classicSettings())
	// Connect-style workers: another protocol type, metadata and
	// assignments the coordinator does not read. The group takes the
	// protocol both support that most prefer.
	join := func(id string, protocols ...string) groups.JoinRequest {
		r := groups.JoinRequest{MemberID: id, ClientID: "worker", SessionTimeoutMs: 400, RebalanceTimeoutMs: 1000, ProtocolType: "connect"}
		for _, p := range protocols {
			r.Protocols = append(r.Protocols, groups.Protocol{Name: p, Metadata: []byte{0xff, 0x00, byte(len(p))}})
		}
		return r
	}
	j := joinAll(t, c, join("", "sessioned", "compatible"), join("", "compatible"), join("", "eager", "compatible"))
	for _, r := range j {
		if r.ProtocolName != "compatible" || r.ProtocolType != "connect" {
			t.Fatalf("chose %s/%s; only compatible is common", r.ProtocolType, r.ProtocolName)
		}
	}
	assignment := map[string]string{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, r := range j {
		req := groups.SyncRequest{MemberID: r.MemberID, Generation: r.Generation, ProtocolType: "connect", ProtocolName: "compatible"}
		if r.MemberID == r.Leader {
			for _, m := range r.Members {
				// Not a consumer assignment: the partitions a relay may
				// have read from such bytes are ignored.
				req.Assignments = append(req.Assignments, groups.MemberAssignment{MemberID: m.MemberID, Assignment: []byte("tasks-of-" + m.MemberID),
					Partitions: []groups.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}})
			}
		}
		wg.Go(func() {
			s, err := c.Sync(context.Background(), "g", req)
			if err != nil {
				t.Errorf("sync: %v", err)
				return
			}
			mu.Lock()
			assignment[req.MemberID] = string(s.Assignment)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, r := range j {
		if assignment[r.MemberID] != "tasks-of-"+r.MemberID {
			t.Fatalf("member %s got %q", r.MemberID, assignment[r.MemberID])
		}
	}
	g, _ := f.Group("g")
	for id, m := range g.Members {
		if len(m.Assigned) != 0 || len(m.Topics) != 0 || string(m.Assignment) != "tasks-of-"+id || m.Metadata == nil {
			t.Fatalf("written member of an opaque protocol: %+v", m)
		}
	}
}

func TestClassicMemberThatDoesNotRejoinIsRemoved(t *testing.T) {
	c, _, _ := startWith(t, t.TempDir(), classicSettings())
	joined := stableGroup(t, c)
	a, b := joined[0], joined[1]
	// a rejoins with a new subscription; b only heartbeats, which is not
	// joining: when the rebalance timeout (1s) passes, b is out.
	ra := classicJoin(a.MemberID, "")
	ra.Protocols[0].Metadata = []byte("v2")
	done := make(chan *groups.JoinResponse, 1)
	go func() {
		r, err := c.Join(context.Background(), "g", ra)
		if err != nil {
			t.Errorf("rejoin: %v", err)
		}
		done <- r
	}()
	var r *groups.JoinResponse
	for r == nil {
		select {
		case r = <-done:
		case <-time.After(100 * time.Millisecond):
			err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: b.MemberID, Generation: 1})
			if err != nil && !isCode(err, protocol.RebalanceInProgress) {
				t.Fatalf("b's heartbeat during the rebalance: %v", err)
			}
		}
	}
	if r == nil || r.Generation != 2 || r.Leader != a.MemberID || len(r.Members) != 1 {
		t.Fatalf("the join phase without b: %+v", r)
	}
	if err := c.ClassicHeartbeat(context.Background(), "g", groups.ClassicHeartbeatRequest{MemberID: b.MemberID, Generation: 1}); !isCode(err, protocol.UnknownMemberID) {
		t.Fatalf("b's heartbeat after it was removed: %v", err)
	}
}
