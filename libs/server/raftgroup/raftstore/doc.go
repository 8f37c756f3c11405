// Package raftstore is the durable home of a Raft group's log and stable
// state: a raft.LogStore and a raft.StableStore kept in one bbolt file.
//
// Invariants:
//   - every write is one bbolt read-write transaction, fsynced before the call
//     returns (bbolt's default), so what raft was told is stored survives a crash;
//   - StoreLogs writes its whole batch in one transaction: all or nothing;
//   - bytes handed out (GetLog, Get) are copies: bbolt's memory is only valid
//     inside its transaction;
//   - a missing stable key is an error whose text is exactly "not found" (raft
//     tests that text), and a missing log index is raft.ErrLogNotFound;
//   - log entries are keyed by big-endian index so cursor order is index order.
//
// The file's schema is two buckets, "logs" and "stable". Entries are encoded
// with a small versioned binary format (see codec.go); a corrupt entry is an
// error, never a panic.
package raftstore
