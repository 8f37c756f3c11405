// Package txns is the contract of the offsets service's transaction
// coordinator (Kafka's KIP-98, with KIP-890's transaction version 2): the
// JSON wire types of its HTTP API and a Client. The frontends' Kafka
// listeners and the Go SDK's transactional producer use it.
//
// A transactional id names one logical producer across its sessions:
//
//   - Init starts a session: the first for an id gets a producer id at
//     epoch 0; each later one bumps the epoch, which fences the sessions
//     before it (their requests get PRODUCER_FENCED, their produce requests
//     INVALID_PRODUCER_EPOCH) and aborts a transaction one of them left
//     open. While a transaction of the id is being completed the answer is
//     CONCURRENT_TRANSACTIONS, which clients retry.
//   - A transaction begins with the first AddPartitions or AddGroup of the
//     session (or after the previous one completed); AddGroup names a
//     consumer group whose offsets CommitOffsets sends within it.
//   - End commits or aborts it. Once the answer is in, the decision is
//     durable; the coordinator then writes a marker to every partition of
//     the transaction and, for a commit, makes its offsets the groups'
//     committed offsets. Until that is done the id's next AddPartitions,
//     AddGroup or Init is answered CONCURRENT_TRANSACTIONS.
//   - With V2 (KIP-890's transaction version 2) every End bumps the
//     producer epoch: the answer carries the new one, the markers carry it
//     too, and a partition refuses the ended transaction's late writes.
//   - A transaction open longer than its timeout is aborted by the
//     coordinator, which bumps the epoch and so fences its producer.
package txns

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/sluicemq/sluice/libs/groups"
)

// MaxIDLen bounds a transactional id (bytes).
const MaxIDLen = 249

// ValidateID checks a transactional id: 1 to MaxIDLen bytes of UTF-8
// without control characters.
func ValidateID(id string) error {
	if id == "" || len(id) > MaxIDLen || !utf8.ValidString(id) {
		return fmt.Errorf("transactional id %q must be 1 to %d bytes of UTF-8", id, MaxIDLen)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("transactional id %q holds a control character", id)
		}
	}
	return nil
}

// InitRequest starts a producer session of a transactional id. ProducerID
// and ProducerEpoch are -1, or (KIP-360) the session's current ones when an
// existing producer asks for a new epoch after an error.
type InitRequest struct {
	TimeoutMs     int32 `json:"timeout_ms"`
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
}

// Producer is a producer id and epoch.
type Producer struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
}

// AddPartitionsRequest adds partitions to the session's transaction.
type AddPartitionsRequest struct {
	Producer
	Partitions []groups.TP `json:"partitions"`
	// VerifyOnly asks whether the partitions are in the open transaction
	// (KIP-890 part 1: a leader checks a transactional produce), changing
	// nothing: INVALID_TXN_STATE when one is not.
	VerifyOnly bool `json:"verify_only,omitempty"`
	// V2: the transaction runs under transaction version 2 (a partition
	// joins by its first produce).
	V2 bool `json:"v2,omitempty"`
}

// AddGroupRequest adds a consumer group to the session's transaction: its
// offsets will be committed by the transaction.
type AddGroupRequest struct {
	Producer
	Group string `json:"group"`
	V2    bool   `json:"v2,omitempty"`
}

// CommitOffsetsRequest sends a group's offsets within the transaction
// (Kafka's TxnOffsetCommit). With MemberID set the commit is fenced as the
// group's own commits are (KIP-447): GenerationID is the member's epoch or
// generation.
type CommitOffsetsRequest struct {
	Producer
	Group        string          `json:"group"`
	MemberID     string          `json:"member_id,omitempty"`
	GenerationID int32           `json:"generation_id,omitempty"`
	Offsets      []groups.Offset `json:"offsets"`
}

// EndRequest commits or aborts the session's transaction.
type EndRequest struct {
	Producer
	Commit bool `json:"commit"`
	V2     bool `json:"v2,omitempty"`
}

// Description is a transactional id's state (Kafka's DescribeTransactions).
type Description struct {
	ID         string      `json:"transactional_id"`
	State      string      `json:"state"`
	ProducerID int64       `json:"producer_id"`
	Epoch      int16       `json:"producer_epoch"`
	TimeoutMs  int32       `json:"timeout_ms"`
	StartMs    int64       `json:"start_ms"` // -1 when no transaction is open
	Partitions []groups.TP `json:"partitions"`
	Groups     []string    `json:"groups,omitempty"`
}

// ListResponse lists transactional ids.
type ListResponse struct {
	Transactions []Description `json:"transactions"`
}
