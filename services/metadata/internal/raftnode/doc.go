// Package raftnode runs this member of the metadata Raft group and is the only
// way the rest of the service reaches Raft. It is a typed layer over the
// shared libs/server/raftgroup.Node, which owns the transport, the bbolt log and
// stable store, snapshots, bootstrap, leadership fan-out, forwarding to the
// leader, Linearize/Barrier and the raft gauges (sluice_metadata_raft_*); see
// that package's documentation for those.
//
// What this package adds for metadata:
//   - Apply, which proposes an fsm.Command on the leader and, on any other
//     member, forwards it to the leader's ApplyPath (raft itself never
//     forwards), for commands whose content does not depend on who proposes
//     them; the leader answers with an ApplyResponse;
//   - Propose, the leader-only variant for decisions taken from the leader's
//     own view (placement, liveness, elections): never forwarded;
//   - ApplyLocal, which returns the FSM's *fsm.Result;
//   - the readiness check "replicated state applied" (the FSM knows the
//     cluster id) after raftgroup's leader check;
//   - the FSM gauges (version, topics, storage nodes) and the fx Module.
//
// The group's names (Config, Peer, the sentinel errors, ApplyPath,
// ForwardedHeader) are re-exported here so the rest of the service imports
// one package.
package raftnode
