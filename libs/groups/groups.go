// Package groups is the contract of the offsets service: consumer groups,
// their members' heartbeats and assignments, and committed offsets. It holds
// the JSON wire types of the offsets HTTP API and its Client.
//
// The group protocol follows Kafka's KIP-848 (server-side assignment):
//
//   - A member joins by heartbeating with MemberEpoch 0 and a MemberID it
//     made up for this join (NewMemberID); the coordinator answers with its
//     epoch and assignment. A retried join with the same id (its answer was
//     lost) is answered with that member's current state instead of adding
//     a second member. A join without an id gets one from the coordinator.
//   - Every heartbeat carries the member's subscription and the partitions it
//     owns right now; every answer carries the full assignment the member
//     should own now. A partition missing from the answer that the member
//     owns must be revoked: the member stops reading it, commits its position
//     and heartbeats again at once without it. A partition moves to another
//     member only after its old owner reported it released, or the old owner's
//     session expired, or it failed to revoke within the rebalance timeout.
//   - The member epoch grows each time the coordinator changes the member's
//     assignment. An owned list is believed only in a heartbeat carrying the
//     current epoch (the member has seen its latest assignment), so a delayed
//     old heartbeat cannot release a partition the member is still reading.
//   - Heartbeating with MemberEpoch -1 leaves the group; the member's
//     partitions are free at once (it must have committed first).
//   - UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH means the member is out: it
//     must drop every partition without committing and join again.
//
// Commits name the member and its epoch and are accepted only for partitions
// the member holds (assigned or being revoked), so a zombie member — one whose
// session expired — cannot move the group's position (UNKNOWN_MEMBER_ID), nor
// can a member commit a partition it no longer owns (STALE_MEMBER_EPOCH). A
// commit without a member id is accepted only while the group has no members
// (tools and manually assigned consumers).
package groups

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Assignor names.
const (
	AssignorRange      = "range"
	AssignorRoundRobin = "roundrobin"
	AssignorSticky     = "sticky"
	// DefaultAssignor is used when a member names none.
	DefaultAssignor = AssignorSticky
)

// Isolation levels a member reads at (HeartbeatRequest.Isolation), under
// Kafka's isolation.level names.
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// Member epochs with a special meaning in a heartbeat.
const (
	JoinEpoch  int32 = 0
	LeaveEpoch int32 = -1
	// StaticLeaveEpoch is a static member's temporary leave (Kafka's
	// KIP-848 -2): the member keeps its assignment, and nobody else gets
	// it, until its session times out or a member with the same instance
	// id joins and takes it over without a rebalance.
	StaticLeaveEpoch int32 = -2
)

// Group states reported by List and Describe.
const (
	// StateEmpty: no members (committed offsets may exist).
	StateEmpty = "empty"
	// StateReconciling: some member does not own its target assignment yet.
	StateReconciling = "reconciling"
	// StateStable: every member owns exactly its target assignment.
	StateStable = "stable"
)

