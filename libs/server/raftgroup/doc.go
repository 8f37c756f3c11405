// Package raftgroup runs one member of a service's Raft group
// (hashicorp/raft) around a service-supplied raft.FSM. Every replicated
// service (metadata, offsets) builds its raft node from it, so they share one
// implementation of the transport, storage, bootstrap, forwarding and metrics.
//
// What it owns:
//   - the TCP transport on the raft address, the log and stable store
//     (<data-dir>/wal, a write-ahead log of segment files: hashicorp/raft-wal,
//     one fdatasync per append of a batch of entries; logstore.go) and the
//     file snapshot store (<data-dir>/snapshots). A <data-dir>/raft.db of an
//     earlier release (the bbolt store of package raftstore) is converted on
//     the first start and kept as raft.db.converted;
//   - bootstrap: with -bootstrap and no existing state it bootstraps the voters
//     of -peers (or itself alone when -peers is empty); with existing state it
//     restarts from it and -bootstrap is a no-op, so the flag can stay set;
//   - leadership notifications, fanned out to subscribers (OnLeadership);
//   - ApplyLocal, which proposes encoded command bytes on the leader and
//     returns the FSM's response untouched; the service decodes it. Raft itself
//     never forwards, so a service that accepts writes on any member relays
//     the command to the leader's ApplyPath with Forward;
//   - Forward, which relays an HTTP request to the leader's HTTP API and marks
//     it with ForwardedHeader so a relayed request is never relayed again;
//   - Linearize (VerifyLeader then Barrier) for fresh reads on the leader,
//     Barrier, Snapshot;
//   - Ready, the readiness check: started, a leader known, then the service's
//     own checks (WithReady, WithHealth);
//   - a leader whose WithHealth check fails (its FSM cannot apply) hands
//     leadership to another voter, so the group goes on without it;
//   - the raft gauges sluice_<service>_raft_* (RegisterMetrics).
//
// What it leaves to the service: the FSM, the encoding of commands and
// responses, the HTTP server that serves ApplyPath, the FSM's own metrics and
// the fx wiring.
//
// Member addresses: Raft only knows raft addresses, so every member learns the
// HTTP address of every voter from the -peers flag, whose items read
// "id=raftaddr=httpaddr". The map is static: a member outside it can be a
// follower but writes cannot be forwarded to it while it leads (callers get
// ErrLeaderAddressUnknown, which services map to 503 NOT_CONTROLLER so clients
// try another member). Dynamic membership would move the map into the FSM.
//
// hclog output of raft goes to the service's slog logger through an adapter,
// at warn level and above by default.
package raftgroup
