package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

func tp(topic string, p int32) groups.TP { return groups.TP{Topic: topic, Partition: p} }

func TestClassifyHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want heartbeatVerdict
	}{
		{"answered", nil, hbAccepted},
		{"unknown member", protocol.UnknownMemberID.Err("gone"), hbFenced},
		{"fenced epoch", protocol.FencedMemberEpoch.Err("old"), hbFenced},
		{"wrapped fence", fmt.Errorf("heartbeat: %w", protocol.UnknownMemberID.Err("gone")), hbFenced},
		{"not coordinator", protocol.NotCoordinator.Err("elsewhere"), hbRetry},
		{"stale epoch", protocol.StaleMemberEpoch.Err(""), hbRetry},
		{"network", errors.New("connection refused"), hbRetry},
		{"deadline", context.DeadlineExceeded, hbRetry},
	} {
		if got := classifyHeartbeat(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMembershipRequest(t *testing.T) {
	base := groups.HeartbeatRequest{ClientID: "c", Topics: []string{"a", "b"}, Assignor: "range", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000}
	m := newMembership(10*time.Second, 30*time.Second)
	join := m.request(base, nil)
	if !strings.HasPrefix(join.MemberID, "c-") || join.MemberEpoch != groups.JoinEpoch || join.Owned == nil || len(join.Owned) != 0 {
		t.Errorf("join %+v, want a fresh id made from the client id", join)
	}
	if retry := m.request(base, nil); retry.MemberID != join.MemberID {
		t.Errorf("a retried join changed its id: %q then %q", join.MemberID, retry.MemberID)
	}
	m.reset()
	if next := m.request(base, nil); next.MemberID == join.MemberID {
		t.Errorf("a join after a reset reused the id %q", next.MemberID)
	}
	if join.ClientID != "c" || join.Assignor != "range" || join.SessionTimeoutMs != 10000 || !slices.Equal(join.Topics, []string{"a", "b"}) {
		t.Errorf("join lost the subscription: %+v", join)
	}
	m.memberID, m.epoch = "m", 7
	owned := []groups.TP{tp("b", 1), tp("a", 2), tp("a", 0), tp("a", 2)}
	hb := m.request(base, owned)
	want := []groups.TopicPartitions{{Topic: "a", Partitions: []int32{0, 2}}, {Topic: "b", Partitions: []int32{1}}}
	if hb.MemberID != "m" || hb.MemberEpoch != 7 || fmt.Sprint(hb.Owned) != fmt.Sprint(want) {
		t.Errorf("heartbeat %+v, want owned %v", hb, want)
	}
	if owned[0] != tp("b", 1) {
		t.Error("request sorted the caller's slice")
	}
}

func TestMembershipAccept(t *testing.T) {
	session := 2 * time.Second
	sent := time.Unix(1000, 0)
	for _, tc := range []struct {
		name         string
		before       []groups.TP
		assignment   []groups.TopicPartitions
		intervalMs   int32
		wantChanged  bool
		wantTarget   []groups.TP
		wantInterval time.Duration
	}{
		{"first assignment", nil, []groups.TopicPartitions{{Topic: "t", Partitions: []int32{1, 0}}}, 500, true, []groups.TP{tp("t", 0), tp("t", 1)}, 500 * time.Millisecond},
		{"same assignment", []groups.TP{tp("t", 0)}, []groups.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}, 500, false, []groups.TP{tp("t", 0)}, 500 * time.Millisecond},
		{"shrunk", []groups.TP{tp("t", 0), tp("t", 1)}, []groups.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}, 500, true, []groups.TP{tp("t", 0)}, 500 * time.Millisecond},
		{"emptied", []groups.TP{tp("t", 0)}, nil, 500, true, nil, 500 * time.Millisecond},
		{"no interval named", nil, nil, 0, false, nil, session / 3},
		{"interval longer than half the session", nil, nil, 5000, false, nil, session / 2},
	} {
		m := newMembership(session, 30*time.Second)
		m.target, m.failures = tc.before, 3
		changed := m.accept(&groups.HeartbeatResponse{MemberID: "m1", MemberEpoch: 4, HeartbeatIntervalMs: tc.intervalMs, Assignment: tc.assignment}, sent)
		if changed != tc.wantChanged || !slices.Equal(m.target, tc.wantTarget) || m.interval != tc.wantInterval {
			t.Errorf("%s: changed %v target %v interval %v; want %v %v %v", tc.name, changed, m.target, m.interval, tc.wantChanged, tc.wantTarget, tc.wantInterval)
		}
		if m.memberID != "m1" || m.epoch != 4 || !m.lastOK.Equal(sent) || m.failures != 0 || !m.joined() {
			t.Errorf("%s: state %+v", tc.name, m)
		}
	}
}

