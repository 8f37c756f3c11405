package fsm

import (
	"slices"
	"strconv"

	"github.com/sluicemq/sluice/libs/groups"
)

// Group is a consumer group's membership state as replicated. The coordinator
// computes new versions of it on the leader; the FSM stores them verbatim.
type Group struct {
	Name string `json:"name"`
	// Version is the Raft index of the entry that wrote this state; a put
	// names the version it replaces (compare-and-set).
	Version uint64 `json:"version"`
	// Epoch is the group epoch: it grows when membership, subscriptions or
	// the subscribed topics' partition counts change, and the target
	// assignment is recomputed then.
	Epoch    int32  `json:"epoch"`
	Assignor string `json:"assignor,omitempty"`
	// Partitions are the partition counts the target was computed from.
	Partitions map[string]int32   `json:"partitions,omitempty"`
	Members    map[string]*Member `json:"members,omitempty"`
	// EmptySinceMs is when the group last lost its last member (Unix
	// milliseconds, chosen by the proposer; 0 while it has members, and in
	// states written before it was recorded). An empty group's offsets
	// expire a retention period after its last activity (FSM.IdleSince).
	EmptySinceMs int64 `json:"empty_since_ms,omitempty"`
}

// Member is one member of a group.
type Member struct {
	ID       string `json:"id"`
	ClientID string `json:"client_id,omitempty"`
	// Epoch grows each time the coordinator changes Assigned or Revoking.
	Epoch              int32    `json:"epoch"`
	Topics             []string `json:"topics"`
	Assignor           string   `json:"assignor,omitempty"`
	SessionTimeoutMs   int32    `json:"session_timeout_ms"`
	RebalanceTimeoutMs int32    `json:"rebalance_timeout_ms"`
	// Target is the member's share of the group's target assignment.
	Target []groups.TP `json:"target,omitempty"`
	// Assigned is what the member was last told to own.
	Assigned []groups.TP `json:"assigned,omitempty"`
	// Revoking was taken from Assigned; the member still holds it until it
	// reports it released (or leaves, or is removed).
	Revoking []groups.TP `json:"revoking,omitempty"`
	// GrantedAt is, per held partition ("topic/partition"), the member epoch
	// at which it was last given to the member: commits for it must carry at
	// least that epoch, so a commit delayed from an earlier ownership cannot
	// land after the partition came back.
	GrantedAt map[string]int32 `json:"granted_at,omitempty"`
}

// GrantKey is a partition's key in Member.GrantedAt.
func GrantKey(p groups.TP) string { return p.Topic + "/" + strconv.Itoa(int(p.Partition)) }

// Holds reports whether m holds p: assigned to it or being revoked from it.
// No two members of a group hold the same partition.
func (m *Member) Holds(p groups.TP) bool {
	return slices.Contains(m.Assigned, p) || slices.Contains(m.Revoking, p)
}

// Clone returns a deep copy.
func (g *Group) Clone() *Group {
	c := *g
	c.Partitions = make(map[string]int32, len(g.Partitions))
	for k, v := range g.Partitions {
		c.Partitions[k] = v
	}
	c.Members = make(map[string]*Member, len(g.Members))
	for id, m := range g.Members {
		mc := *m
		mc.Topics = slices.Clone(m.Topics)
		mc.Target = slices.Clone(m.Target)
		mc.Assigned = slices.Clone(m.Assigned)
		mc.Revoking = slices.Clone(m.Revoking)
		if m.GrantedAt != nil {
			mc.GrantedAt = make(map[string]int32, len(m.GrantedAt))
			for k, v := range m.GrantedAt {
				mc.GrantedAt[k] = v
			}
		}
		c.Members[id] = &mc
	}
	return &c
}

// SortedMembers returns the members ordered by id.
func (g *Group) SortedMembers() []*Member {
	out := make([]*Member, 0, len(g.Members))
	for _, m := range g.Members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// State is the group's state name (groups.StateEmpty, ...).
func (g *Group) State() string {
	if len(g.Members) == 0 {
		return groups.StateEmpty
	}
	for _, m := range g.Members {
		if len(m.Revoking) > 0 || !slices.Equal(m.Assigned, m.Target) {
			return groups.StateReconciling
		}
	}
	return groups.StateStable
}

// Owner returns the id of the member holding p ("" when none).
func (g *Group) Owner(p groups.TP) string {
	for id, m := range g.Members {
		if m.Holds(p) {
			return id
		}
	}
	return ""
}
