// Package raftnode runs this member of the metadata Raft group (hashicorp/raft)
// and is the only way the rest of the service reaches Raft.
//
// What it owns:
//   - the TCP transport on the raft address, the bbolt log and stable store
//     (<data-dir>/raft.db) and the file snapshot store (<data-dir>/snapshots);
//   - bootstrap: with -bootstrap and no existing state it bootstraps the voters
//     of -peers (or itself alone when -peers is empty); with existing state it
//     restarts from it and -bootstrap is a no-op, so the flag can stay set;
//   - leadership notifications, fanned out to subscribers (the controller);
//   - Apply, which proposes on the leader and, on any other member, forwards
//     the command to the leader's HTTP API (raft itself never forwards), for
//     commands whose content does not depend on who proposes them;
//   - Propose, the leader-only variant for decisions taken from the leader's
//     own view (placement, liveness, elections): never forwarded;
//   - Forward, which relays an HTTP request to the leader's HTTP API; the API
//     uses it for every write and for reads that must be linearizable;
//   - Linearize (VerifyLeader then Barrier) for fresh reads on the leader.
//
// Member addresses: Raft only knows raft addresses, so every member learns the
// HTTP address of every voter from the -peers flag, whose items read
// "id=raftaddr=httpaddr". The map is static: a member outside it can be a
// follower but writes cannot be forwarded to it while it leads (callers get
// ErrLeaderAddressUnknown, mapped to 503 NOT_CONTROLLER so clients try another
// member). Dynamic membership would move the map into the FSM.
//
// hclog output of raft goes to the service's slog logger through an adapter,
// at warn level and above by default.
package raftnode
