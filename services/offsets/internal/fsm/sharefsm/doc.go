// Package sharefsm is the share groups' room of the offsets state machine
// (package fsm): the replicated state of Kafka's share groups (KIP-932;
// package libs/shares states the contract), the Command that changes it,
// and its place in the state file. It keeps no file, lock or goroutine of
// its own: fsm applies each Command inside the bbolt transaction of its
// batch of Raft entries, through the batch's Stage, and holds the groups
// Load read and each batch's Commit changed.
//
// A share group (Group, model.go) has a configuration and, per partition
// it read, a share-partition (Partition) with the writer of its
// dead-letter batches (deadletter.go). Command (command.go) is one
// operation on a group, Stage.Apply (apply.go) its rules; store.go keeps
// the groups in bucket "shares", one sub-bucket per group holding its
// configuration and each partition's state, its records run-length
// encoded.
//
// # Invariants
//
//   - Each share-partition is a window of in-flight records from Start
//     (Records[i] is offset Start+i, End the first offset never
//     delivered): a record is Available, Acquired by one member until its
//     lock expires, Acknowledged, or Archived (Archiving while it waits for
//     the group's dead-letter topic). Start moves past every record that
//     is done, so the window never begins with one; it grows, from End and
//     below the high watermark, only while it holds fewer records than the
//     group's share.partition.max.record.locks.
//   - Every decision, lock expiry included, is made from the proposer's
//     clock carried in the command (Command.NowMs) and the log bounds the
//     proposer saw (Bounds), never from the replica's: replicas decide
//     alike, and a new leader continues where the old one stopped.
//   - Validation before change: Apply checks the command alone, then
//     against the state, and a refusal (the command's answer) changes
//     nothing, in memory or in the file; an error fails the batch's
//     transaction.
//   - Acknowledgements are all or none per partition: a partition's are
//     applied only if each names records the member holds under a live
//     lock, none twice, and each partition answers on its own. An
//     acquisition carrying acknowledgements applies them first, in the
//     same command. Every other operation is all or none.
//   - A committed Partition is never changed: the first command of a batch
//     that changes one changes a copy, later commands of the batch change
//     that copy in place, and Flush writes each changed partition once.
//   - A group is deleted, or a topic's partitions reset, only while none
//     of their records is under a live lock or waits for the dead-letter
//     topic; a share group never takes a consumer group's name.
//   - A dead-letter batch is fixed before it is written: DeadLetterBegin
//     fixes its records and first sequence number, a later one returns it
//     again as it was until DeadLetterDone reports it written, and only
//     then are its records Archived; so a new leader writes it again byte
//     for byte (package sharecoord), and the partition leader drops the
//     duplicate.
package sharefsm
