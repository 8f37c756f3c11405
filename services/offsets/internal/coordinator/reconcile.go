package coordinator

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/offsets/internal/assign"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// The rules of the group protocol as pure functions over a group's state
// (a clone the caller owns): what a heartbeat changes and answers, what
// removing a member changes. No clocks, no I/O: the Coordinator feeds them.

// Heartbeat applies one member heartbeat to g and returns the answer.
// partitions are the current partition counts of the cluster's topics; newID
// makes a member id for a join.
func Heartbeat(g *fsm.Group, req groups.HeartbeatRequest, partitions map[string]int32, newID func() string, s Settings) (*groups.HeartbeatResponse, error) {
	if err := adopt(g); err != nil {
		return nil, err
	}
	if len(req.InstanceID) > groups.MaxMemberIDLen {
		return nil, protocol.InvalidRequest.Err("instance id is longer than %d characters", groups.MaxMemberIDLen)
	}
	if req.MemberEpoch == groups.LeaveEpoch || req.MemberEpoch == groups.StaticLeaveEpoch {
		return leave(g, req, partitions)
	}
	m, retarget, err := heartbeatMember(g, req, newID)
	if err != nil {
		return nil, err
	}
	if req.TopicsUnchanged && req.MemberEpoch != groups.JoinEpoch {
		req.Topics = m.Topics
	}
	if err := resolveRegex(m, &req, partitions); err != nil {
		if req.MemberEpoch == groups.JoinEpoch && m.Epoch == 0 {
			delete(g.Members, m.ID)
		}
		return nil, err
	}
	if req.OwnedUnchanged {
		// No news of what the member released: it still holds all it held.
		req.Owned = groups.Group(groups.SortTPs(append(slices.Clone(m.Assigned), m.Revoking...)))
	}
	if err := updateMember(m, req, s); err != nil {
		if req.MemberEpoch == groups.JoinEpoch {
			delete(g.Members, m.ID)
		}
		return nil, err
	}
	if !slices.Equal(m.Topics, sortedTopics(req.Topics)) {
		m.Topics = sortedTopics(req.Topics)
		retarget = true
	}
	if req.MemberEpoch == m.Epoch {
		// The member has seen its latest assignment: believe its owned list.
		owned := groups.Flatten(req.Owned)
		m.Revoking = slices.DeleteFunc(m.Revoking, func(p groups.TP) bool { _, found := slices.BinarySearchFunc(owned, p, cmpTP); return !found })
		pruneGrants(m)
	}
	if retarget || partitionsChanged(g, partitions) {
		Retarget(g, partitions)
	}
	reconcile(g, m)
	if m.Epoch == 0 {
		m.Epoch = 1
	}
	return &groups.HeartbeatResponse{MemberID: m.ID, MemberEpoch: m.Epoch,
		HeartbeatIntervalMs: int32(s.HeartbeatInterval.Milliseconds()), Assignment: groups.Group(slices.Clone(m.Assigned))}, nil
}

// adopt makes g a group of the consumer protocol: an empty classic group
// becomes one; a classic group with members refuses its heartbeats.
func adopt(g *fsm.Group) error {
	if g.Classic() {
		if len(g.Members) > 0 {
			return protocol.GroupIDNotFound.Err("group %s is a classic group with %d members: members of Kafka's consumer protocol cannot join it", g.Name, len(g.Members))
		}
		*g = fsm.Group{Name: g.Name, Version: g.Version, Epoch: g.Epoch, EmptySinceMs: g.EmptySinceMs} // an empty classic group becomes ours
	}
	if g.Members == nil {
		g.Members = map[string]*fsm.Member{}
	}
	return nil
}

