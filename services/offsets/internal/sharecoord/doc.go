// Package sharecoord is the offsets service's share-group coordinator
// (Kafka's KIP-932; package libs/shares states the contract). It lives
// beside the group coordinator on the offsets Raft group's leader and
// reaches it through coordinator.Plane alone. It owns no replicated state:
// the share groups' state is the fsm package's (package fsm/sharefsm), and
// every acquisition and acknowledgement is a Raft entry the FSM decides.
//
// Coordinator proposes acquisitions and acknowledgements (share.go), visits
// each member's own partitions first (share_homes.go: homes, a hint of
// order, never a grant), holds the long poll of an acquisition that finds
// nothing, and writes archived records to a group's dead-letter topic
// (deadletter.go).
//
// # Invariants
//
//   - The FSM decides what may be taken: each share-partition is a window
//     of in-flight records from Start; a record is Available, Acquired by
//     one member until its lock expires, Acknowledged, or Archived
//     (Archiving while it waits for the dead-letter topic), and Start moves
//     past every record that is done. Every decision, expiry included, is
//     made by the FSM from the proposer's clock carried in the command
//     (sharefsm.Command.NowMs), so replicas decide alike and a new leader
//     continues exactly where the old one stopped.
//   - Acknowledgements are all or none per partition, every other
//     operation all or none. An acquisition carrying acknowledgements
//     applies them first, in the same entry, and is answered at once.
//   - What the leader keeps in memory is a hint only: the partitions' log
//     bounds (cached for BoundsTTL) and the members' homes order a visit,
//     and an acquisition visits every partition whatever they say.
//   - Each archived record reaches the dead-letter topic once: a batch is
//     fixed in the Raft log before it is written, and a batch fixed by an
//     earlier leader is written again as it was (same producer id and
//     sequence numbers), so the partition leader drops it as a duplicate.
package sharecoord
