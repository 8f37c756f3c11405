// Package coordinator runs the offsets service's coordinators on the Raft
// leader: it decides what to propose, proposes it through group commit
// (groupcommit.Batcher: requests that arrive while an entry is in flight go
// together into the next), and answers from the FSM's results. It owns no
// replicated state: everything that must survive a leader change is in the
// fsm package's commands.
//
// Consumer groups (coordinator.go, reconcile.go, classic*.go): one
// membership change at a time per group (lockGroup); KIP-848 members
// reconcile towards a target assignment, a partition reaching its new owner
// only once the old owner revoked it; classic groups' joins and syncs are
// rebalances held on the leader (a new leader restarts them). A member not
// heard from within its session timeout is removed.
//
// Transactions (txn.go): Txns serializes each transactional id's requests
// (one lock per id), proposes each state change of the fsm's Txn, and
// completes a transaction after its Prepare entry: its markers are written
// to every partition's leader (in batches per storage node), then the
// Complete entry; a completion handed to the producer's next request is
// written by that request's entry and by no one else (Txns.handed). A
// check loop aborts transactions past their timeout and finishes
// completions a leader change interrupted.
//
// Share groups (share.go, share_homes.go, deadletter.go): Shares proposes
// acquisitions and acknowledgements (the FSM decides what may be taken),
// visits each member's own partitions first (homes: a hint of order, never
// a grant), and writes archived records to a group's dead-letter topic.
//
// Txns and Shares reach the group coordinator through plane alone: the Raft
// group, the FSM's reads, the partition counts, the clock and the log.
package coordinator