// heartbeatMember is the member a heartbeat (not a leave) is of: a new
// member for a join (retarget: the group's target assignment must change),
// a static member's new incarnation, the member itself for a join retried,
// or the current member, fenced when its epoch or instance id is not the
// coordinator's.
func heartbeatMember(g *fsm.Group, req groups.HeartbeatRequest, newID func() string) (m *fsm.Member, retarget bool, err error) {
	switch {
	case req.MemberEpoch == groups.JoinEpoch && req.MemberID != "" && g.Members[req.MemberID] != nil:
		// A retried join whose answer was lost: answer with the member's
		// current state rather than adding it twice.
		return g.Members[req.MemberID], false, nil
	case req.MemberEpoch == groups.JoinEpoch:
		id := req.MemberID
		if id == "" {
			id = newID()
		} else if err := groups.ValidateMemberID(id); err != nil {
			return nil, false, protocol.InvalidRequest.Err("%v", err)
		}
		if old := staticMember(g, req.InstanceID); old != nil {
			if !old.Away {
				return nil, false, protocol.UnreleasedInstanceID.Err("instance id %q of group %s belongs to member %s, which has not left", req.InstanceID, g.Name, old.ID)
			}
			return takeOver(g, old, id), false, nil
		}
		m = &fsm.Member{ID: id, InstanceID: req.InstanceID}
		g.Members[m.ID] = m
		return m, true, nil
	case req.MemberEpoch < 0:
		return nil, false, protocol.InvalidRequest.Err("member epoch %d is not valid", req.MemberEpoch)
	}
	if m = g.Members[req.MemberID]; m == nil {
		if s := staticMember(g, req.InstanceID); s != nil {
			return nil, false, protocol.FencedInstanceID.Err("instance id %q of group %s now belongs to member %s; member %s is fenced", req.InstanceID, g.Name, s.ID, req.MemberID)
		}
		return nil, false, protocol.UnknownMemberID.Err("member %q is not in group %s (it left or its session expired); join again", req.MemberID, g.Name)
	}
	switch {
	case req.InstanceID != "" && m.InstanceID != req.InstanceID:
		// A heartbeat may leave the instance id out (Kafka's null: as
		// before); one that names another is fenced.
		return nil, false, protocol.FencedInstanceID.Err("member %s of group %s has instance id %q, not %q", m.ID, g.Name, m.InstanceID, req.InstanceID)
	case m.Away:
		return nil, false, protocol.FencedMemberEpoch.Err("static member %s left the group; join again", m.ID)
	case req.MemberEpoch > m.Epoch:
		return nil, false, protocol.FencedMemberEpoch.Err("member %s sent epoch %d; the coordinator gave it %d; join again", m.ID, req.MemberEpoch, m.Epoch)
	}
	return m, false, nil
}

// leave handles a member's leave: for good (LeaveEpoch, or a member
// without an instance id), or, for a static member's StaticLeaveEpoch,
// away with what it holds until its session expires or its instance joins
// again. Leaving twice, or after expiry, is answered the same.
func leave(g *fsm.Group, req groups.HeartbeatRequest, partitions map[string]int32) (*groups.HeartbeatResponse, error) {
	resp := &groups.HeartbeatResponse{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, Assignment: []groups.TopicPartitions{}}
	m := g.Members[req.MemberID]
	if m == nil {
		if s := staticMember(g, req.InstanceID); s != nil {
			return nil, protocol.FencedInstanceID.Err("instance id %q of group %s now belongs to member %s; member %s is fenced", req.InstanceID, g.Name, s.ID, req.MemberID)
		}
		return resp, nil
	}
	if req.InstanceID != "" && m.InstanceID != req.InstanceID {
		return nil, protocol.FencedInstanceID.Err("member %s of group %s has instance id %q, not %q", m.ID, g.Name, m.InstanceID, req.InstanceID)
	}
	// Kafka asks the temporary leave to name the instance id; franz-go
	// leaves it out, so the member's own is used.
	if req.MemberEpoch == groups.StaticLeaveEpoch && m.InstanceID != "" {
		m.Away = true
		return resp, nil
	}
	RemoveMember(g, m.ID, partitions)
	return resp, nil
}

