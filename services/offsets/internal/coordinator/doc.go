// Package coordinator runs the offsets service's consumer groups on the
// Raft leader: it decides what to propose, proposes it through group commit
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
// # Invariants
//
//   - A group's membership state (fsm.Group) is replaced whole, one
//     compare-and-set Raft entry (fsm.PutGroup, on the Version the change
//     was computed from) per change, computed under the group's lock, so
//     two leaders' coordinators never interleave their changes; a change
//     computed from a stale read is refused (a heartbeat reads again once).
//   - A partition has at most one owner: it is assigned to a member only
//     once its previous owner no longer holds it (revoked, or removed). A
//     member that does not release revoked partitions within its
//     rebalance timeout is removed.
//   - A commit is fenced (fsm.CheckCommit, here before proposing and again
//     by the FSM in log order): by a current member at an epoch the
//     coordinator gave it and for partitions it holds, or without a member
//     only while the group has none; a classic member by its generation.
//   - Resetting and deleting a group need it empty (classic members of a
//     rebalance not yet written count, busyClassic); deleting a topic's
//     offsets needs the topic unread by its members.
//   - Session and rebalance clocks are the leader's memory only: they
//     restart when a replica becomes leader, so every member gets a full
//     session timeout to find the new leader. Nothing is proposed until a
//     barrier showed the FSM applied everything committed (Ready).
//
// # The plane it offers
//
// The transaction coordinator (package txncoord) and the share-group
// coordinator (package sharecoord) run beside it on the same leader and
// reach it through Plane alone (plane.go): the offsets Raft group
// (Ready, Propose, ProposeResult), the FSM's reads, the partition counts of
// the cluster's topics, the clock and the log. Their proposals go through
// the same group commit, so EntryCounts counts the entries of all three.
package coordinator
