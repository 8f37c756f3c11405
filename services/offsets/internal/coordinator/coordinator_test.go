package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator/coordtest"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// testSettings are short timeouts so expiry shows within a test.
func testSettings() Settings {
	s := DefaultSettings()
	s.SessionTimeout, s.MinSessionTimeout = 400*time.Millisecond, 100*time.Millisecond
	s.RebalanceTimeout = 600 * time.Millisecond
	s.HeartbeatInterval = 50 * time.Millisecond
	s.ExpiryCheckInterval = 20 * time.Millisecond
	return s
}

// start runs a real single-voter Raft group over the real FSM in dir and a
// coordinator on it, and waits until the coordinator is ready.
func start(t *testing.T, dir string) (*Coordinator, *fsm.FSM, func()) {
	t.Helper()
	return startWith(t, dir, testSettings())
}

// startWith is start with the coordinator's settings given; opts adjust the
// coordinator before it starts.
func startWith(t testing.TB, dir string, s Settings, opts ...func(*Coordinator)) (*Coordinator, *fsm.FSM, func()) {
	t.Helper()
	return coordtest.Start(t, dir, func(f *fsm.FSM, n *raftgroup.Node, log *slog.Logger) *Coordinator {
		c := New(f, n, coordtest.Topics{"t": 4}, s, log)
		for _, o := range opts {
			o(c)
		}
		return c
	})
}

type testMember struct {
	id    string
	epoch int32
	owned []groups.TP
}

func (m *testMember) beat(t *testing.T, c *Coordinator, release bool) error {
	t.Helper()
	resp, err := c.Heartbeat(context.Background(), "g", groups.HeartbeatRequest{MemberID: m.id, MemberEpoch: m.epoch, Topics: []string{"t"}, Owned: groups.Group(m.owned)})
	if err != nil {
		return err
	}
	m.id, m.epoch = resp.MemberID, resp.MemberEpoch
	if release {
		m.owned = groups.Flatten(resp.Assignment)
	} else { // a member that never lets go: keeps what it had and adds what it got
		m.owned = groups.SortTPs(append(m.owned, groups.Flatten(resp.Assignment)...))
	}
	return nil
}

// keepBeating heartbeats m until the member owns want partitions.
func keepBeating(t *testing.T, c *Coordinator, m *testMember, want int, release bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() error {
		if err := m.beat(t, c, release); err != nil {
			t.Fatal(err)
		}
		if len(m.owned) != want {
			return fmt.Errorf("member %s owns %v, want %d partitions", m.id, m.owned, want)
		}
		return nil
	})
}

// TestSessionExpiryMovesPartitions: a member silent past its session
// timeout is removed and its partitions move to the member left. It runs
// in a synctest bubble: the session passes on the bubble's clock.
func TestSessionExpiryMovesPartitions(t *testing.T) {
	synctest.Test(t, testSessionExpiryMovesPartitions)
}

func testSessionExpiryMovesPartitions(t *testing.T) {
	c, f, _ := start(t, t.TempDir())
	a, b := &testMember{}, &testMember{}
	keepBeating(t, c, a, 4, true)
	keepBeating(t, c, b, 0, true)
	for i := 0; i < 10; i++ { // settle 2/2
		a.beat(t, c, true)
		b.beat(t, c, true)
	}
	if len(a.owned) != 2 || len(b.owned) != 2 {
		t.Fatalf("not balanced: %v / %v", a.owned, b.owned)
	}
	// b goes silent: after its session it is removed and a takes everything.
	keepBeating(t, c, a, 4, true)
	if err := b.beat(t, c, true); !errors.Is(err, &protocol.Error{Code: protocol.UnknownMemberID}) {
		t.Fatalf("expired member's heartbeat: %v, want UNKNOWN_MEMBER_ID", err)
	}
	g, _ := f.Group("g")
	if len(g.Members) != 1 {
		t.Fatalf("members after expiry: %v", g.Members)
	}
}

// TestMemberThatNeverReleasesIsRemovedAfterRebalanceTimeout: a member that
// does not give up a partition it was asked to revoke is removed once the
// rebalance timeout passes (on a synctest bubble's clock), and the partition
// moves on.
func TestMemberThatNeverReleasesIsRemovedAfterRebalanceTimeout(t *testing.T) {
	synctest.Test(t, testMemberThatNeverReleasesIsRemovedAfterRebalanceTimeout)
}

