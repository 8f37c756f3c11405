package groups

import (
	"context"
	"net/http"
)

// Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), which every Kafka client speaks by default: the members
// rejoin for every rebalance, the coordinator picks one of them as the
// leader, and the leader computes the assignment and hands it to the
// coordinator, which gives each member its part. The offsets service runs it
// beside its own protocol (the package comment's); a group is of one
// protocol at a time (Listing.Protocol).
//
//	POST /v1/groups/{group}/classic/join       JoinGroup (waits for the rebalance)
//	POST /v1/groups/{group}/classic/sync       SyncGroup (waits for the leader)
//	POST /v1/groups/{group}/classic/heartbeat  Heartbeat
//	POST /v1/groups/{group}/classic/leave      LeaveGroup
//
// Commits of classic members name the member and carry the generation as
// their MemberEpoch; a commit of another generation is ILLEGAL_GENERATION.

// Group protocols, as Listing.Protocol and Description.Protocol name them.
const (
	// ProtocolConsumer: the coordinator assigns (KIP-848, the SDK).
	ProtocolConsumer = "consumer"
	// ProtocolClassic: Kafka's classic protocol, the leader member assigns.
	ProtocolClassic = "classic"
)

// Classic group states (Kafka's names, as ListGroups reports them).
const (
	StatePreparingRebalance  = "preparing_rebalance"
	StateCompletingRebalance = "completing_rebalance"
)

// ProtocolLabel names a group's protocol for people: "consumer" (KIP-848
// and the SDK; also for listings that name none), or "classic/" and the
// protocol type of a Kafka classic group.
func ProtocolLabel(protocol, protocolType string) string {
	switch {
	case protocol == ProtocolClassic && protocolType != "":
		return protocol + "/" + protocolType
	case protocol == "":
		return ProtocolConsumer
	}
	return protocol
}

// ProtocolTypeConsumer is the classic protocol type of Kafka consumers,
// whose member metadata and assignments the coordinator can read.
const ProtocolTypeConsumer = "consumer"

// Protocol is one protocol a classic member supports, in its order of
// preference.
type Protocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
	// Topics is the subscription in Metadata when the protocol type is
	// "consumer" (the relay decodes it), so the group's topics are known
	// for its lag and its access checks.
	Topics []string `json:"topics,omitempty"`
}

// JoinRequest is the body of POST .../classic/join.
type JoinRequest struct {
	// MemberID is "" on a member's first join.
	MemberID   string `json:"member_id,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id,omitempty"`
	ClientHost string `json:"client_host,omitempty"`
	// SessionTimeoutMs and RebalanceTimeoutMs are the member's.
	SessionTimeoutMs   int32      `json:"session_timeout_ms"`
	RebalanceTimeoutMs int32      `json:"rebalance_timeout_ms"`
	ProtocolType       string     `json:"protocol_type"`
	Protocols          []Protocol `json:"protocols"`
	// RequireKnownMemberID: a first join is answered MEMBER_ID_REQUIRED
	// with an id to join again with (JoinGroup v4+).
	RequireKnownMemberID bool `json:"require_known_member_id,omitempty"`
}

// JoinedMember is one member as the leader sees it in its JoinResponse.
type JoinedMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	Metadata   []byte `json:"metadata"`
}

// JoinResponse answers a join once the rebalance's join phase is over.
type JoinResponse struct {
	// ErrorCode is MEMBER_ID_REQUIRED (with MemberID set) or 0; other
	// errors are error answers.
	ErrorCode    int16  `json:"error_code,omitempty"`
	Generation   int32  `json:"generation"`
	ProtocolType string `json:"protocol_type"`
	ProtocolName string `json:"protocol_name"`
	Leader       string `json:"leader"`
	MemberID     string `json:"member_id"`
	// SkipAssignment: a static leader rejoined without a rebalance; it
	// must not compute a new assignment.
	SkipAssignment bool `json:"skip_assignment,omitempty"`
	// Members is every member with its metadata for the chosen protocol,
	// for the leader only.
	Members []JoinedMember `json:"members,omitempty"`
}

// MemberAssignment is one member's assignment in the leader's SyncRequest.
type MemberAssignment struct {
	MemberID   string `json:"member_id"`
	Assignment []byte `json:"assignment"`
	// Partitions is what Assignment assigns when the protocol type is
	// "consumer" (the relay decodes it): the coordinator checks that no
	// partition goes to two members and shows the assignment.
	Partitions []TopicPartitions `json:"partitions,omitempty"`
}

// SyncRequest is the body of POST .../classic/sync.
type SyncRequest struct {
	MemberID     string `json:"member_id"`
	InstanceID   string `json:"instance_id,omitempty"`
	Generation   int32  `json:"generation"`
	ProtocolType string `json:"protocol_type,omitempty"`
	ProtocolName string `json:"protocol_name,omitempty"`
	// Assignments come from the leader only.
	Assignments []MemberAssignment `json:"assignments,omitempty"`
}

// SyncResponse hands a member its assignment.
type SyncResponse struct {
	ProtocolType string `json:"protocol_type"`
	ProtocolName string `json:"protocol_name"`
	Assignment   []byte `json:"assignment"`
}

// ClassicHeartbeatRequest is the body of POST .../classic/heartbeat.
type ClassicHeartbeatRequest struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	Generation int32  `json:"generation"`
}

// LeavingMember names a member leaving: by id, or by instance id alone.
type LeavingMember struct {
	MemberID   string `json:"member_id,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// LeaveRequest is the body of POST .../classic/leave.
type LeaveRequest struct {
	Members []LeavingMember `json:"members"`
}

// LeftMember is one member's outcome in a LeaveResponse.
type LeftMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ErrorCode  int16  `json:"error_code,omitempty"`
}

// LeaveResponse answers a leave, member by member.
type LeaveResponse struct {
	Members []LeftMember `json:"members"`
}

func classicPath(group, op string) string { return groupPath(group) + "/classic/" + op }

// Join joins a classic group; it returns when the rebalance's join phase
// ends (or with MEMBER_ID_REQUIRED in ErrorCode at once).
func (c *Client) Join(ctx context.Context, group string, req JoinRequest) (*JoinResponse, error) {
	var out JoinResponse
	err := c.jc.Do(ctx, http.MethodPost, classicPath(group, "join"), req, &out)
	return &out, err
}

// Sync sends a member's SyncGroup (the leader's with the assignments); it
// returns the member's assignment once the leader sent it.
func (c *Client) Sync(ctx context.Context, group string, req SyncRequest) (*SyncResponse, error) {
	var out SyncResponse
	err := c.jc.Do(ctx, http.MethodPost, classicPath(group, "sync"), req, &out)
	return &out, err
}

// ClassicHeartbeat renews a classic member's session.
func (c *Client) ClassicHeartbeat(ctx context.Context, group string, req ClassicHeartbeatRequest) error {
	return c.jc.Do(ctx, http.MethodPost, classicPath(group, "heartbeat"), req, nil)
}

// Leave removes classic members.
func (c *Client) Leave(ctx context.Context, group string, req LeaveRequest) (*LeaveResponse, error) {
	var out LeaveResponse
	err := c.jc.Do(ctx, http.MethodPost, classicPath(group, "leave"), req, &out)
	return &out, err
}
