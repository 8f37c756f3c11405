// Package fakecluster holds in-process stand-ins for the metadata and storage
// services, for the unit tests of the frontend, the storage node and the
// SDK: a metadata HTTP service (cluster snapshots with the versioned watch
// and linearizable reads, a member behind the leader, storage node
// registration and heartbeats, the topic admin routes and producer ids) and
// a storage node speaking the storage protocol (produce, fetch, list offsets,
// describe replicas) on a real socket.
//
// The real services live in other modules of the repository and cannot be
// imported by each other's tests; these fakes keep only their wire contracts
// (libs/cluster's HTTP API and libs/protocol's frames), and the storage fake
// checks every batch with record.Validate as a leader does. The end-to-end
// suite against the real binaries lives in integration/.
package fakecluster
