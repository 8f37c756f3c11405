package fsm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// bucketTxns holds the transaction coordinator's state: transactional id ->
// Txn (JSON).
var bucketTxns = []byte("txns")

// The states of a transaction (Kafka's TransactionState). A transaction
// reaches a Prepare state when its producer ended it (or the coordinator
// aborted it); the decision is then durable, and the coordinator writes its
// markers to every partition before the Complete state.
const (
	TxnEmpty          = "Empty"
	TxnOngoing        = "Ongoing"
	TxnPrepareCommit  = "PrepareCommit"
	TxnPrepareAbort   = "PrepareAbort"
	TxnCompleteCommit = "CompleteCommit"
	TxnCompleteAbort  = "CompleteAbort"
)

// Txn is a transactional id's state as replicated. The transaction
// coordinator computes new versions of it on the leader; the FSM stores them
// verbatim (compare-and-set on Version), as it does groups.
type Txn struct {
	ID string `json:"id"`
	// Version is the Raft index of the entry that wrote this state.
	Version    uint64 `json:"version"`
	ProducerID int64  `json:"producer_id"`
	// Epoch is the producer epoch of the current session; in a Prepare or
	// Complete state it is the epoch the markers carry.
	Epoch     int16  `json:"epoch"`
	TimeoutMs int32  `json:"timeout_ms"`
	State     string `json:"state"`
	// Partitions are those the transaction wrote to (or was told it would).
	Partitions []groups.TP `json:"partitions,omitempty"`
	// Groups are those whose offsets the transaction commits
	// (AddOffsetsToTxn), with the offsets sent so far (TxnOffsetCommit):
	// they become the groups' committed offsets when it commits.
	Groups  []string                   `json:"groups,omitempty"`
	Offsets map[string][]groups.Offset `json:"offsets,omitempty"`
	// StartMs is when the transaction began (Ongoing), UpdateMs when the
	// state last changed (Unix milliseconds, chosen by the proposer).
	StartMs  int64 `json:"start_ms,omitempty"`
	UpdateMs int64 `json:"update_ms"`
	// V2 marks a transaction of transaction version 2 (KIP-890): its end
	// bumps the epoch, and partitions join by their first produce.
	V2 bool `json:"v2,omitempty"`
	// NextProducerID, when set, is the producer id the session goes on
	// with, at epoch 0, once this transaction completes: its end raised the
	// epoch to the largest (the markers carry it), which spends the id
	// (KIP-890).
	NextProducerID int64 `json:"next_producer_id,omitempty"`
	// EndBumped: the epoch was last raised by the producer's own End
	// (version 2), not by a new session or a timeout abort. Only then is a
	// retried End carrying the epoch before answered again.
	EndBumped bool `json:"end_bumped,omitempty"`
}

// Session is the producer id and epoch the id's current session uses.
func (t *Txn) Session() (producerID int64, epoch int16) {
	if t.NextProducerID > 0 {
		return t.NextProducerID, 0
	}
	return t.ProducerID, t.Epoch
}

// Clone returns a deep copy.
func (t *Txn) Clone() *Txn {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	c.Groups = slices.Clone(t.Groups)
	if t.Offsets != nil {
		c.Offsets = make(map[string][]groups.Offset, len(t.Offsets))
		for g, offs := range t.Offsets {
			c.Offsets[g] = slices.Clone(offs)
		}
	}
	return &c
}

// Preparing reports whether the transaction's markers are being written.
func (t *Txn) Preparing() bool { return t.State == TxnPrepareCommit || t.State == TxnPrepareAbort }

// PutTxn replaces a transactional id's state when its current version is
// ExpectVersion (0: the id has no state yet). With Commit set (a
// transaction completing its commit) the transaction's pending offsets
// become its groups' committed offsets in the same entry.
type PutTxn struct {
	ExpectVersion uint64 `json:"expect_version"`
	Txn           *Txn   `json:"txn"`
	Commit        bool   `json:"commit,omitempty"`
}

// ValidateTxn checks what the FSM relies on in a transaction state.
func ValidateTxn(t *Txn) error {
	switch {
	case t.ID == "":
		return protocol.InvalidRequest.Err("a transaction state without a transactional id")
	case t.ProducerID < 0 || t.Epoch < 0:
		return protocol.InvalidRequest.Err("transaction %s: producer %d epoch %d", t.ID, t.ProducerID, t.Epoch)
	}
	switch t.State {
	case TxnEmpty, TxnOngoing, TxnPrepareCommit, TxnPrepareAbort, TxnCompleteCommit, TxnCompleteAbort:
	default:
		return protocol.InvalidRequest.Err("transaction %s: unknown state %q", t.ID, t.State)
	}
	for g, offs := range t.Offsets {
		if err := ValidateOffsets(g, offs); err != nil {
			return err
		}
	}
	return nil
}

// applyPutTxn is PutTxn's rule: validate, compare and set, and on a commit
// store the pending offsets.
func (f *FSM) applyPutTxn(tx *bolt.Tx, st *stage, index uint64, c *PutTxn) (error, error) {
	if err := ValidateTxn(c.Txn); err != nil {
		return err, nil
	}
	cur, ok := st.txns[c.Txn.ID]
	if !ok {
		cur = f.txns[c.Txn.ID]
	}
	var have uint64
	if cur != nil {
		have = cur.Version
	}
	if have != c.ExpectVersion {
		return protocol.ConcurrentTransactions.Err("transaction %s changed meanwhile (version %d, expected %d)", c.Txn.ID, have, c.ExpectVersion), nil
	}
	t := c.Txn.Clone()
	t.Version = index
	if c.Commit {
		for _, g := range slices.Sorted(maps.Keys(t.Offsets)) {
			if err := putOffsets(tx, st, index, g, t.Offsets[g], t.UpdateMs); err != nil {
				return nil, err
			}
		}
		t.Offsets = nil
	}
	v, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	st.txns[t.ID] = t
	return nil, tx.Bucket(bucketTxns).Put([]byte(t.ID), v)
}

// loadTxns reads every transactional id's state from the file.
func loadTxns(tx *bolt.Tx) (map[string]*Txn, error) {
	out := map[string]*Txn{}
	err := tx.Bucket(bucketTxns).ForEach(func(k, v []byte) error {
		var t Txn
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("transaction %q: corrupt state record: %w", k, err)
		}
		out[string(k)] = &t
		return nil
	})
	return out, err
}

// Txn returns a copy of a transactional id's state (kept in memory, as
// stored).
func (f *FSM) Txn(id string) (*Txn, bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.txns[id]
	if t == nil {
		return nil, false, nil
	}
	return t.Clone(), true, nil
}

// Txns returns a copy of every transactional id's state, ordered by id.
func (f *FSM) Txns() ([]*Txn, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Txn, 0, len(f.txns))
	for _, t := range f.txns {
		out = append(out, t.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// PendingTxnOffsets returns the partitions for which an open transaction
// (Ongoing or being completed) holds offsets of group, ordered.
func (f *FSM) PendingTxnOffsets(group string) ([]groups.TP, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []groups.TP
	for _, t := range f.txns {
		if t.State != TxnOngoing && !t.Preparing() {
			continue
		}
		for _, o := range t.Offsets[group] {
			tp := groups.TP{Topic: o.Topic, Partition: o.Partition}
			if !slices.Contains(out, tp) {
				out = append(out, tp)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out, nil
}
