// Package placement decides where a new topic's partition replicas live. It
// is pure: the same nodes, existing topics and request give the same answer,
// with no clock, randomness or I/O, so the Raft leader can compute a placement
// and put it in the log for every member to apply verbatim.
//
// Rules, in order of priority:
//  1. a partition's replicas are distinct live nodes; RF larger than the number
//     of live nodes is an error (ErrNotEnoughNodes);
//  2. rack awareness: when the nodes name racks, each partition's replicas go
//     to distinct racks while unused racks remain, so with at least RF racks no
//     two replicas share one. A node without a rack counts as a rack of its own;
//  3. leaders (the first replica, the preferred leader) go to the node leading
//     the fewest partitions, counting existing topics, then to the one with
//     the fewest replicas;
//  4. followers go to the nodes holding the fewest replicas, ties broken by
//     walking the ring of node ids from the leader onwards, so that the
//     followers of one node's partitions spread over the others (when a node
//     dies its leadership is spread too).
//
// Starting from a balanced cluster, leader counts and replica counts differ by
// at most one between nodes when racks do not constrain the choice.
package placement
