// Package fetch reads partitions for HTTP consumers: clients that cannot
// reach the storage nodes (a browser, a function behind a NAT, a script with
// curl) fetch through the frontend instead.
//
// A Fetcher sends one storage-protocol Fetch to the partition's leader, as
// the SDK's consumers do, and hands back the leader's raw record-batch bytes;
// AppendJSON and AppendMsgpack then decode the records once, straight into
// the answer. The leader is found in the metadata cache; after a retriable
// answer (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, a lost connection,
// an epoch the leader does not know) the Fetcher waits (backoff, cut short by
// a metadata change), refreshes the model and asks the leader it names, until
// the fetch's time runs out.
//
// Semantics are those of a Kafka fetch for a consumer with read_committed
// off: records below the high watermark only, from the requested offset on;
// max_bytes is a soft limit (the first batch is returned whole even when
// larger, so a consumer never stalls); an empty answer after max_wait_ms
// means nothing new arrived. next_offset is where the next fetch starts.
//
// Invariants: the Fetcher holds nothing between requests; a Result aliases
// a pooled buffer of the storage connection until Release; the encoders
// never panic on any payload (a corrupt batch ends the answer before it,
// with an error only when nothing precedes it).
package fetch