func testMemberThatNeverReleasesIsRemovedAfterRebalanceTimeout(t *testing.T) {
	c, _, _ := start(t, t.TempDir())
	hog, other := &testMember{}, &testMember{}
	keepBeating(t, c, hog, 4, false)
	if err := other.beat(t, c, true); err != nil {
		t.Fatal(err)
	}
	// The hog keeps heartbeating (its session stays alive) but never
	// releases what it is asked to revoke: after the rebalance timeout it is
	// removed, and only then does the other member get partitions.
	start := time.Now()
	var hogErr error
	testkit.Eventually(t, 10*time.Second, func() error {
		hogErr = hog.beat(t, c, false)
		if err := other.beat(t, c, true); err != nil {
			t.Fatal(err)
		}
		if hogErr != nil {
			return nil
		}
		if len(other.owned) > 0 {
			t.Fatalf("other member got %v while the hog still holds everything", other.owned)
		}
		return fmt.Errorf("the hog (owning %v) was never removed", hog.owned)
	})
	if !errors.Is(hogErr, &protocol.Error{Code: protocol.UnknownMemberID}) || time.Since(start) < testSettings().RebalanceTimeout {
		t.Fatalf("hog removed after %v with %v; want UNKNOWN_MEMBER_ID after the %v rebalance timeout", time.Since(start), hogErr, testSettings().RebalanceTimeout)
	}
	keepBeating(t, c, other, 4, true)
}

func TestGroupStateAndOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	c, f, stop := start(t, dir)
	m := &testMember{}
	keepBeating(t, c, m, 4, true)
	if err := c.Commit(context.Background(), "g", groups.CommitRequest{MemberID: m.id, MemberEpoch: m.epoch,
		Offsets: []groups.Offset{{Topic: "t", Partition: 3, Offset: 77}}}); err != nil {
		t.Fatal(err)
	}
	// A zombie's commit is refused by the coordinator before it reaches the log.
	if err := c.Commit(context.Background(), "g", groups.CommitRequest{MemberID: "ghost", MemberEpoch: 1,
		Offsets: []groups.Offset{{Topic: "t", Partition: 3, Offset: 1}}}); !errors.Is(err, &protocol.Error{Code: protocol.UnknownMemberID}) {
		t.Fatalf("ghost commit: %v", err)
	}
	applied := f.AppliedIndex()
	stop()

	c2, f2, _ := start(t, dir)
	if f2.AppliedIndex() < applied {
		t.Fatalf("applied index %d after restart, was %d", f2.AppliedIndex(), applied)
	}
	offs, err := f2.Offsets("g", "t")
	if err != nil || len(offs) != 1 || offs[0].Offset != 77 {
		t.Fatalf("offsets after restart: %v, %v", offs, err)
	}
	// The member survived in the state; its session clock restarted with the
	// new leadership, so it can carry on with the same id and epoch.
	if err := m.beat(t, c2, true); err != nil || len(m.owned) != 4 {
		t.Fatalf("member after restart: %v, owns %v", err, m.owned)
	}
}

