package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// CommandType names a command in the log. The strings are stored in the Raft
// log: never rename one.
type CommandType string

// The commands.
const (
	TypePutGroup      CommandType = "put_group"
	TypeCommit        CommandType = "commit"
	TypeReset         CommandType = "reset"
	TypeDeleteGroup   CommandType = "delete_group"
	TypeDeleteOffsets CommandType = "delete_offsets"
	TypePutTxn        CommandType = "put_txn"
	TypeShare         CommandType = "share"
	// TypeBatch is group commit: several commands in one entry, applied in
	// order, each with its own answer (Result.Batch). A batch never holds
	// another batch.
	TypeBatch CommandType = "batch"
)

// Command is one entry of the offsets log, encoded as JSON: a type and exactly
// one matching body.
type Command struct {
	Type          CommandType       `json:"type"`
	PutGroup      *PutGroup         `json:"put_group,omitempty"`
	Commit        *Commit           `json:"commit,omitempty"`
	Reset         *Reset            `json:"reset,omitempty"`
	DeleteGroup   *DeleteGroup      `json:"delete_group,omitempty"`
	DeleteOffsets *DeleteOffsets    `json:"delete_offsets,omitempty"`
	PutTxn        *PutTxn           `json:"put_txn,omitempty"`
	Share         *sharefsm.Command `json:"share,omitempty"`
	// Batch holds the encoded commands of a TypeBatch entry.
	Batch []json.RawMessage `json:"batch,omitempty"`
}

// DeleteOffsets removes a group's committed offsets of one topic's
// partitions (all when Partitions is empty), unless a member reads the
// topic.
type DeleteOffsets struct {
	Group      string  `json:"group"`
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions,omitempty"`
}

// PutGroup replaces a group's membership state when its current version is
// ExpectVersion (0: the group has no membership state yet).
type PutGroup struct {
	ExpectVersion uint64 `json:"expect_version"`
	Group         *Group `json:"group"`
}

// Commit stores offsets of a group, fenced by member (see package groups): all
// or nothing.
type Commit struct {
	Group       string          `json:"group"`
	MemberID    string          `json:"member_id,omitempty"`
	MemberEpoch int32           `json:"member_epoch,omitempty"`
	Offsets     []groups.Offset `json:"offsets"`
	// TimeMs is the commit time, chosen by the proposer.
	TimeMs int64 `json:"time_ms"`
}

// Reset overwrites offsets of a group that has no members.
type Reset struct {
	Group   string          `json:"group"`
	Offsets []groups.Offset `json:"offsets"`
	TimeMs  int64           `json:"time_ms"`
}

// DeleteGroup deletes a group without members, with its offsets. With
// IdleBeforeMs set it is the expiry of an idle group: it applies only while
// the group's last activity (FSM.IdleSince) is before IdleBeforeMs, so a commit
// or a member that arrived after the coordinator decided keeps the group.
type DeleteGroup struct {
	Group        string `json:"group"`
	IdleBeforeMs int64  `json:"idle_before_ms,omitempty"`
}

// Encode returns the command's log bytes.
func (c Command) Encode() ([]byte, error) { return json.Marshal(c) }

// DecodeCommand parses log bytes, checking that the body matches the type.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("offsets command: %w", err)
	}
	ok := false
	switch c.Type {
	case TypePutGroup:
		ok = c.PutGroup != nil && c.PutGroup.Group != nil
	case TypeCommit:
		ok = c.Commit != nil
	case TypeReset:
		ok = c.Reset != nil
	case TypeDeleteGroup:
		ok = c.DeleteGroup != nil
	case TypeDeleteOffsets:
		ok = c.DeleteOffsets != nil
	case TypePutTxn:
		ok = c.PutTxn != nil && c.PutTxn.Txn != nil
	case TypeShare:
		ok = c.Share != nil
	case TypeBatch:
		ok = len(c.Batch) > 0
	default:
		return c, fmt.Errorf("offsets command: unknown type %q", c.Type)
	}
	if !ok {
		return c, fmt.Errorf("offsets command %q: missing body", c.Type)
	}
	return c, nil
}

// EncodeBatch returns the log bytes of one entry holding the encoded
// commands cmds, in order: the command itself when there is one.
func EncodeBatch(cmds [][]byte) ([]byte, error) {
	if len(cmds) == 1 {
		return cmds[0], nil
	}
	raw := make([]json.RawMessage, len(cmds))
	for i, c := range cmds {
		raw[i] = c
	}
	return json.Marshal(Command{Type: TypeBatch, Batch: raw})
}

// Result is what applying a command returns through raft.
type Result struct {
	// Index is the entry's Raft index.
	Index uint64
	// Err is the FSM's rejection (a *protocol.Error), nil when applied.
	Err error
	// Share is a share operation's answer.
	Share *sharefsm.Result
	// Batch is a TypeBatch entry's answers, one per command in order.
	Batch []*Result
}
