// Package controller is the part of the metadata service that acts on the
// cluster rather than answering requests. It is active only on the Raft
// leader: it starts when this member gains leadership (after a Barrier, so it
// sees every committed change) and drops all its in-memory state when
// leadership is lost.
//
// Today it owns storage node liveness:
//   - sessions live only in the leader's memory: a heartbeat renews one and
//     never goes through Raft; registrations and liveness changes do;
//   - a new leader gives every registered node a full session timeout to send
//     it a heartbeat before expiring it, so a leader change fences no one;
//   - a node whose session lapses is marked dead (SetNodeAlive false, proposed
//     with the node's epoch so it cannot undo a newer registration); a node
//     that heartbeats this leader with its current epoch, or registers again,
//     is alive again;
//   - a heartbeat with another epoch than the registered one is fenced
//     (ErrFencedEpoch): the node must register again and gets a new epoch.
//
// After every session check it reconciles partitions with liveness (a simple
// first version of failover; see elect for the rule): dead nodes leave ISRs,
// partitions led by a dead node get a new leader from the ISR (clean election;
// unclean only when the topic sets unclean.leader.election=true), bumping the
// leader epoch, and offline partitions get a leader when an ISR member
// returns. Each change is an UpdatePartition carrying the epochs it was based
// on, so it cannot overwrite a concurrent ISR change.
//
// It also proposes the cluster id once, when a leader finds none.
//
// Decisions are taken from the FSM's state and the session table with the
// controller's clock; the commands carry the outcome, so Apply stays
// deterministic.
package controller
