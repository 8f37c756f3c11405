// Package replica holds the partition replicas of one storage node: for each
// partition placed on the node, its segment log and the node's role for it
// (leader or follower, leader epoch), as the metadata service last described it.
//
// The Manager reconciles the set of replicas with each new metadata snapshot:
// it opens (and so recovers) the logs of partitions assigned to the node, and
// closes and deletes the logs of partitions no longer assigned to it (a deleted
// topic). It applies topic configuration changes to open logs.
//
// Invariants: a Replica's log is opened once and closed once; a replica is
// served only while the manager holds it; the high watermark never moves back
// while the replica is leader. Replication (followers, ISR, the high watermark
// over the ISR) arrives with the replication work; until then a leader's high
// watermark is its log end offset.
package replica
