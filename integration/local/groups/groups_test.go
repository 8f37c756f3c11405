package groups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// consumeUntil runs an in-process group member until it has processed every
// value in want (or stop says so), processing with the given per-poll pause.
func consumeUntil(ctx context.Context, t *testing.T, cfg client.ConsumerConfig, want map[string]bool, pause time.Duration, stop func(seen int) bool) map[string]bool {
	t.Helper()
	c, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < len(want) && (stop == nil || !stop(len(seen))) {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("%s: poll: %v (seen %d of %d)", cfg.Group, err, len(seen), len(want))
		}
		for _, r := range recs {
			if want[string(r.Value)] {
				seen[string(r.Value)] = true
			}
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("%s: close: %v", cfg.Group, err)
	}
	return seen
}

func committedTotal(t *testing.T, ctx context.Context, gc *groups.Client, group, topic string) int64 {
	t.Helper()
	offs, err := gc.Offsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, o := range offs {
		sum += o.Offset
	}
	return sum
}

// TestTwoGroupsReadIndependently: two groups on one topic at different paces
// both receive every record, and their committed offsets never affect each
// other (the slow one stops half-way and resumes from its own commits, after
// a storage leader was killed: its consumer follows the new leaders).
func TestTwoGroupsReadIndependently(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "shared", 4, 3)
	values := itest.ProduceValues(t, c, "shared", "r", 2000)
	want := map[string]bool{}
	for _, v := range values {
		want[v] = true
	}
	gc := groups.NewClient(c.OffsetsURLs())

	fast := consumeUntil(ctx, t, itest.ConsumerConfig(c, "fast", "shared"), want, 0, nil)
	if len(fast) != len(want) {
		t.Fatalf("fast group saw %d of %d", len(fast), len(want))
	}
	slowCfg := itest.ConsumerConfig(c, "slow", "shared")
	slowCfg.MaxPollRecords = 50
	first := consumeUntil(ctx, t, slowCfg, want, 5*time.Millisecond, func(seen int) bool { return seen >= 500 })
	if got := committedTotal(t, ctx, gc, "fast", "shared"); got != 2000 {
		t.Fatalf("fast group's commits sum to %d, want 2000", got)
	}
	slowCommitted := committedTotal(t, ctx, gc, "slow", "shared")
	if slowCommitted < 500 || slowCommitted >= 2000 {
		t.Fatalf("slow group's commits sum to %d after reading %d, want within [500, 2000)", slowCommitted, len(first))
	}
	d, err := gc.Describe(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if d.TotalLag != 2000-slowCommitted || d.State != groups.StateEmpty {
		t.Fatalf("slow group: lag %d state %s, want lag %d of an empty group", d.TotalLag, d.State, 2000-slowCommitted)
	}
	// The slow group resumes from its own commits, after partition 0's leader
	// died; the fast group's commits stay put.
	itest.WaitFullISR(t, ctx, c, "shared", 3)
	leader, _ := itest.LeaderOf(t, ctx, c, "shared", 0)
	c.StopProc(c.Proc(fmt.Sprintf("storage-%d", leader)), true)
	rest := map[string]bool{}
	for v := range want {
		if !first[v] {
			rest[v] = true
		}
	}
	second := consumeUntil(ctx, t, slowCfg, rest, 0, nil)
	if len(second) != len(rest) {
		t.Fatalf("slow group resumed and saw %d of the %d it had not read", len(second), len(rest))
	}
	for _, g := range []string{"fast", "slow"} {
		if got := committedTotal(t, ctx, gc, g, "shared"); got != 2000 {
			t.Fatalf("group %s's commits sum to %d at the end, want 2000", g, got)
		}
		d, err := gc.Describe(ctx, g)
		if err != nil || d.TotalLag != 0 {
			t.Fatalf("group %s: %+v, %v; want lag 0", g, d, err)
		}
	}
}

