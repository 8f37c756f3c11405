// Package txncoord is the offsets service's transaction coordinator
// (Kafka's KIP-98 with KIP-890's transaction version 2; package libs/txns
// states the contract). It lives beside the group coordinator on the
// offsets Raft group's leader and reaches it through coordinator.Plane
// alone: a transaction's offsets become its groups' committed offsets in
// the same Raft entry that completes its commit, and its state is
// replicated as the groups' is. It owns no replicated state: everything
// that must survive a leader change is the fsm package's Txn (fsm/txn.go).
//
// A transactional id's state moves Empty -> Ongoing -> PrepareCommit or
// PrepareAbort -> CompleteCommit or CompleteAbort, then Ongoing again for
// the session's next transaction (Empty for a new session). Coordinator
// serializes each id's requests (one lock per id) and proposes each state
// change; after the Prepare entry it completes the transaction: its markers are written to every partition's
// leader (acks=all, in batches per storage node), then the Complete entry.
// A check loop (Start) aborts transactions past their timeout and finishes
// completions a leader change interrupted.
//
// # Invariants
//
//   - Every state change is one compare-and-set Raft entry (fsm.PutTxn, on
//     the Version it was computed from), computed under the id's lock: the
//     state is replaced whole, never merged.
//   - The decision to commit or abort is durable once the Prepare entry is
//     applied, and only after every partition's marker is written does the
//     Complete entry land. A new leader completes every transaction it
//     finds in a Prepare state, so one that reached PrepareCommit is
//     committed whatever fails, and one that did not is aborted (by its
//     timeout, or by its producer's next session).
//   - A transaction's offsets reach their groups in the entry that
//     completes its commit, atomically with it, and never after an abort.
//   - A completion handed to the producer's next request is written by
//     that request's entry and by no one else (Coordinator.handed): the
//     check loop does not write its markers again, as a marker written
//     after the next transaction's records would end them.
//   - A session's requests are fenced by producer id and epoch. A new
//     session, an abort the coordinator decides and every version 2 End
//     raise the epoch, and the markers carry the raised one; at the
//     largest epoch the session moves on to a new producer id, so the
//     markers still carry an epoch above every write of the transaction.
package txncoord