// TopicPartitions names partitions of one topic.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// HeartbeatRequest is the body of POST /v1/groups/{group}/heartbeat.
type HeartbeatRequest struct {
	// MemberID names the member; on a join it is a fresh id the member
	// made up (or empty, and the coordinator makes one up).
	MemberID string `json:"member_id,omitempty"`
	// MemberEpoch is JoinEpoch to join, LeaveEpoch to leave, otherwise the
	// last epoch the coordinator answered.
	MemberEpoch int32  `json:"member_epoch"`
	ClientID    string `json:"client_id,omitempty"`
	// InstanceID makes the member static (Kafka's group.instance.id): a
	// member that joins with the instance id of one that left with
	// StaticLeaveEpoch takes over its assignment; one whose instance is
	// still in the group is refused (UNRELEASED_INSTANCE_ID).
	InstanceID string `json:"instance_id,omitempty"`
	// Topics is the subscription, sent in full on every heartbeat.
	Topics []string `json:"topics,omitempty"`
	// Assignor is the member's preferred assignor (range, roundrobin,
	// sticky); the group uses the one most members name.
	Assignor string `json:"assignor,omitempty"`
	// Isolation is what the member reads: read_uncommitted or
	// read_committed (its group's lag is then counted to the last stable
	// offset); "" when it does not say (Kafka clients).
	Isolation string `json:"isolation,omitempty"`
	// SessionTimeoutMs and RebalanceTimeoutMs apply to this member; 0 takes
	// the coordinator's defaults.
	SessionTimeoutMs   int32 `json:"session_timeout_ms,omitempty"`
	RebalanceTimeoutMs int32 `json:"rebalance_timeout_ms,omitempty"`
	// Owned is every partition the member owns now.
	Owned []TopicPartitions `json:"owned"`
	// TopicsUnchanged and OwnedUnchanged: the member's subscription, or
	// what it owns, is what it last sent, and Topics or Owned is left out
	// (Kafka's ConsumerGroupHeartbeat sends those fields only when they
	// changed).
	TopicsUnchanged bool `json:"topics_unchanged,omitempty"`
	OwnedUnchanged  bool `json:"owned_unchanged,omitempty"`
	// TopicRegex, when set, changes the member's regular-expression
	// subscription (KIP-848): a pattern (RE2 syntax, matched against whole
	// topic names) makes the subscription every topic it matches, found
	// again on each heartbeat, so topics created or deleted later join or
	// leave it; "" drops it for the topic names. Nil leaves it as it was.
	TopicRegex *string `json:"topic_regex,omitempty"`
	// Readable, set by the coordinator's API for a principal it checks
	// (never sent), keeps from a regular-expression subscription the topics
	// the principal may not consume, as Kafka resolves a regex with the
	// member's ACLs; nil keeps every match.
	Readable func(topic string) bool `json:"-"`
}

// MaxTopicRegexLen bounds a subscription's regular expression.
const MaxTopicRegexLen = 1024

// CompileTopicRegex compiles a subscription's regular expression, matched
// against whole topic names as Kafka's brokers match it.
func CompileTopicRegex(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > MaxTopicRegexLen {
		return nil, fmt.Errorf("a regular expression of %d bytes, at most %d", len(pattern), MaxTopicRegexLen)
	}
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	MemberID    string `json:"member_id"`
	MemberEpoch int32  `json:"member_epoch"`
	// HeartbeatIntervalMs is how often the member should heartbeat.
	HeartbeatIntervalMs int32 `json:"heartbeat_interval_ms"`
	// Assignment is the full set the member should own now.
	Assignment []TopicPartitions `json:"assignment"`
}

// Offset is one partition's position in a commit.
type Offset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the next offset to read (the last processed + 1).
	Offset   int64  `json:"offset"`
	Metadata string `json:"metadata,omitempty"`
	// TopicID is the incarnation of the topic the offset was read from
	// (cluster.Topic.ID): a topic deleted and created again under the same
	// name is another log, where an offset of the old one means nothing.
	// The SDK consumer names it; the offsets service fills it in from its
	// metadata when a client leaves it out.
	TopicID string `json:"topic_id,omitempty"`
	// LeaderEpoch is the partition leader epoch of the record before the
	// offset (Kafka's committed leader epoch, which a client checks with
	// OffsetForLeaderEpoch to detect a truncated log on resuming); nil
	// when unknown (Kafka's -1).
	LeaderEpoch *int32 `json:"leader_epoch,omitempty"`
}

// Epoch returns a leader epoch as Kafka carries it: -1 for nil.
func Epoch(e *int32) int32 {
	if e == nil {
		return -1
	}
	return *e
}

// EpochOf returns a Kafka leader epoch as kept: nil for a negative one.
func EpochOf(e int32) *int32 {
	if e < 0 {
		return nil
	}
	return &e
}

// CommitRequest is the body of POST /v1/groups/{group}/offsets. It is applied
// all or nothing.
type CommitRequest struct {
	MemberID    string   `json:"member_id,omitempty"`
	MemberEpoch int32    `json:"member_epoch,omitempty"`
	Offsets     []Offset `json:"offsets"`
}

// Committed is a committed offset as stored.
type Committed struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
	// CommitTimeMs is the commit's wall-clock time in Unix milliseconds.
	CommitTimeMs int64 `json:"commit_time_ms"`
	// TopicID is the topic incarnation the offset belongs to ("" for
	// offsets committed before incarnations were recorded). A reader of a
	// topic with another ID ignores it, as if nothing were committed.
	TopicID string `json:"topic_id,omitempty"`
	// LeaderEpoch is the committed leader epoch (Offset.LeaderEpoch); nil
	// when unknown, as for offsets committed before it was kept.
	LeaderEpoch *int32 `json:"leader_epoch,omitempty"`
	// Position is the commit's place in the groups' change log
	// (OffsetsLogRecord); 0 for commits written before it was kept.
	Position int64 `json:"position,omitempty"`
}