func TestMembershipFail(t *testing.T) {
	session := time.Second
	lastOK := time.Unix(1000, 0)
	network := errors.New("connection refused")
	for _, tc := range []struct {
		name      string
		joined    bool
		failures  int
		err       error
		at        time.Duration // after lastOK
		wantLost  bool
		wantRetry time.Duration
	}{
		{"fenced member", true, 0, protocol.FencedMemberEpoch.Err(""), 10 * time.Millisecond, true, 0},
		{"unknown member", true, 0, protocol.UnknownMemberID.Err(""), 10 * time.Millisecond, true, 0},
		{"fenced join is retried", false, 0, protocol.UnknownMemberID.Err(""), 10 * time.Millisecond, false, minRetryBackoff},
		{"first network failure", true, 0, network, 100 * time.Millisecond, false, minRetryBackoff},
		{"third failure backs off more", true, 2, network, 100 * time.Millisecond, false, 4 * minRetryBackoff},
		{"backoff bounded by the session's expiry", true, 5, network, 900 * time.Millisecond, false, 100 * time.Millisecond},
		{"session expired", true, 0, network, session, true, 0},
		{"not coordinator past the session", true, 0, protocol.NotCoordinator.Err(""), 2 * session, true, 0},
		{"joining never expires", false, 0, network, time.Hour, false, minRetryBackoff},
	} {
		m := newMembership(session, 30*time.Second)
		if tc.joined {
			m.memberID, m.epoch, m.lastOK = "m1", 3, lastOK
		}
		m.failures = tc.failures
		f := m.fail(tc.err, lastOK.Add(tc.at))
		if f.lost != tc.wantLost || (!f.lost && f.retryIn != tc.wantRetry) {
			t.Errorf("%s: %+v, want lost %v retry in %v", tc.name, f, tc.wantLost, tc.wantRetry)
		}
		if f.lost && f.reason == "" {
			t.Errorf("%s: lost without a reason", tc.name)
		}
	}
}

func TestMembershipSessionClock(t *testing.T) {
	session := 3 * time.Second
	lastOK := time.Unix(1000, 0)
	m := newMembership(session, 30*time.Second)
	if m.expired(lastOK.Add(time.Hour)) {
		t.Error("a member that never joined expired")
	}
	if d := m.deadline(lastOK); !d.Equal(lastOK.Add(heartbeatTimeout(session))) {
		t.Errorf("join deadline %v", d.Sub(lastOK))
	}
	m.memberID, m.lastOK = "m1", lastOK
	for _, tc := range []struct {
		at           time.Duration
		wantExpired  bool
		wantDeadline time.Duration // after at
		wantWait     time.Duration // of a wanted 2s pause
	}{
		{0, false, heartbeatTimeout(session), 2 * time.Second},
		{2500 * time.Millisecond, false, 500 * time.Millisecond, 500 * time.Millisecond},
		{session - time.Millisecond, false, time.Millisecond, time.Millisecond},
		{session, true, 0, 0},
		{session + time.Second, true, -time.Second, 0},
	} {
		now := lastOK.Add(tc.at)
		if got := m.expired(now); got != tc.wantExpired {
			t.Errorf("at %v: expired %v", tc.at, got)
		}
		if got := m.deadline(now).Sub(now); got != tc.wantDeadline {
			t.Errorf("at %v: deadline in %v, want %v", tc.at, got, tc.wantDeadline)
		}
		if got := m.wait(now, 2*time.Second); got != tc.wantWait {
			t.Errorf("at %v: wait %v, want %v", tc.at, got, tc.wantWait)
		}
	}
	m.epoch, m.target, m.failures = 9, []groups.TP{tp("t", 0)}, 4
	m.reset()
	if m.joined() || m.epoch != 0 || m.target != nil || m.failures != 0 || m.session != session || m.interval != session/3 {
		t.Errorf("after reset %+v", m)
	}
}

