// Package controller is the part of the metadata service that acts on the
// cluster rather than answering requests (Kafka KRaft's controller). It is
// active only on the Raft leader: it starts when this member gains leadership
// (after a Barrier, so it sees every committed change) and drops all its
// in-memory state when leadership is lost.
//
// Storage node liveness:
//   - sessions live only in the leader's memory: a heartbeat renews one and
//     never goes through Raft; registrations and fencing do;
//   - a new leader gives every alive node a full session timeout to send it a
//     heartbeat before expiring it, so a leader change fences no one;
//   - a node whose session lapses is fenced (FenceNode, proposed with the
//     node's epoch so it cannot undo a newer registration): marked dead and
//     its epoch bumped, so its next heartbeat, AlterPartition or shutdown
//     request fails with ErrFencedEpoch / STALE_BROKER_EPOCH and it must
//     register again. Only a registration brings a dead node back.
//
// Partitions (the pure rules are in election.go, table-tested):
//   - after every session check, and at once after a registration, the
//     controller brings every partition in line with liveness (elect): dead
//     nodes leave ISRs unless they are the last member (then the ISR is kept
//     and the partition goes offline with leader -1); a partition whose leader
//     died gets the first alive ISR replica in replica order (leader epoch
//     +1); with none, unclean election only when the topic sets
//     unclean.leader.election=true; an offline partition whose ISR holds a
//     returning node gets it as leader. A returning node is never put back
//     into ISRs: leaders do that with AlterPartition once it caught up;
//   - AlterPartition: ISR changes requested by partition leaders, accepted
//     only from the current leader at its current node, leader and partition
//     epochs, adding only alive nodes that are not shutting down;
//   - every Config.PreferredLeaderInterval, leadership moves back to each
//     partition's preferred (first) replica when it is alive, in the ISR and
//     not the leader;
//   - ControlledShutdown marks a node as leaving, moves its leaderships to
//     other ISR members and takes it out of the ISRs where it is not the last
//     member, and answers how many partitions it still leads.
//
// Every change is one Raft command: an UpdatePartition carrying the epochs it
// was decided from, so a decision taken on a stale view (a concurrent ISR
// change, a previous leader's) is rejected by Apply and taken again from the
// new state. Decisions use the FSM's state and the controller's clock; the
// commands carry the outcome, so Apply stays deterministic.
//
// Producer ids (InitProducerID, producers.go): the leader reserves blocks
// of Config.ProducerIDBlockSize ids (1000 by default, as Kafka's controller
// does) with one AllocProducerIDs entry each and hands ids out from memory,
// rather than one Raft entry per id: a producer id costs a quorum write only
// once per block, which matters for clients that start a producer per
// request. The FSM decides each block when the entry applies, so blocks never
// overlap whoever proposes them; a block is dropped with the rest of the
// controller's state when leadership is lost, and its unused ids are a gap,
// never reused (an int64 holds 9e15 blocks of 1000). Ids are thus unique, and
// a new leadership's blocks lie above every block reserved before it. They are
// not a global sequence: a deposed leader that has not noticed yet still
// serves its block, so clients must rely only on uniqueness. A block size of
// 1 makes every id its own entry.
//
// Remote logs (tiered storage, remote.go): a partition leader's additions
// to and drops from its remote log are checked against the leader's state,
// then proposed (AddRemoteSegment, DropRemoteSegments), as AlterPartition
// is; a drop that would remove nothing is answered without an entry.
// Storage nodes clear the remote garbage of deleted topics
// (ClearRemoteGarbage) once its objects are gone from the store.
//
// It also proposes the cluster id once, when a leader finds none.
package controller
