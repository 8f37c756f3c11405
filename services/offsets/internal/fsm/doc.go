// Package fsm is the offsets service's replicated state machine: what the
// offsets Raft group agrees on, kept in one bbolt file. It holds three
// rooms, each with its own commands and rules, and applies every command
// of a batch of Raft entries in one bbolt transaction that also stores the
// last applied index (fsm.go; durability comes from the Raft log, so the
// file is not synced per batch and a restart skips what it already
// applied).
//
// Consumer groups (model.go, apply.go): a group's membership state is
// replaced whole by PutGroup, compare-and-set on its Version (the Raft index
// that wrote it), so two leaders' coordinators can never interleave their
// changes; committed offsets are keyed by group, topic and partition, and a
// commit is fenced (CheckCommit): by a current member at an epoch the
// coordinator gave it and for partitions it holds, or without a member only
// while the group has none. Resetting, deleting a group and deleting a
// topic's offsets need the group empty, or the topic unread.
//
// Transactions (txn.go): a transactional id's state (Txn) is replaced
// whole, compare-and-set on Version, and moves Empty -> Ongoing ->
// PrepareCommit or PrepareAbort -> CompleteCommit or CompleteAbort (and
// Empty again for the next transaction); the Prepare entry is the durable
// decision, and only after every partition's marker is written does the
// Complete entry land. A transaction's offsets reach their groups in the
// entry that completes its commit, atomically with it, and never after an
// abort.
//
// Share groups (package sharefsm states their rules; share.go serves their
// state): a share command (TypeShare) is applied through the batch's
// sharefsm.Stage, in the batch's one transaction like every other command.
// The FSM holds the share groups as stored, read by sharefsm.Load when the
// file is opened or restored; a share group never takes a consumer group's
// name.
//
// Partition keys (package partkey) are the same in every room: in the
// file, topic NUL partition; in states and in memory, "topic/partition".
//
// Every apply function validates first and changes nothing when it refuses:
// a refusal is the command's answer (Result.Err); an error fails the batch's
// transaction and breaks the replica (ErrBroken) rather than diverge.
package fsm