// Stale reports whether c belongs to another incarnation of its topic than
// the one whose ID is topicID ("" when unknown: nothing is stale then).
func (c Committed) Stale(topicID string) bool {
	return c.TopicID != "" && topicID != "" && c.TopicID != topicID
}

// OffsetsResponse answers GET /v1/groups/{group}/offsets.
type OffsetsResponse struct {
	Group   string      `json:"group"`
	Offsets []Committed `json:"offsets"`
	// Pending are the partitions for which an open transaction holds
	// offsets of the group (TxnOffsetCommit): a reader asking for stable
	// offsets (Kafka's require_stable) waits for them.
	Pending []TP `json:"pending,omitempty"`
}

// Listing is one group in GET /v1/groups.
type Listing struct {
	Group   string `json:"group"`
	State   string `json:"state"`
	Members int    `json:"members"`
	// Protocol is ProtocolConsumer or ProtocolClassic; ProtocolType is a
	// classic group's protocol type ("consumer", "connect", ...).
	Protocol     string `json:"protocol,omitempty"`
	ProtocolType string `json:"protocol_type,omitempty"`
}

// ListResponse answers GET /v1/groups.
type ListResponse struct {
	Groups []Listing `json:"groups"`
}

// MemberDescription describes one member.
type MemberDescription struct {
	MemberID    string            `json:"member_id"`
	ClientID    string            `json:"client_id,omitempty"`
	MemberEpoch int32             `json:"member_epoch"`
	Topics      []string          `json:"topics"`
	Assignment  []TopicPartitions `json:"assignment"`
	// Revoking lists partitions the member was asked to release and has not yet.
	Revoking []TopicPartitions `json:"revoking,omitempty"`
	// A classic member's instance id, host, metadata for the group's
	// protocol and assignment as its leader encoded them.
	InstanceID      string `json:"instance_id,omitempty"`
	ClientHost      string `json:"client_host,omitempty"`
	Metadata        []byte `json:"metadata,omitempty"`
	AssignmentBytes []byte `json:"assignment_bytes,omitempty"`
}

// PartitionLag describes one partition of a group.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Owner is the member holding the partition ("" when none).
	Owner string `json:"owner,omitempty"`
	// Committed is the committed offset, -1 when the group committed none.
	Committed int64 `json:"committed"`
	// LogStart and LogEnd are the partition's log start offset and high
	// watermark (-1 when the leader could not be asked; Error says why).
	LogStart int64 `json:"log_start"`
	LogEnd   int64 `json:"log_end"`
	// LastStable is the partition's last stable offset (below it no
	// transaction is open), -1 when unknown.
	LastStable int64 `json:"last_stable"`
	// Lag is the number of records the group has yet to read: LogEnd (for
	// a read_committed group, LastStable: it cannot read past it) minus
	// the committed offset, or minus LogStart when retention has deleted
	// records past the commit (they can no longer be read) or nothing was
	// committed. -1 when unknown.
	Lag   int64  `json:"lag"`
	Error string `json:"error,omitempty"`
}

// Description answers GET /v1/groups/{group}.
type Description struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	GroupEpoch int32  `json:"group_epoch"`
	Assignor   string `json:"assignor,omitempty"`
	// Protocol is ProtocolConsumer or ProtocolClassic; a classic group
	// has its protocol type and chosen protocol, and its generation in
	// GroupEpoch.
	Protocol     string              `json:"protocol,omitempty"`
	ProtocolType string              `json:"protocol_type,omitempty"`
	ProtocolName string              `json:"protocol_name,omitempty"`
	Members      []MemberDescription `json:"members"`
	// Isolation is read_committed when every member that says what it
	// reads says so (and one does): lags then count to the last stable
	// offsets. Otherwise read_uncommitted.
	Isolation  string         `json:"isolation"`
	Partitions []PartitionLag `json:"partitions"`
	// TotalLag sums the known lags.
	TotalLag int64 `json:"total_lag"`
}

