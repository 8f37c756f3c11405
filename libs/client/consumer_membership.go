package client

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// This file holds the membership rules as pure code: no goroutines, no I/O,
// the clock passed in. The group goroutine (consumer_group.go) drives a
// membership with heartbeat outcomes; the Poll goroutine (consumer_poll.go)
// reconciles owned partitions with diffTPs.

// Heartbeat pacing.
const (
	// minHeartbeatTimeout and maxHeartbeatTimeout bound one heartbeat
	// request, a third of the session timeout otherwise, so a few attempts
	// (on other replicas) fit into a session.
	minHeartbeatTimeout = time.Second
	maxHeartbeatTimeout = 10 * time.Second
	// minRetryBackoff doubles per consecutive failure up to maxRetryBackoff.
	minRetryBackoff = 100 * time.Millisecond
	maxRetryBackoff = 2 * time.Second
)

// heartbeatVerdict classifies a heartbeat's outcome.
type heartbeatVerdict int

const (
	// hbAccepted: the coordinator answered.
	hbAccepted heartbeatVerdict = iota
	// hbRetry: a transient failure (network, NOT_COORDINATOR, a timeout, an
	// unexpected answer); try again after a backoff.
	hbRetry
	// hbFenced: UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH; the member is out
	// of the group and must drop its partitions without committing.
	hbFenced
)

// classifyHeartbeat returns the verdict on a heartbeat that returned err.
func classifyHeartbeat(err error) heartbeatVerdict {
	switch protocol.CodeOf(err) {
	case protocol.None:
		return hbAccepted
	case protocol.UnknownMemberID, protocol.FencedMemberEpoch:
		return hbFenced
	default:
		return hbRetry
	}
}

// joinRefused reports whether a failed join names a problem of the
// consumer's configuration or rights, which retrying will not fix.
func joinRefused(err error) bool {
	switch protocol.CodeOf(err) {
	case protocol.InvalidRequest, protocol.InvalidTopic, protocol.InvalidGroupID,
		protocol.TopicAuthorizationFailed, protocol.GroupAuthorizationFailed, protocol.ClusterAuthorizationFailed,
		protocol.SaslAuthenticationFailed:
		return true
	}
	return false
}

// membership is the group goroutine's view of the consumer's membership.
type membership struct {
	session time.Duration // the configured session timeout

	memberID string      // "" until the coordinator answers a join
	joinID   string      // the id this member made up for its join in progress
	epoch    int32       // the last epoch the coordinator answered
	target   []groups.TP // the last assignment answered, sorted
	interval time.Duration
	lastOK   time.Time // when the last answered heartbeat was sent (zero before)
	failures int       // consecutive failed heartbeats

	// rebalance is the rebalance timeout; revokingSince is when the
	// heartbeat that first asked to revoke a partition still owned was sent
	// (zero when nothing is pending).
	rebalance     time.Duration
	revokingSince time.Time
}

func newMembership(session, rebalance time.Duration) *membership {
	return &membership{session: session, rebalance: rebalance, interval: defaultHeartbeatInterval(session)}
}

// noteRevocation starts the member's own rebalance clock when a heartbeat
// sent at sentAt left out a partition it still owns, and stops it once
// nothing owned is outside the target.
func (m *membership) noteRevocation(owned []groups.TP, sentAt time.Time) {
	pending := m.joined() && len(diffTPs(groups.SortTPs(slices.Clone(owned)), m.target)) > 0
	switch {
	case !pending:
		m.revokingSince = time.Time{}
	case m.revokingSince.IsZero():
		m.revokingSince = sentAt
	}
}

// revocationDeadline is when the member gives up partitions it did not
// release in time: the rebalance timeout after the revocation was asked,
// less one heartbeat interval, so it stops before the coordinator (which
// started its clock later, on receipt) hands them to another member.
func (m *membership) revocationDeadline() time.Time {
	return m.revokingSince.Add(max(m.rebalance-m.interval, m.rebalance/2))
}

// revocationOverdue reports whether that deadline passed.
func (m *membership) revocationOverdue(now time.Time) bool {
	return !m.revokingSince.IsZero() && !now.Before(m.revocationDeadline())
}

// defaultHeartbeatInterval is used until the coordinator names one: a third
// of the session timeout, as Kafka's defaults (3s of 10s).
func defaultHeartbeatInterval(session time.Duration) time.Duration { return session / 3 }

// joined reports whether the coordinator has given the consumer a member id.
func (m *membership) joined() bool { return m.memberID != "" }

