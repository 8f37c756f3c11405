package client

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

// These tests run a real Consumer (its group goroutine and fetchers, over
// real sockets) against the fakes of consumer_fake_test.go.

// events records the callbacks.
type events struct {
	mu                      sync.Mutex
	assigned, revoked, lost [][]groups.TP
}

func (e *events) hook(cfg *ConsumerConfig) {
	cfg.OnAssigned = func(t []groups.TP) { e.mu.Lock(); e.assigned = append(e.assigned, t); e.mu.Unlock() }
	cfg.OnRevoked = func(t []groups.TP) { e.mu.Lock(); e.revoked = append(e.revoked, t); e.mu.Unlock() }
	cfg.OnLost = func(t []groups.TP) { e.mu.Lock(); e.lost = append(e.lost, t); e.mu.Unlock() }
}

func (e *events) counts() (a, r, l int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.assigned), len(e.revoked), len(e.lost)
}

func startConsumer(t *testing.T, cfg ConsumerConfig) *Consumer {
	t.Helper()
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// pollUntil polls until cond holds, returning every record polled.
func pollUntil(t *testing.T, c *Consumer, what string, cond func(got []ConsumerRecord) bool) []ConsumerRecord {
	t.Helper()
	var got []ConsumerRecord
	deadline := time.Now().Add(10 * time.Second)
	for !cond(got) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out polling for %s (got %d records)", what, len(got))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		recs, err := c.Poll(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("poll: %v", err)
		}
		got = append(got, recs...)
	}
	return got
}

func pollN(t *testing.T, c *Consumer, n int) []ConsumerRecord {
	t.Helper()
	return pollUntil(t, c, "records", func(got []ConsumerRecord) bool { return len(got) >= n })
}