func TestRetryBackoffAndHeartbeatTimeout(t *testing.T) {
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000}
	for i, w := range want {
		if got := retryBackoff(i + 1); got != w*time.Millisecond {
			t.Errorf("backoff after %d failures: %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := retryBackoff(1000); got != maxRetryBackoff {
		t.Errorf("backoff after many failures: %v", got)
	}
	for _, tc := range []struct{ session, want time.Duration }{
		{600 * time.Millisecond, minHeartbeatTimeout},
		{9 * time.Second, 3 * time.Second},
		{time.Minute, maxHeartbeatTimeout},
	} {
		if got := heartbeatTimeout(tc.session); got != tc.want {
			t.Errorf("heartbeat timeout for a %v session: %v, want %v", tc.session, got, tc.want)
		}
	}
}

func TestReconcileDiff(t *testing.T) {
	a0, a1, a2, b0 := tp("a", 0), tp("a", 1), tp("a", 2), tp("b", 0)
	for _, tc := range []struct {
		name                   string
		owned, target          []groups.TP
		wantRevoke, wantAssign []groups.TP
	}{
		{"first assignment", nil, []groups.TP{a1, a0}, nil, []groups.TP{a0, a1}},
		{"steady", []groups.TP{a0, a1}, []groups.TP{a1, a0}, nil, nil},
		{"one moves away", []groups.TP{a0, a1}, []groups.TP{a0}, []groups.TP{a1}, nil},
		{"swap", []groups.TP{a0, a1}, []groups.TP{a0, a2}, []groups.TP{a1}, []groups.TP{a2}},
		{"everything revoked", []groups.TP{b0, a0}, nil, []groups.TP{a0, b0}, nil},
		{"subscription grew", []groups.TP{a0}, []groups.TP{a0, b0}, nil, []groups.TP{b0}},
	} {
		revoke, assign := diffTPs(tc.owned, tc.target), diffTPs(tc.target, tc.owned)
		if !slices.Equal(revoke, tc.wantRevoke) || !slices.Equal(assign, tc.wantAssign) {
			t.Errorf("%s: revoke %v assign %v, want %v %v", tc.name, revoke, assign, tc.wantRevoke, tc.wantAssign)
		}
	}
}

func TestJoinRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{protocol.InvalidRequest.Err("session timeout 1ms is outside [1s, 5m]"), true},
		{protocol.InvalidTopic.Err(""), true},
		{fmt.Errorf("wrapped: %w", protocol.InvalidGroupID.Err("")), true},
		{protocol.TopicAuthorizationFailed.Err("principal \"alice\" may not: consume on topic audit"), true},
		{protocol.GroupAuthorizationFailed.Err(""), true},
		{protocol.NotCoordinator.Err(""), false},
		{protocol.UnknownServerError.Err(""), false},
		{errors.New("connection refused"), false},
	} {
		if got := joinRefused(tc.err); got != tc.want {
			t.Errorf("%v: %v", tc.err, got)
		}
	}
}

func TestRevocationOverdue(t *testing.T) {
	m := newMembership(time.Minute, 30*time.Second) // a session longer than the test's clock

	t0 := time.Unix(1000, 0)
	a, b := groups.TP{Topic: "t", Partition: 0}, groups.TP{Topic: "t", Partition: 1}
	m.accept(&groups.HeartbeatResponse{MemberID: "m", MemberEpoch: 2, HeartbeatIntervalMs: 500,
		Assignment: groups.Group([]groups.TP{a})}, t0)
	m.noteRevocation([]groups.TP{a, b}, t0) // b is asked back while still owned
	if m.revocationOverdue(t0.Add(29 * time.Second)) {
		t.Fatal("overdue before the rebalance timeout less one heartbeat interval")
	}
	if !m.revocationOverdue(t0.Add(29*time.Second + 500*time.Millisecond)) {
		t.Fatal("not overdue at the rebalance timeout less one heartbeat interval")
	}
	if w := m.wait(t0.Add(29*time.Second), time.Hour); w != 500*time.Millisecond {
		t.Fatalf("wait = %v, want to wake at the revocation deadline", w)
	}
	// A later heartbeat does not move the clock while b is still owned...
	m.noteRevocation([]groups.TP{a, b}, t0.Add(10*time.Second))
	if !m.revocationOverdue(t0.Add(29*time.Second + 500*time.Millisecond)) {
		t.Fatal("the clock restarted on a later heartbeat")
	}
	// ...and releasing b stops it.
	m.noteRevocation([]groups.TP{a}, t0.Add(11*time.Second))
	if m.revocationOverdue(t0.Add(time.Hour)) {
		t.Fatal("overdue after the release")
	}
}