// staticMember returns the member of g with instance id id (none for "").
func staticMember(g *fsm.Group, id string) *fsm.Member {
	if id == "" {
		return nil
	}
	for _, m := range g.Members {
		if m.InstanceID == id {
			return m
		}
	}
	return nil
}

// takeOver replaces a static member that is away with a new member of the
// same instance id: the new one holds what the old held, with the target
// the old one had, so the group's assignment does not change. The new
// member's epoch is above the old one's and every partition is granted at
// it, so commits of the old member cannot land as the new one's.
func takeOver(g *fsm.Group, old *fsm.Member, id string) *fsm.Member {
	m := *old
	m.ID, m.Away, m.Epoch = id, false, old.Epoch+1
	m.GrantedAt = map[string]int32{}
	for _, p := range append(slices.Clone(m.Assigned), m.Revoking...) {
		m.GrantedAt[partkey.String(p)] = m.Epoch
	}
	delete(g.Members, old.ID)
	g.Members[id] = &m
	return &m
}

// resolveRegex applies the request's change of the member's
// regular-expression subscription and, while it has one, makes the
// request's topics every topic it matches now that the principal may read
// (none is allowed: the member waits for one).
func resolveRegex(m *fsm.Member, req *groups.HeartbeatRequest, partitions map[string]int32) error {
	pattern := m.TopicRegex
	if req.TopicRegex != nil {
		pattern = *req.TopicRegex
	}
	if pattern == "" {
		m.TopicRegex = ""
		return nil
	}
	re, err := groups.CompileTopicRegex(pattern)
	if err != nil {
		return protocol.InvalidRegularExpression.Err("%v", err)
	}
	m.TopicRegex = pattern
	req.Topics = req.Topics[:0:0]
	for t := range partitions {
		if re.MatchString(t) && (req.Readable == nil || req.Readable(t)) {
			req.Topics = append(req.Topics, t)
		}
	}
	return nil
}

// updateMember validates and copies the request's member settings.
func updateMember(m *fsm.Member, req groups.HeartbeatRequest, s Settings) error {
	if len(req.Topics) == 0 && m.TopicRegex == "" {
		return protocol.InvalidRequest.Err("a member must subscribe to at least one topic")
	}
	for _, t := range req.Topics {
		if err := cluster.ValidateTopicName(t); err != nil {
			return protocol.InvalidTopic.Err("%v", err)
		}
	}
	if _, err := assign.Get(req.Assignor); err != nil {
		return protocol.InvalidRequest.Err("%v", err)
	}
	switch req.Isolation {
	case "", groups.ReadUncommitted, groups.ReadCommitted:
	default:
		return protocol.InvalidRequest.Err("isolation %q is not %s or %s", req.Isolation, groups.ReadUncommitted, groups.ReadCommitted)
	}
	session := s.SessionTimeout
	if req.SessionTimeoutMs > 0 {
		session = time.Duration(req.SessionTimeoutMs) * time.Millisecond
	}
	if session < s.MinSessionTimeout || session > s.MaxSessionTimeout {
		return protocol.InvalidRequest.Err("session timeout %v is outside [%v, %v]", session, s.MinSessionTimeout, s.MaxSessionTimeout)
	}
	rebalance := s.RebalanceTimeout
	if req.RebalanceTimeoutMs > 0 {
		rebalance = time.Duration(req.RebalanceTimeoutMs) * time.Millisecond
	}
	m.ClientID, m.Assignor, m.Isolation = req.ClientID, req.Assignor, req.Isolation
	m.SessionTimeoutMs, m.RebalanceTimeoutMs = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
	return nil
}

// RemoveMember drops a member (left, expired or fenced): what it held is free
// at once, and the target is recomputed for the others.
func RemoveMember(g *fsm.Group, id string, partitions map[string]int32) {
	delete(g.Members, id)
	Retarget(g, partitions)
}