// TestGroupOwnershipThroughJoinsLeavesAndCrash: three members over six
// partitions through joins, a clean leave and a kill -9; the members' event
// logs show no partition owned by two members at any moment and every record
// processed at least once.
func TestGroupOwnershipThroughJoinsLeavesAndCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "owned", 6, 1)
	values := itest.ProduceValues(t, c, "owned", "a", 3000)

	slow := []string{"-record-delay", "200us"}
	m1 := itest.StartMember(t, c, "m1", "g3", "owned", slow...)
	itest.WaitOwnership(t, 6, []int{6}, m1)
	m2 := itest.StartMember(t, c, "m2", "g3", "owned", slow...)
	m3 := itest.StartMember(t, c, "m3", "g3", "owned", slow...)
	itest.WaitOwnership(t, 6, []int{2, 2, 2}, m1, m2, m3)
	values = append(values, itest.ProduceValues(t, c, "owned", "b", 1500)...)

	m2.Stop() // clean leave: commits, revokes, leaves
	itest.WaitOwnership(t, 6, []int{3, 3}, m1, m3)
	m4 := itest.StartMember(t, c, "m4", "g3", "owned", slow...)
	itest.WaitOwnership(t, 6, []int{2, 2, 2}, m1, m3, m4)
	values = append(values, itest.ProduceValues(t, c, "owned", "c", 1500)...)

	m3.Kill() // crash: its partitions move after its session expires
	itest.WaitOwnership(t, 6, []int{3, 3}, m1, m4)
	values = append(values, itest.ProduceValues(t, c, "owned", "d", 1000)...)
	itest.WaitProcessed(t, values, m1, m2, m3, m4)
	m1.Stop()
	m4.Stop()
	itest.CheckExclusiveOwnership(t, m1, m2, m3, m4)
}

