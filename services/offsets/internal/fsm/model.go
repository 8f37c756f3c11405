package fsm

import (
	"slices"

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
	// assignment is recomputed then. A classic group's is its generation.
	Epoch int32 `json:"epoch"`
	// Protocol is groups.ProtocolClassic for a group of Kafka's classic
	// protocol ("" for the coordinator's own). A classic group's state is
	// written at the end of each rebalance: its members with their
	// metadata and assignments, its protocol type, chosen protocol and
	// leader.
	Protocol     string `json:"protocol,omitempty"`
	ProtocolType string `json:"protocol_type,omitempty"`
	ProtocolName string `json:"protocol_name,omitempty"`
	Leader       string `json:"leader,omitempty"`
	Assignor     string `json:"assignor,omitempty"`
	// Partitions are the partition counts the target was computed from.
	Partitions map[string]int32   `json:"partitions,omitempty"`
	Members    map[string]*Member `json:"members,omitempty"`
	// EmptySinceMs is when the group last lost its last member (Unix
	// milliseconds, chosen by the proposer; 0 while it has members, and in
	// states written before it was recorded). An empty group's offsets
	// expire a retention period after its last activity (FSM.IdleSince).
	EmptySinceMs int64 `json:"empty_since_ms,omitempty"`
	// Position is this state's place in the groups' change log
	// (groups.OffsetsLogRecord); 0 for states written before it was kept.
	Position int64 `json:"position,omitempty"`
}

// Member is one member of a group.
type Member struct {
	ID       string `json:"id"`
	ClientID string `json:"client_id,omitempty"`
	// Epoch grows each time the coordinator changes Assigned or Revoking.
	Epoch  int32    `json:"epoch"`
	Topics []string `json:"topics"`
	// TopicRegex is the member's regular-expression subscription (KIP-848):
	// Topics is then what it matched at the member's last heartbeat.
	TopicRegex string `json:"topic_regex,omitempty"`
	Assignor   string `json:"assignor,omitempty"`
	// Isolation is what the member said it reads (groups.HeartbeatRequest).
	Isolation          string `json:"isolation,omitempty"`
	SessionTimeoutMs   int32  `json:"session_timeout_ms"`
	RebalanceTimeoutMs int32  `json:"rebalance_timeout_ms"`
	// Target is the member's share of the group's target assignment.
	Target []groups.TP `json:"target,omitempty"`
	// Assigned is what the member was last told to own.
	Assigned []groups.TP `json:"assigned,omitempty"`
	// Revoking was taken from Assigned; the member still holds it until it
	// reports it released (or leaves, or is removed).
	Revoking []groups.TP `json:"revoking,omitempty"`
	// GrantedAt is, per held partition (partkey.String), the member epoch
	// at which it was last given to the member: commits for it must carry at
	// least that epoch, so a commit delayed from an earlier ownership cannot
	// land after the partition came back.
	GrantedAt map[string]int32 `json:"granted_at,omitempty"`
	// The member's instance id (static membership, in both protocols), a
	// classic member's host, metadata for the chosen protocol and
	// assignment bytes; Topics and Assigned hold what they name when the
	// protocol type is "consumer".
	InstanceID string `json:"instance_id,omitempty"`
	// Away: a static member that left with groups.StaticLeaveEpoch. It keeps
	// what it holds until its session expires or its instance id joins again.
	Away       bool   `json:"away,omitempty"`
	ClientHost string `json:"client_host,omitempty"`
	Metadata   []byte `json:"metadata,omitempty"`
	Assignment []byte `json:"assignment,omitempty"`
}

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

// Classic reports whether g is a group of Kafka's classic protocol.
func (g *Group) Classic() bool { return g != nil && g.Protocol == groups.ProtocolClassic }

// ProtocolName is g's protocol as groups.Listing names it.
func (g *Group) ProtocolLabel() string {
	if g.Classic() {
		return groups.ProtocolClassic
	}
	return groups.ProtocolConsumer
}

// State is the group's state name (groups.StateEmpty, ...) as written; the
// coordinator knows a classic group's rebalance states (Coordinator.State).
func (g *Group) State() string {
	if len(g.Members) == 0 {
		return groups.StateEmpty
	}
	if g.Classic() {
		return groups.StateStable
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
