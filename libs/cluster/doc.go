// Package cluster is the cluster metadata model that the metadata service owns and
// every other service and client reads: storage nodes, topics with their
// configuration, and the state of each partition (replicas, leader, leader epoch,
// ISR). It also holds the HTTP client of the metadata API.
//
// The metadata service publishes the whole model as a versioned Snapshot; the
// version is the Raft index of the last change, so it only grows, and a watcher
// that long-polls with the version it holds is answered as soon as a newer one
// exists.
package cluster
