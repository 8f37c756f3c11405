// Package fakecluster holds in-process stand-ins for the services the frontend
// talks to, for tests only: a metadata HTTP service (cluster snapshots with
// the versioned watch, the topic admin routes and producer ids) and a storage
// node speaking the storage protocol (produce, fetch, list offsets, describe
// replicas) on a real socket.
//
// The real metadata and storage services live in other modules of the
// repository and cannot be imported here; these fakes keep only their wire
// contracts (libs/cluster's HTTP API and libs/protocol's frames), and the
// storage fake checks every batch with record.Validate as a leader does. The
// end-to-end suite against the real binaries lives in integration/.
package fakecluster
