package groups

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"unicode/utf16"
)

// The groups' change log as Kafka's __consumer_offsets topic shows it: the
// offsets service gives every committed offset and every written group
// state a position, the entry's Raft index shifted left by
// OffsetsLogIndexShift plus its place in the entry, so positions grow with
// the log and are the same on every replica. A group's records belong to
// partition OffsetsLogPartition(group) of OffsetsLogPartitions. Only each
// key's latest record is kept, as in a compacted topic: a commit replaces
// the one before it, and a deletion leaves nothing behind.
const (
	OffsetsLogTopic      = "__consumer_offsets"
	OffsetsLogPartitions = 50 // Kafka's offsets.topic.num.partitions
	OffsetsLogIndexShift = 20 // records per entry: at most 1<<20
)

// OffsetsLogPartition is Kafka's partition of a group in __consumer_offsets:
// the absolute value of Java's String.hashCode of the name, modulo the
// partition count.
func OffsetsLogPartition(group string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(u)
	}
	switch {
	case h == math.MinInt32: // Kafka's Utils.abs makes it 0
		return 0
	case h < 0:
		h = -h
	}
	return h % OffsetsLogPartitions
}

// OffsetsLogRecord is one record of the log: a committed offset or a group's
// membership state.
type OffsetsLogRecord struct {
	Position int64  `json:"position"`
	Group    string `json:"group"`
	// Offset is a committed offset; nil for a group state.
	Offset *Committed `json:"offset,omitempty"`
	// State is the group's membership; nil for an offset.
	State *GroupState `json:"state,omitempty"`
}

// GroupState is a group's membership as the log shows it.
type GroupState struct {
	// Protocol is ProtocolClassic or "" (KIP-848's, the coordinator's own).
	Protocol     string             `json:"protocol,omitempty"`
	ProtocolType string             `json:"protocol_type,omitempty"`
	ProtocolName string             `json:"protocol_name,omitempty"`
	Assignor     string             `json:"assignor,omitempty"`
	Epoch        int32              `json:"epoch"`
	Leader       string             `json:"leader,omitempty"`
	Members      []GroupStateMember `json:"members"`
}

// GroupStateMember is one member in a GroupState.
type GroupStateMember struct {
	MemberID           string `json:"member_id"`
	InstanceID         string `json:"instance_id,omitempty"`
	ClientID           string `json:"client_id,omitempty"`
	ClientHost         string `json:"client_host,omitempty"`
	SessionTimeoutMs   int32  `json:"session_timeout_ms"`
	RebalanceTimeoutMs int32  `json:"rebalance_timeout_ms"`
	// Metadata and AssignmentBytes are a classic member's bytes; Topics and
	// Assignment what a member of the coordinator's own protocol reads.
	Metadata        []byte            `json:"metadata,omitempty"`
	AssignmentBytes []byte            `json:"assignment_bytes,omitempty"`
	Topics          []string          `json:"topics,omitempty"`
	Assignment      []TopicPartitions `json:"assignment,omitempty"`
}

// OffsetsLogPage is an answer of the log: records at or after the position
// asked, in position order, and the position the next record will have at
// least (the log's end, Kafka's high watermark).
type OffsetsLogPage struct {
	Records []OffsetsLogRecord `json:"records"`
	End     int64              `json:"end"`
}

// MaxOffsetsLogRecords bounds one page.
const MaxOffsetsLogRecords = 10000

// OffsetsLog reads partition partition of the log from position from, at
// most limit records (0: MaxOffsetsLogRecords).
func (c *Client) OffsetsLog(ctx context.Context, partition int32, from int64, limit int) (*OffsetsLogPage, error) {
	var out OffsetsLogPage
	path := "/v1/offsets-log/" + strconv.Itoa(int(partition)) + "?from=" + strconv.FormatInt(from, 10) + "&limit=" + strconv.Itoa(limit)
	err := c.jc.Do(ctx, http.MethodGet, path, nil, &out)
	return &out, err
}