// TestGroupLocksDoNotPileUp: every group name a client heartbeats gets a lock
// only while the heartbeat runs, so made-up names cost no memory afterwards.
func TestGroupLocksDoNotPileUp(t *testing.T) {
	c, _, _ := start(t, t.TempDir())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("made-up-%d", i%5)
			if _, err := c.Heartbeat(context.Background(), group, groups.HeartbeatRequest{Topics: []string{"t"}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// The expiry sweep takes the groups' locks now and then: wait for a
	// moment when nothing holds one.
	testkit.Eventually(t, 5*time.Second, func() error {
		if n := c.locks.Held(); n != 0 {
			return fmt.Errorf("%d group locks left after every heartbeat returned", n)
		}
		return nil
	})
}

// TestClocksOfGoneMembersAreForgotten: a member that left the state without
// its clocks being dropped (its removal committed after the proposal timed
// out) has them dropped by the next expiry sweep; live members keep theirs.
func TestClocksOfGoneMembersAreForgotten(t *testing.T) {
	c, _, _ := start(t, t.TempDir())
	// A long session, so the live member cannot expire while the test runs.
	resp, err := c.Heartbeat(context.Background(), "g", groups.HeartbeatRequest{Topics: []string{"t"}, SessionTimeoutMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	gone := memberKey{"g", "gone"}
	c.mu.Lock()
	c.seen[gone], c.revokeSince[gone] = c.now(), c.now()
	c.mu.Unlock()
	c.expire()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[gone]; ok {
		t.Fatal("the session clock of a member not in the state was kept")
	}
	if _, ok := c.revokeSince[gone]; ok {
		t.Fatal("the rebalance clock of a member not in the state was kept")
	}
	if _, ok := c.seen[memberKey{"g", resp.MemberID}]; !ok {
		t.Fatal("the live member's session clock was dropped")
	}
}

// BenchmarkExpireSweep is one expiry sweep over a group of 500 live members
// (none expires): the coordinator's leader runs it every
// ExpiryCheckInterval.
func BenchmarkExpireSweep(b *testing.B) {
	s := DefaultSettings()
	s.SessionTimeout, s.ExpiryCheckInterval = time.Minute, time.Hour
	c, _, _ := startWith(b, b.TempDir(), s)
	for i := 0; i < 500; i++ {
		if _, err := c.Heartbeat(context.Background(), "g", groups.HeartbeatRequest{Topics: []string{"t"}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.expire()
	}
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestIdleGroupsExpireWithTheirOffsets: a group without members whose last
// commit, or whose last member's leaving, is older than the offsets retention
// is deleted with its offsets; a group active since, and one with a member,
// stay.
func TestIdleGroupsExpireWithTheirOffsets(t *testing.T) {
	s := testSettings()
	// The test runs the sweeps itself, at the times it sets.
	s.ExpiryCheckInterval, s.OffsetsRetention, s.RetentionCheckInterval = time.Hour, time.Hour, time.Hour
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c, f, _ := startWith(t, t.TempDir(), s, func(c *Coordinator) { c.now = clk.now })
	ctx := context.Background()
	commit := func(group string) {
		t.Helper()
		if err := c.Commit(ctx, group, groups.CommitRequest{Offsets: []groups.Offset{{Topic: "t", Offset: 5}}}); err != nil {
			t.Fatal(err)
		}
	}
	join := func(group string) string {
		t.Helper()
		resp, err := c.Heartbeat(ctx, group, groups.HeartbeatRequest{Topics: []string{"t"}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.MemberID
	}
	commit("idle")
	left := join("left")
	if _, err := c.Heartbeat(ctx, "left", groups.HeartbeatRequest{MemberID: left, MemberEpoch: groups.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	join("busy")
	clk.advance(30 * time.Minute)
	commit("recent")
	clk.advance(40 * time.Minute) // "idle" and "left" are 70 minutes idle, "recent" 40
	c.expireGroups()
	if names := f.GroupNames(); !slices.Equal(names, []string{"busy", "recent"}) {
		t.Fatalf("groups after the sweep: %v, want busy and recent", names)
	}
	for _, gone := range []string{"idle", "left"} {
		if offs, _ := f.Offsets(gone, ""); len(offs) != 0 {
			t.Errorf("group %s kept its offsets %v", gone, offs)
		}
	}
}

// TestAwayStaticMemberExpiresWithItsSession: a static member's temporary
// leave keeps its partitions from the others until its session runs out;
// then the coordinator removes it and they move.
func TestAwayStaticMemberExpiresWithItsSession(t *testing.T) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c, f, _ := startWith(t, t.TempDir(), testSettings(), func(c *Coordinator) { c.now = clk.now })
	static, other := &testMember{}, &testMember{}
	resp, err := c.Heartbeat(context.Background(), "g", groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, InstanceID: "pod-0", Topics: []string{"t"}, Owned: []groups.TopicPartitions{}})
	if err != nil {
		t.Fatal(err)
	}
	static.id, static.epoch = resp.MemberID, resp.MemberEpoch
	keepBeating(t, c, other, 0, true)
	for range 10 { // settle 2/2; the static member releases what it is told to
		r, err := c.Heartbeat(context.Background(), "g", groups.HeartbeatRequest{MemberID: static.id, MemberEpoch: static.epoch, InstanceID: "pod-0", Topics: []string{"t"}, Owned: groups.Group(static.owned)})
		if err != nil {
			t.Fatal(err)
		}
		static.epoch, static.owned = r.MemberEpoch, groups.Flatten(r.Assignment)
		other.beat(t, c, true)
	}
	if len(static.owned) != 2 || len(other.owned) != 2 {
		t.Fatalf("not balanced: %v / %v", static.owned, other.owned)
	}
	if _, err := c.Heartbeat(context.Background(), "g", groups.HeartbeatRequest{MemberID: static.id, MemberEpoch: groups.StaticLeaveEpoch, InstanceID: "pod-0"}); err != nil {
		t.Fatal(err)
	}
	clk.advance(300 * time.Millisecond) // within the 400 ms session
	c.expire()
	other.beat(t, c, true)
	if g, _ := f.Group("g"); len(other.owned) != 2 || g.Members[static.id] == nil || !g.Members[static.id].Away {
		t.Fatalf("within its session the away member's partitions moved: other owns %v; members %v", other.owned, g.Members)
	}
	clk.advance(200 * time.Millisecond)
	c.expire()
	keepBeating(t, c, other, 4, true)
	if g, _ := f.Group("g"); len(g.Members) != 1 {
		t.Fatalf("members after the away member's session: %v", g.Members)
	}
}