// Reset targets.
const (
	ResetEarliest  = "earliest"
	ResetLatest    = "latest"
	ResetTimestamp = "timestamp"
	ResetOffset    = "offset"
)

// ResetRequest is the body of POST /v1/groups/{group}/reset-offsets. The group
// must have no members.
type ResetRequest struct {
	Topic string `json:"topic"`
	// Partitions to reset; empty means every partition of the topic.
	Partitions []int32 `json:"partitions,omitempty"`
	// To is earliest, latest, timestamp (the first offset whose record
	// timestamp is at or after TimestampMs; the end when none) or offset.
	To          string `json:"to"`
	TimestampMs int64  `json:"timestamp_ms,omitempty"`
	Offset      int64  `json:"offset,omitempty"`
	// DryRun computes the offsets without committing them.
	DryRun bool `json:"dry_run,omitempty"`
}

// DeleteOffsetsRequest is the body of POST /v1/groups/{group}/delete-offsets:
// the committed offsets of a topic's partitions (all when Partitions is
// empty) are removed, unless a member of the group reads the topic
// (GROUP_SUBSCRIBED_TO_TOPIC).
type DeleteOffsetsRequest struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions,omitempty"`
}

// ResetResponse lists the new offsets.
type ResetResponse struct {
	Offsets []Committed `json:"offsets"`
}

var groupIDPattern = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// MaxMemberIDLen bounds a member id.
const MaxMemberIDLen = 255

// ValidateMemberID checks a member id: 1 to 255 printable characters without
// spaces.
func ValidateMemberID(id string) error {
	if id == "" || len(id) > MaxMemberIDLen {
		return fmt.Errorf("member id %q must be 1 to %d characters", id, MaxMemberIDLen)
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("member id %q must not contain spaces or control characters", id)
		}
	}
	return nil
}

// NewMemberID returns a fresh member id: the client id (spaces and control
// characters replaced, at most 64 bytes), a dash and 16 random hex digits.
func NewMemberID(clientID string) string {
	var b strings.Builder
	for _, r := range clientID {
		if b.Len() >= 64 {
			break
		}
		if r <= ' ' || r == 0x7f {
			r = '_'
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		b.WriteString("member")
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return b.String() + "-" + hex.EncodeToString(rnd[:])
}

// MaxGroupIDLen bounds a group id.
const MaxGroupIDLen = 249

// ValidateGroupID checks a group id: 1 to 249 characters of [a-zA-Z0-9._-].
func ValidateGroupID(id string) error {
	if id == "" || len(id) > MaxGroupIDLen || !groupIDPattern.MatchString(id) {
		return fmt.Errorf("group id %q must be 1 to %d characters of [a-zA-Z0-9._-]", id, MaxGroupIDLen)
	}
	return nil
}

// TP is one topic partition.
type TP struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (p TP) String() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// Less orders by topic, then partition.
func (p TP) Less(q TP) bool {
	if p.Topic != q.Topic {
		return p.Topic < q.Topic
	}
	return p.Partition < q.Partition
}

// Flatten turns TopicPartitions into sorted, deduplicated TPs.
func Flatten(tps []TopicPartitions) []TP {
	var out []TP
	for _, t := range tps {
		for _, p := range t.Partitions {
			out = append(out, TP{t.Topic, p})
		}
	}
	return SortTPs(out)
}

// SortTPs sorts tps in place, drops duplicates and returns the result.
func SortTPs(tps []TP) []TP {
	sort.Slice(tps, func(i, j int) bool { return tps[i].Less(tps[j]) })
	out := tps[:0]
	for i, p := range tps {
		if i == 0 || p != tps[i-1] {
			out = append(out, p)
		}
	}
	return out
}

// Group turns sorted TPs into TopicPartitions, one entry per topic.
func Group(tps []TP) []TopicPartitions {
	out := []TopicPartitions{}
	for _, p := range tps {
		if n := len(out); n > 0 && out[n-1].Topic == p.Topic {
			out[n-1].Partitions = append(out[n-1].Partitions, p.Partition)
			continue
		}
		out = append(out, TopicPartitions{Topic: p.Topic, Partitions: []int32{p.Partition}})
	}
	return out
}