// request builds the next heartbeat from base (subscription, assignor,
// timeouts, client id) and the partitions owned now.
func (m *membership) request(base groups.HeartbeatRequest, owned []groups.TP) groups.HeartbeatRequest {
	base.MemberID, base.MemberEpoch = m.memberID, m.epoch
	if !m.joined() {
		// One id per join, kept across retries, so a join whose answer was
		// lost is not counted twice by the coordinator.
		if m.joinID == "" {
			m.joinID = groups.NewMemberID(base.ClientID)
		}
		base.MemberID, base.MemberEpoch = m.joinID, groups.JoinEpoch
	}
	base.Owned = groups.Group(groups.SortTPs(slices.Clone(owned)))
	return base
}

// accept applies the answer to a heartbeat sent at sentAt and reports
// whether the target assignment changed. The coordinator's interval is
// believed up to half the session timeout, so a slow interval cannot expire
// the session by itself.
func (m *membership) accept(resp *groups.HeartbeatResponse, sentAt time.Time) (targetChanged bool) {
	m.memberID, m.epoch = resp.MemberID, resp.MemberEpoch
	m.lastOK, m.failures = sentAt, 0
	m.interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
	if m.interval <= 0 {
		m.interval = defaultHeartbeatInterval(m.session)
	}
	m.interval = min(m.interval, m.session/2)
	target := groups.Flatten(resp.Assignment)
	changed := !slices.Equal(target, m.target)
	m.target = target
	return changed
}

// failure is what a failed heartbeat means.
type failure struct {
	lost    bool          // the membership is lost: drop everything, rejoin
	reason  string        // why it is lost
	retryIn time.Duration // otherwise: wait this long before the next attempt
}

// fail applies a heartbeat that failed with err at now.
func (m *membership) fail(err error, now time.Time) failure {
	if classifyHeartbeat(err) == hbFenced {
		if m.joined() {
			return failure{lost: true, reason: protocol.CodeOf(err).String()}
		}
		// A join cannot be fenced; the coordinator is confused. Retry.
	}
	m.failures++
	if m.expired(now) {
		return failure{lost: true, reason: fmt.Sprintf("no heartbeat answered for the session timeout (%v)", m.session)}
	}
	return failure{retryIn: m.wait(now, retryBackoff(m.failures))}
}

// expired reports whether a joined member's session has certainly expired on
// the coordinator: no heartbeat sent within the last session timeout was
// answered. The coordinator started its timer when it received that
// heartbeat, after it was sent, so it expires the member no earlier.
func (m *membership) expired(now time.Time) bool {
	return m.joined() && !now.Before(m.lastOK.Add(m.session))
}

// deadline is when a heartbeat sent at now must give up: after the request
// timeout, and for a joined member no later than its session's expiry.
func (m *membership) deadline(now time.Time) time.Time {
	d := now.Add(heartbeatTimeout(m.session))
	if m.joined() {
		if exp := m.lastOK.Add(m.session); exp.Before(d) {
			d = exp
		}
	}
	return d
}

// wait bounds a pause of want so that a joined member wakes by its session's
// expiry.
func (m *membership) wait(now time.Time, want time.Duration) time.Duration {
	if m.joined() {
		want = min(want, m.lastOK.Add(m.session).Sub(now))
	}
	if !m.revokingSince.IsZero() {
		want = min(want, m.revocationDeadline().Sub(now))
	}
	return max(want, 0)
}

// reset forgets the membership after it was lost: the next heartbeat joins
// as a new member (epoch 0, no member id).
func (m *membership) reset() {
	*m = *newMembership(m.session, m.rebalance)
}

// heartbeatTimeout is one heartbeat request's timeout for a session timeout.
func heartbeatTimeout(session time.Duration) time.Duration {
	return min(max(session/3, minHeartbeatTimeout), maxHeartbeatTimeout)
}

// retryBackoff is the pause after the n-th consecutive failure (n >= 1).
func retryBackoff(n int) time.Duration {
	d := minRetryBackoff
	for i := 1; i < n && d < maxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, maxRetryBackoff)
}

// diffTPs returns the partitions of a that are not in b, sorted. The Poll
// goroutine revokes diffTPs(owned, target) and assigns diffTPs(target, owned).
func diffTPs(a, b []groups.TP) []groups.TP {
	in := make(map[groups.TP]bool, len(b))
	for _, p := range b {
		in[p] = true
	}
	var out []groups.TP
	for _, p := range a {
		if !in[p] {
			out = append(out, p)
		}
	}
	return groups.SortTPs(out)
}