// Retarget starts a new group epoch: the group's assignor computes a new
// target from the members' subscriptions and the partition counts, keeping
// the previous target where it can (sticky).
func Retarget(g *fsm.Group, partitions map[string]int32) {
	g.Epoch++
	g.Partitions = subscribedCounts(g, partitions)
	g.Assignor = chooseAssignor(g)
	if len(g.Members) == 0 {
		return
	}
	in := assign.Input{Partitions: g.Partitions, Previous: map[string][]groups.TP{}}
	for _, m := range g.SortedMembers() {
		in.Members = append(in.Members, assign.Member{ID: m.ID, Topics: m.Topics})
		in.Previous[m.ID] = m.Target
	}
	a, _ := assign.Get(g.Assignor) // chooseAssignor returns valid names only
	target := a.Assign(in)
	for id, m := range g.Members {
		m.Target = target[id]
	}
}

// reconcile moves m's assignment toward its target: partitions no longer in
// the target are revoked; target partitions nobody holds are granted. The
// member epoch grows when its assignment changed.
func reconcile(g *fsm.Group, m *fsm.Member) {
	held := map[groups.TP]string{}
	for id, o := range g.Members {
		for _, p := range o.Assigned {
			held[p] = id
		}
		for _, p := range o.Revoking {
			held[p] = id
		}
	}
	changed := false
	kept := m.Assigned[:0]
	for _, p := range m.Assigned {
		if slices.Contains(m.Target, p) {
			kept = append(kept, p)
		} else {
			m.Revoking = append(m.Revoking, p)
			changed = true
		}
	}
	m.Assigned = kept
	var granted []groups.TP
	for _, p := range m.Target {
		if _, taken := held[p]; !taken {
			m.Assigned = append(m.Assigned, p)
			granted = append(granted, p)
			changed = true
		}
	}
	if changed {
		m.Assigned = groups.SortTPs(m.Assigned)
		m.Revoking = groups.SortTPs(m.Revoking)
		m.Epoch++
	}
	if m.GrantedAt == nil && len(granted) > 0 {
		m.GrantedAt = map[string]int32{}
	}
	for _, p := range granted {
		m.GrantedAt[partkey.String(p)] = max(m.Epoch, 1) // a join's first epoch is 1
	}
	pruneGrants(m)
}

// pruneGrants forgets the grant epochs of partitions the member no longer holds.
func pruneGrants(m *fsm.Member) {
	for k := range m.GrantedAt {
		found := false
		for _, p := range m.Assigned {
			found = found || partkey.String(p) == k
		}
		for _, p := range m.Revoking {
			found = found || partkey.String(p) == k
		}
		if !found {
			delete(m.GrantedAt, k)
		}
	}
}

// partitionsChanged reports whether a subscribed topic's partition count
// differs from the one the target was computed from.
func partitionsChanged(g *fsm.Group, partitions map[string]int32) bool {
	now := subscribedCounts(g, partitions)
	if len(now) != len(g.Partitions) {
		return true
	}
	for t, n := range now {
		if g.Partitions[t] != n {
			return true
		}
	}
	return false
}

// subscribedCounts returns the partition counts of the topics some member
// subscribes to and the cluster knows.
func subscribedCounts(g *fsm.Group, partitions map[string]int32) map[string]int32 {
	out := map[string]int32{}
	for _, m := range g.Members {
		for _, t := range m.Topics {
			if n, ok := partitions[t]; ok {
				out[t] = n
			}
		}
	}
	return out
}

// chooseAssignor picks the assignor most members name (members naming none
// count for the default); a tie keeps the default, or else goes to the name
// first in order.
func chooseAssignor(g *fsm.Group) string {
	votes := map[string]int{}
	for _, m := range g.Members {
		name := m.Assignor
		if name == "" {
			name = groups.DefaultAssignor
		}
		votes[name]++
	}
	best := groups.DefaultAssignor
	for _, name := range assign.Names() {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func sortedTopics(ts []string) []string {
	out := slices.Clone(ts)
	slices.Sort(out)
	return slices.Compact(out)
}

func cmpTP(a, b groups.TP) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}