// offsetsOf returns the offsets polled from partition p, in order.
func offsetsOf(recs []ConsumerRecord, p int32) []int64 {
	var out []int64
	for _, r := range recs {
		if r.Partition == p {
			out = append(out, r.Offset)
		}
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func TestConsumerStartsAtCommittedOrResetCommitsAndLeaves(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.append(0, 10)
	fc.append(1, 5)
	fc.coord.SetInitial(tps(0, 1)...)
	fc.coord.SetCommitted(tps(0)[0], 4, "")
	cfg := fc.config()
	var ev events
	ev.hook(&cfg)
	c := startConsumer(t, cfg)

	got := pollN(t, c, 11)
	if o := offsetsOf(got, 0); !slices.Equal(o, seq(4, 10)) {
		t.Errorf("partition 0 offsets %v, want 4..9 (from the committed offset)", o)
	}
	if o := offsetsOf(got, 1); !slices.Equal(o, seq(0, 5)) {
		t.Errorf("partition 1 offsets %v, want 0..4 (earliest)", o)
	}
	if string(got[0].Value) == "" || got[0].Topic != "t" {
		t.Errorf("first record %+v", got[0])
	}
	if a, _, _ := ev.counts(); a != 1 || !slices.Equal(ev.assigned[0], tps(0, 1)) {
		t.Errorf("OnAssigned calls %v", ev.assigned)
	}
	if p, ok := c.Position(tps(0)[0]); !ok || p != 10 {
		t.Errorf("position of t-0 %d %v, want 10", p, ok)
	}
	if hw := c.HighWatermark(tps(1)[0]); hw != 5 {
		t.Errorf("high watermark of t-1 %d, want 5", hw)
	}
	if c.MemberID() != "m1" || !slices.Equal(c.Assignment(), tps(0, 1)) {
		t.Errorf("member %q assignment %v", c.MemberID(), c.Assignment())
	}
	if err := c.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p, want := range []int64{10, 5} {
		if cm, _ := fc.coord.Committed(tps(int32(p))[0]); cm.Offset != want {
			t.Errorf("committed t-%d = %d, want %d", p, cm.Offset, want)
		}
	}
	commits := fc.coord.Commits()
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := fc.coord.Commits(); n != commits {
		t.Errorf("Close committed unchanged positions again (%d commits, was %d)", n, commits)
	}
	if _, r, _ := ev.counts(); r != 1 || !slices.Equal(ev.revoked[0], tps(0, 1)) {
		t.Errorf("OnRevoked calls %v", ev.revoked)
	}
	hbs := fc.coord.Heartbeats()
	if last := hbs[len(hbs)-1]; last.MemberEpoch != groups.LeaveEpoch || last.MemberID != "m1" {
		t.Errorf("last heartbeat %+v, want a leave of m1", last)
	}
	if _, err := c.Poll(context.Background()); !errors.Is(err, ErrConsumerClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if err := c.Commit(context.Background()); err != nil && !errors.Is(err, ErrConsumerClosed) {
		t.Errorf("Commit after Close: %v", err)
	}
}

func TestConsumerRevokesAfterCommittingAndReportsRelease(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.append(0, 3)
	fc.append(1, 3)
	fc.coord.SetInitial(tps(0, 1)...)
	cfg := fc.config()
	var ev events
	ev.hook(&cfg)
	var problems []string
	cfg.OnRevoked = func(ts []groups.TP) {
		ev.mu.Lock()
		ev.revoked = append(ev.revoked, ts)
		ev.mu.Unlock()
		if cm, ok := fc.coord.Committed(tps(1)[0]); !ok || cm.Offset != 3 {
			problems = append(problems, "t-1 not committed before OnRevoked")
		}
		if owned, _ := fc.coord.OwnedBy("m1"); !slices.Contains(owned, tps(1)[0]) {
			problems = append(problems, "t-1 reported released before OnRevoked: "+tpList(owned))
		}
	}
	c := startConsumer(t, cfg)
	pollN(t, c, 6)
	testkit.WaitFor(t, 10*time.Second, "the assignment reported owned", func() bool {
		owned, _ := fc.coord.OwnedBy("m1")
		return slices.Equal(owned, tps(0, 1))
	})

	fc.coord.SetAssignment("m1", tps(0)...)
	pollUntil(t, c, "revocation", func([]ConsumerRecord) bool { _, r, _ := ev.counts(); return r > 0 })
	if len(problems) > 0 {
		t.Error(problems)
	}
	if !slices.Equal(ev.revoked[0], tps(1)) || !slices.Equal(c.Assignment(), tps(0)) {
		t.Fatalf("revoked %v, assignment %v", ev.revoked, c.Assignment())
	}
	testkit.WaitFor(t, 10*time.Second, "release reported at the new epoch", func() bool {
		owned, _ := fc.coord.OwnedBy("m1")
		return slices.Equal(owned, tps(0))
	})
	fc.append(1, 5)
	fc.append(0, 2)
	got := pollN(t, c, 2)
	got = append(got, pollUntil(t, c, "a quiet moment", func() func([]ConsumerRecord) bool {
		deadline := time.Now().Add(100 * time.Millisecond)
		return func([]ConsumerRecord) bool { return time.Now().After(deadline) }
	}())...)
	if o := offsetsOf(got, 1); len(o) > 0 {
		t.Errorf("records of revoked t-1 returned: %v", o)
	}
	if o := offsetsOf(got, 0); !slices.Equal(o, seq(3, 5)) {
		t.Errorf("t-0 offsets %v, want 3, 4", o)
	}
}

func TestConsumerLosesPartitionsWhenFencedAndRejoins(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.append(0, 3)
	fc.append(1, 3)
	fc.coord.SetInitial(tps(0, 1)...)
	cfg := fc.config()
	var ev events
	ev.hook(&cfg)
	joinsAtLoss := -1
	cfg.OnLost = func(ts []groups.TP) {
		ev.mu.Lock()
		ev.lost = append(ev.lost, ts)
		ev.mu.Unlock()
		joinsAtLoss = countJoins(fc.coord.Heartbeats())
	}
	c := startConsumer(t, cfg)
	pollN(t, c, 6)
	commits := fc.coord.Commits()

	fc.coord.Fence("m1")
	got := pollUntil(t, c, "loss", func([]ConsumerRecord) bool { _, _, l := ev.counts(); return l > 0 })
	if !slices.Equal(ev.lost[0], tps(0, 1)) || len(ev.revoked) != 0 {
		t.Errorf("lost %v revoked %v", ev.lost, ev.revoked)
	}
	if joinsAtLoss != 1 {
		t.Errorf("%d joins before OnLost returned, want 1 (rejoin only after release)", joinsAtLoss)
	}
	if n := fc.coord.Commits(); n != commits {
		t.Errorf("a lost partition was committed (%d commits, was %d)", n, commits)
	}
	// The rejoin: a fresh member (a new id, epoch 0) reporting nothing owned.
	got = append(got, pollUntil(t, c, "reassignment", func([]ConsumerRecord) bool { a, _, _ := ev.counts(); return a >= 2 })...)
	var joins []groups.HeartbeatRequest
	for _, hb := range fc.coord.Heartbeats() {
		if hb.MemberEpoch == groups.JoinEpoch {
			joins = append(joins, hb)
		}
	}
	if len(joins) < 2 {
		t.Fatalf("joins %+v, want the first and the rejoin", joins)
	}
	if rejoin := joins[len(joins)-1]; rejoin.MemberID == "" || rejoin.MemberID == joins[0].MemberID || len(rejoin.Owned) != 0 {
		t.Errorf("rejoin %+v after first join %+v", rejoin, joins[0])
	}
	if c.MemberID() != "m2" {
		t.Errorf("member id %q after rejoin, want m2", c.MemberID())
	}
	// Nothing was committed: the new member reads from the start again.
	// (The Poll that ran OnLost went on to take the new assignment and may
	// have returned its first records already.)
	got = append(got, pollUntil(t, c, "records", func(more []ConsumerRecord) bool { return len(got)+len(more) >= 6 })...)
	if o := offsetsOf(got, 0); !slices.Equal(o, seq(0, 3)) {
		t.Errorf("t-0 offsets after rejoin %v", o)
	}
}

func countJoins(hbs []groups.HeartbeatRequest) int {
	n := 0
	for _, hb := range hbs {
		if hb.MemberEpoch == groups.JoinEpoch {
			n++
		}
	}
	return n
}

func TestConsumerLosesPartitionsWhenSessionExpiresLocally(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.coord.SetInitial(tps(0)...)
	cfg := fc.config()
	cfg.SessionTimeout = 600 * time.Millisecond
	var ev events
	ev.hook(&cfg)
	c := startConsumer(t, cfg)
	pollUntil(t, c, "assignment", func([]ConsumerRecord) bool { a, _, _ := ev.counts(); return a > 0 })

	start := time.Now()
	fc.coord.FailHeartbeats(protocol.NotCoordinator)
	pollUntil(t, c, "loss", func([]ConsumerRecord) bool { _, _, l := ev.counts(); return l > 0 })
	if el := time.Since(start); el < 400*time.Millisecond || el > 3*time.Second {
		t.Errorf("lost after %v with a 600ms session", el)
	}
	if c.MemberID() != "" || len(c.Assignment()) != 0 {
		t.Errorf("member %q assignment %v after the loss", c.MemberID(), c.Assignment())
	}
	if err := c.Commit(context.Background()); err != nil {
		t.Errorf("Commit with nothing owned: %v", err)
	}
	fc.coord.FailHeartbeats(protocol.None)
	pollUntil(t, c, "rejoin", func([]ConsumerRecord) bool { a, _, _ := ev.counts(); return a >= 2 })
}

func TestConsumerResetsOutOfRangeCommit(t *testing.T) {
	for _, tc := range []struct {
		reset string
		want  []int64
	}{
		{OffsetResetEarliest, seq(2, 12)}, // the log starts at 2
		{OffsetResetLatest, seq(10, 12)},  // only what is appended after
	} {
		t.Run(tc.reset, func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			fc.append(0, 10)
			fc.storage.SetLogStart("t", 0, 2)
			fc.coord.SetInitial(tps(0)...)
			fc.coord.SetCommitted(tps(0)[0], 100, "")
			cfg := fc.config()
			cfg.AutoOffsetReset = tc.reset
			c := startConsumer(t, cfg)
			got := pollUntil(t, c, "the reset", func([]ConsumerRecord) bool { p, ok := c.Position(tps(0)[0]); return ok && p < 100 })
			fc.append(0, 2)
			got = append(got, pollUntil(t, c, "records", func(more []ConsumerRecord) bool { return len(got)+len(more) >= len(tc.want) })...)
			if o := offsetsOf(got, 0); !slices.Equal(o, tc.want) {
				t.Errorf("offsets %v, want %v", o, tc.want)
			}
		})
	}
}

func TestConsumerSeekAndMaxPollRecords(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.append(0, 10)
	fc.coord.SetInitial(tps(0)...)
	cfg := fc.config()
	cfg.MaxPollRecords = 3
	c := startConsumer(t, cfg)
	got := pollN(t, c, 10)
	for i := range got {
		if got[i].Offset != int64(i) {
			t.Fatalf("offsets %v", offsetsOf(got, 0))
		}
	}
	if err := c.Seek(tps(0)[0], 2); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Position(tps(0)[0]); p != 2 {
		t.Errorf("position after Seek %d", p)
	}
	recs := pollN(t, c, 1)
	if len(recs) > 3 || recs[0].Offset != 2 {
		t.Errorf("after Seek(2): %v", offsetsOf(recs, 0))
	}
	if err := c.Seek(groups.TP{Topic: "t", Partition: 7}, 0); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Seek of a partition not owned: %v", err)
	}
}

func TestConsumerAutoCommitsWhilePollWaits(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.append(0, 5)
	fc.coord.SetInitial(tps(0)...)
	cfg := fc.config()
	cfg.AutoCommitInterval = 50 * time.Millisecond
	c := startConsumer(t, cfg)
	pollN(t, c, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll with nothing to read: %v", err)
	}
	if cm, _ := fc.coord.Committed(tps(0)[0]); cm.Offset != 5 {
		t.Errorf("auto-committed offset %d, want 5", cm.Offset)
	}
}

func TestConsumerCommitReportsUnknownMember(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.append(0, 1)
	fc.coord.SetInitial(tps(0)...)
	c := startConsumer(t, fc.config())
	pollN(t, c, 1)
	fc.coord.Remove("m1")
	err := c.Commit(context.Background())
	if protocol.CodeOf(err) != protocol.UnknownMemberID {
		t.Errorf("Commit by a removed member: %v", err)
	}
}

func TestConsumerCloseInterruptsPoll(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := startConsumer(t, fc.config())
	done := make(chan error, 1)
	go func() {
		_, err := c.Poll(context.Background())
		done <- err
	}()
	// Poll holds pollMu for its whole run, so Close comes while it runs.
	testkit.WaitFor(t, 10*time.Second, "Poll to run", func() bool {
		if c.pollMu.TryLock() {
			c.pollMu.Unlock()
			return false
		}
		return true
	})
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrConsumerClosed) {
		t.Errorf("interrupted Poll: %v", err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConsumerHandOffContinuesFromTheRevokedPosition(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.append(0, 5)
	fc.append(1, 5)
	fc.coord.SetInitial(tps(0, 1)...)
	var evA events
	cfgA := fc.config()
	evA.hook(&cfgA)
	a := startConsumer(t, cfgA)
	pollN(t, a, 10)
	testkit.WaitFor(t, 10*time.Second, "m1 to report its partitions", func() bool { o, _ := fc.coord.OwnedBy("m1"); return len(o) == 2 })

	fc.coord.SetInitial()
	b := startConsumer(t, fc.config())
	testkit.WaitFor(t, 10*time.Second, "m2 to join", func() bool { return b.MemberID() == "m2" })

	// The coordinator moves t-1: revoke from m1, wait for the release, then
	// assign to m2 (what a KIP-848 coordinator does).
	fc.coord.SetAssignment("m1", tps(0)...)
	pollUntil(t, a, "revocation", func([]ConsumerRecord) bool { _, r, _ := evA.counts(); return r > 0 })
	testkit.WaitFor(t, 10*time.Second, "m1 to release t-1", func() bool { o, _ := fc.coord.OwnedBy("m1"); return slices.Equal(o, tps(0)) })
	fc.coord.SetAssignment("m2", tps(1)...)
	fc.append(1, 3)
	got := pollN(t, b, 3)
	if o := offsetsOf(got, 1); !slices.Equal(o, seq(5, 8)) {
		t.Errorf("m2 read t-1 offsets %v, want 5..7 (from m1's commit on revocation)", o)
	}
	if o := offsetsOf(got, 0); len(o) != 0 {
		t.Errorf("m2 read t-0, which it does not own: %v", o)
	}
}

func TestConsumerPollReportsARefusedJoin(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.append(0, 2)
	fc.coord.SetInitial(tps(0)...)
	fc.coord.FailHeartbeats(protocol.InvalidRequest)
	c := startConsumer(t, fc.config())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for err == nil || errors.Is(err, context.DeadlineExceeded) {
		_, err = c.Poll(ctx)
	}
	if protocol.CodeOf(err) != protocol.InvalidRequest || !strings.Contains(err.Error(), "join consumer group g") {
		t.Fatalf("Poll while the join is refused: %v", err)
	}
	// The consumer keeps trying: once the coordinator accepts, Poll works.
	fc.coord.FailHeartbeats(protocol.None)
	var got []ConsumerRecord
	testkit.Eventually(t, 10*time.Second, func() error {
		recs, err := c.Poll(ctx)
		got = append(got, recs...)
		if len(got) < 2 {
			return fmt.Errorf("after the refusal ended: %d records, last Poll: %v", len(got), err)
		}
		return nil
	})
	if len(got) != 2 {
		t.Errorf("after the refusal ended: %d records", len(got))
	}
}

// TestCommittedOffsetOfAnEarlierTopicIsIgnored: a committed offset that names
// another incarnation of the topic (deleted and created again since) is an
// offset of another log: the consumer starts that partition per its auto
// offset reset, takes offsets of the current incarnation (or naming none),
// and names the incarnation in what it commits.
func TestCommittedOffsetOfAnEarlierTopicIsIgnored(t *testing.T) {
	fc := newFakeCluster(t, 3)
	for p := int32(0); p < 3; p++ {
		fc.append(p, 10)
	}
	fc.coord.SetInitial(tps(0, 1, 2)...)
	fc.coord.SetCommitted(tps(0)[0], 7, "t-incarnation-1")
	fc.coord.SetCommitted(tps(1)[0], 4, fakeTopicID)
	fc.coord.SetCommitted(tps(2)[0], 6, "")
	c := startConsumer(t, fc.config())
	got := pollN(t, c, 10+6+4)
	for p, from := range []int64{0, 4, 6} {
		if o := offsetsOf(got, int32(p)); !slices.Equal(o, seq(from, 10)) {
			t.Errorf("partition %d offsets %v, want %d..9", p, o, from)
		}
	}
	if err := c.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if cm, _ := fc.coord.Committed(tps(p)[0]); cm.TopicID != fakeTopicID {
			t.Errorf("t-%d committed for topic incarnation %q, want %q", p, cm.TopicID, fakeTopicID)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
