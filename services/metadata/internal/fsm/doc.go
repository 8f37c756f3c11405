// Package fsm is the metadata service's replicated state machine: the one
// place where the cluster model (storage nodes, topics, partitions, cluster
// id), the producer id counter and the partitions' remote logs change. Raft
// feeds it committed commands in log order on one goroutine; everything else
// reads copies.
//
// Invariants:
//   - Apply is deterministic: its outcome depends only on the current state,
//     the command bytes and the entry's Raft index, never on clocks, maps'
//     iteration order, randomness or I/O. Anything non-deterministic (replica
//     placement, cluster id generation, liveness decisions) is decided by the
//     leader before proposing and carried in the command.
//   - A command that fails validation (unknown topic, stale epoch, malformed
//     bytes) leaves the state untouched and comes back as Result.Err; Apply
//     never panics on a command's content.
//   - Version is the Raft index of the last command that changed the cluster
//     model, so it only grows. Each change closes the channel returned by
//     Changed, which is how long-polling watchers wake up. Reserving producer
//     ids is not such a change: it moves neither.
//   - A node's epoch is the Raft index of its latest registration or fencing
//     (FenceNode, when its session expired): unique and monotonic without a
//     separate counter. Fencing marks the node dead and invalidates the epoch
//     it holds, so only a new registration brings it back.
//   - A node in controlled shutdown (ShutdownNode) stays alive but may not join
//     an ISR; the mark ends when it registers again or is fenced.
//   - A partition's PartitionEpoch grows by one on every change of its state and
//     LeaderEpoch by one on every change of its leader; UpdatePartition (the
//     controller's elections) only applies when the proposer saw the current
//     values of both, and AlterPartition (a leader's ISR change) also only
//     when it comes from the current leader at its current node epoch.
//   - Producer ids (producers.go): the FSM holds only the next id not yet
//     reserved, starting at FirstProducerID (also when a snapshot or log
//     predates it). AllocProducerIDs hands the proposer the next Count ids and
//     moves the counter past them, so an id is never handed out twice, even
//     across leader changes and restarts; what the proposer does not use is
//     a gap, never reused. Serving single ids from a block is the
//     controller's job, not the FSM's.
//   - Remote logs (tiered storage, remote.go): each partition's uploaded
//     segments in offset order without gaps, changed only by the partition's
//     current leader (the sender checks of AlterPartition), growing at the
//     end and shrinking from the front. Partition.Remote summarizes the log;
//     a change moves Version but no epoch. A deleted topic's remote logs go
//     to the remote garbage until ClearRemoteGarbage.
//   - Readers get deep copies; no slice or map of the live state escapes.
package fsm