// TestUncommittedRecordsAreRedelivered: a member that processed records but
// never committed is killed; the next owner processes every one of them
// again (at-least-once) and skips nothing.
func TestUncommittedRecordsAreRedelivered(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "redeliver", 2, 1)
	values := itest.ProduceValues(t, c, "redeliver", "x", 2000)

	m1 := itest.StartMember(t, c, "m1", "gr", "redeliver", "-commit", "none", "-record-delay", "1ms")
	deadline := time.Now().Add(60 * time.Second)
	for len(m1.Processed()) < 300 {
		if time.Now().After(deadline) {
			t.Fatalf("first member processed only %d records", len(m1.Processed()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	m1.Kill()
	done := m1.Processed()
	m2 := itest.StartMember(t, c, "m2", "gr", "redeliver")
	itest.WaitProcessed(t, values, m2)
	again := map[string]bool{}
	for _, v := range m2.Processed() {
		again[v] = true
	}
	for _, v := range done {
		if !again[v] {
			t.Fatalf("%s was processed by the killed member without a commit but never delivered to the new owner", v)
		}
	}
	itest.CheckExclusiveOwnership(t, m1, m2)
}

// pollUntilSeen polls cons, adding every value to seen, until seen holds as
// many values as want.
func pollUntilSeen(t *testing.T, ctx context.Context, cons *client.Consumer, seen, want map[string]bool) {
	t.Helper()
	for len(seen) < len(want) {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seen[string(r.Value)] = true
		}
	}
}

// TestOffsetsLeaderKill: committed offsets survive the death of the offsets
// Raft leader and the group resumes through the new one.
func TestOffsetsLeaderKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "survive", 3, 3)
	values := itest.ProduceValues(t, c, "survive", "s", 900)
	want := map[string]bool{}
	for _, v := range values {
		want[v] = true
	}
	cfg := itest.ConsumerConfig(c, "gk", "survive")
	cons, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	seen := map[string]bool{}
	pollUntilSeen(t, ctx, cons, seen, want)
	if err := cons.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	gc := groups.NewClient(c.OffsetsURLs())
	before, err := gc.Offsets(ctx, "gk", "survive")
	if err != nil || len(before) != 3 {
		t.Fatalf("offsets before the kill: %v, %v", before, err)
	}
	leader := itest.OffsetsLeader(t, c)
	c.StopProc(leader, true)
	t.Logf("killed offsets leader %s", leader.Name)

	var after []groups.Committed
	deadline := time.Now().Add(30 * time.Second)
	for {
		after, err = gc.Offsets(ctx, "gk", "survive")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !slices.EqualFunc(before, after, func(a, b groups.Committed) bool { return a.Partition == b.Partition && a.Offset == b.Offset }) {
		t.Fatalf("offsets after the leader's death: %v (%v), before %v", after, err, before)
	}
	// The group resumes: new records arrive and their commits land.
	more := itest.ProduceValues(t, c, "survive", "t", 300)
	for _, v := range more {
		want[v] = true
	}
	pollUntilSeen(t, ctx, cons, seen, want)
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := cons.Commit(ctx)
		if err == nil && committedTotal(t, ctx, gc, "gk", "survive") == 1200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("commits after the failover: %v, total %d, want 1200", err, committedTotal(t, ctx, gc, "gk", "survive"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The killed replica comes back and catches up.
	if err := c.StartProc(ctx, leader); err != nil {
		t.Fatal(err)
	}
}

// TestZombieCommitIsRejected: a member whose session expired is fenced; its
// later commit is rejected, as is a live member's commit of a partition it
// does not own.
func TestZombieCommitIsRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "zombie", 2, 1)
	gc := groups.NewClient(c.OffsetsURLs())
	join := func(client string) *groups.HeartbeatResponse {
		resp, err := gc.Heartbeat(ctx, "gz", groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, ClientID: client, Topics: []string{"zombie"}, SessionTimeoutMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	z := join("zombie")
	if got := groups.Flatten(z.Assignment); len(got) != 2 {
		t.Fatalf("first member assignment %v, want both partitions", got)
	}
	commit := func(id string, epoch int32, p int32) error {
		return gc.Commit(ctx, "gz", groups.CommitRequest{MemberID: id, MemberEpoch: epoch, Offsets: []groups.Offset{{Topic: "zombie", Partition: p, Offset: 1}}})
	}
	if err := commit(z.MemberID, z.MemberEpoch, 0); err != nil {
		t.Fatalf("commit while alive: %v", err)
	}
	// The zombie stops heartbeating; a live member keeps its session and
	// takes both partitions once the zombie is expired.
	live := join("live")
	var lresp *groups.HeartbeatResponse
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		lresp, err = gc.Heartbeat(ctx, "gz", groups.HeartbeatRequest{MemberID: live.MemberID, MemberEpoch: live.MemberEpoch, Topics: []string{"zombie"}, SessionTimeoutMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		live.MemberEpoch = lresp.MemberEpoch
		if len(groups.Flatten(lresp.Assignment)) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live member never got both partitions: %v", lresp.Assignment)
		}
		time.Sleep(200 * time.Millisecond)
	}
	err := commit(z.MemberID, z.MemberEpoch, 0)
	if !errors.Is(err, &protocol.Error{Code: protocol.UnknownMemberID}) {
		t.Fatalf("zombie's commit: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if err := commit(live.MemberID, live.MemberEpoch, 0); err != nil {
		t.Fatalf("live member's commit: %v", err)
	}
	if _, err := gc.Heartbeat(ctx, "gz", groups.HeartbeatRequest{MemberID: z.MemberID, MemberEpoch: z.MemberEpoch, Topics: []string{"zombie"}}); !errors.Is(err, &protocol.Error{Code: protocol.UnknownMemberID}) {
		t.Fatalf("zombie's heartbeat: %v, want UNKNOWN_MEMBER_ID", err)
	}
	// A commit without a member id is refused while the group has members.
	if err := gc.Commit(ctx, "gz", groups.CommitRequest{Offsets: []groups.Offset{{Topic: "zombie", Partition: 0, Offset: 5}}}); !errors.Is(err, &protocol.Error{Code: protocol.UnknownMemberID}) {
		t.Fatalf("anonymous commit to an active group: %v", err)
	}
	offs, _ := gc.Offsets(ctx, "gz", "zombie")
	if len(offs) != 1 || offs[0].Offset != 1 {
		t.Fatalf("offsets %v, want only the accepted commit of 1", offs)
	}
}

// TestGroupAdmin: describe with lag (also once retention passed the commit,
// and for a group without members), reset-offsets of an inactive group by
// earliest, latest, timestamp and explicit offset (and dry run), the
// non-empty-group refusals, and delete.
func TestGroupAdmin(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 1, "-retention-check-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: "adm", Partitions: 1, ReplicationFactor: 1, Config: map[string]string{"segment.bytes": "4096", "retention.bytes": "4096"}})
	gc := groups.NewClient(c.OffsetsURLs())
	// A commit at 0 without members (a tool's commit), then 400 records:
	// retention deletes the oldest segments, passing the commit.
	if err := gc.Commit(ctx, "ga", groups.CommitRequest{Offsets: []groups.Offset{{Topic: "adm", Partition: 0, Offset: 0}}}); err != nil {
		t.Fatal(err)
	}
	itest.ProduceInRequests(t, c, "adm", "v", 400, 10) // small batches: segments roll between them
	var d *groups.Description
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		d, err = gc.Describe(ctx, "ga")
		if err != nil || len(d.Partitions) != 1 {
			t.Fatalf("describe: %+v, %v", d, err)
		}
		if d.Partitions[0].LogStart > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention never moved the log start: %+v", d.Partitions[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := d.Partitions[0]
	if p.Committed != 0 || p.LogEnd != 400 || p.Lag != 400-p.LogStart || d.TotalLag != p.Lag || d.State != groups.StateEmpty || len(d.Members) != 0 {
		t.Fatalf("describe after retention: %+v partition %+v; want lag = end - log start", d, p)
	}
	start := p.LogStart

	reset := func(req groups.ResetRequest) int64 {
		t.Helper()
		req.Topic = "adm"
		offs, err := gc.ResetOffsets(ctx, "ga", req)
		if err != nil || len(offs) != 1 {
			t.Fatalf("reset %+v: %v, %v", req, offs, err)
		}
		return offs[0].Offset
	}
	for _, tc := range []struct {
		req  groups.ResetRequest
		want int64
	}{
		{groups.ResetRequest{To: groups.ResetLatest}, 400},
		{groups.ResetRequest{To: groups.ResetEarliest}, start},
		{groups.ResetRequest{To: groups.ResetOffset, Offset: 399}, 399},
		{groups.ResetRequest{To: groups.ResetOffset, Offset: 10_000}, 400},
		{groups.ResetRequest{To: groups.ResetOffset, Offset: 0}, start},
		{groups.ResetRequest{To: groups.ResetTimestamp, TimestampMs: time.Now().Add(time.Hour).UnixMilli()}, 400},
		{groups.ResetRequest{To: groups.ResetTimestamp, TimestampMs: 0}, start},
		{groups.ResetRequest{To: groups.ResetOffset, Offset: 300}, 300},
		{groups.ResetRequest{To: groups.ResetLatest, DryRun: true}, 400},
	} {
		if got := reset(tc.req); got != tc.want {
			t.Fatalf("reset %+v: %d, want %d", tc.req, got, tc.want)
		}
	}
	if got := committedTotal(t, ctx, gc, "ga", "adm"); got != 300 {
		t.Fatalf("committed %d after the resets, want 300 (the dry run changes nothing)", got)
	}
	if _, err := gc.ResetOffsets(ctx, "ga", groups.ResetRequest{Topic: "adm", To: "yesterday"}); !errors.Is(err, &protocol.Error{Code: protocol.InvalidRequest}) {
		t.Fatalf("reset to a bad target: %v", err)
	}

	// With a member, reset and delete are refused.
	m, err := gc.Heartbeat(ctx, "ga", groups.HeartbeatRequest{MemberEpoch: groups.JoinEpoch, Topics: []string{"adm"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gc.ResetOffsets(ctx, "ga", groups.ResetRequest{Topic: "adm", To: groups.ResetLatest}); !errors.Is(err, &protocol.Error{Code: protocol.NonEmptyGroup}) {
		t.Fatalf("reset of an active group: %v, want NON_EMPTY_GROUP", err)
	}
	if err := gc.Delete(ctx, "ga"); !errors.Is(err, &protocol.Error{Code: protocol.NonEmptyGroup}) {
		t.Fatalf("delete of an active group: %v, want NON_EMPTY_GROUP", err)
	}
	if d, err := gc.Describe(ctx, "ga"); err != nil || len(d.Members) != 1 || d.Partitions[0].Owner != m.MemberID || d.Partitions[0].Lag != 100 {
		t.Fatalf("describe with a member: %+v, %v", d, err)
	}
	if _, err := gc.Heartbeat(ctx, "ga", groups.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: groups.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	list, err := gc.List(ctx)
	if err != nil || !slices.ContainsFunc(list, func(l groups.Listing) bool { return l.Group == "ga" && l.State == groups.StateEmpty }) {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := gc.Delete(ctx, "ga"); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Describe(ctx, "ga"); !errors.Is(err, &protocol.Error{Code: protocol.GroupIDNotFound}) {
		t.Fatalf("describe after delete: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if err := gc.Delete(ctx, "ga"); !errors.Is(err, &protocol.Error{Code: protocol.GroupIDNotFound}) {
		t.Fatalf("second delete: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

// TestRecreatedTopicIsReadFromItsStart: a group read a topic to its end and
// committed; the topic is deleted and created again under the same name.
// The group's committed offsets are of the old log: the new one is read from
// its own start, not from where the old one ended (which would skip the
// first records of the new log), and describe reports no commit on it.
func TestRecreatedTopicIsReadFromItsStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	asSet := func(values []string) map[string]bool {
		m := map[string]bool{}
		for _, v := range values {
			m[v] = true
		}
		return m
	}
	itest.CreateTopic(t, ctx, c, "again", 1, 1)
	old := asSet(itest.ProduceValues(t, c, "again", "old", 100))
	if seen := consumeUntil(ctx, t, itest.ConsumerConfig(c, "readers", "again"), old, 0, nil); len(seen) != len(old) {
		t.Fatalf("saw %d of the first log's %d records", len(seen), len(old))
	}
	gc := groups.NewClient(c.OffsetsURLs())
	if got := committedTotal(t, ctx, gc, "readers", "again"); got != 100 {
		t.Fatalf("committed %d after reading the first log, want 100", got)
	}
	if err := cluster.NewClient([]string{c.FrontendURL()}).DeleteTopic(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		_, err := cluster.NewClient([]string{c.FrontendURL()}).CreateTopic(ctx, cluster.CreateTopicRequest{Name: "again", Partitions: 1, ReplicationFactor: 1})
		return err
	})
	itest.WaitLeaders(t, ctx, c, "again", 1)
	fresh := asSet(itest.ProduceValues(t, c, "again", "new", 150))
	// The group starts once more. Resuming at the old log's offsets would
	// leave its poll waiting for records that never come: a minute bounds it.
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	seen := consumeUntil(rctx, t, itest.ConsumerConfig(c, "readers", "again"), fresh, 0, nil)
	if len(seen) != len(fresh) {
		t.Fatalf("the group read %d of the new log's %d records: it resumed from the deleted log's offsets", len(seen), len(fresh))
	}
	d, err := gc.Describe(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Partitions) != 1 || d.Partitions[0].Committed != 150 || d.TotalLag != 0 {
		t.Fatalf("describe after reading the new log: %+v", d.Partitions)
	}
}
