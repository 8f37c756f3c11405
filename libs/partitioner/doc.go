// Package partitioner chooses a record's partition the way Kafka's Java
// producer does, so that a key lands on the same partition in Sluice as it
// would in Kafka with the same partition count.
//
// Keyed records use ForKey: toPositive(murmur2(key)) % partitions, Kafka's
// DefaultPartitioner (and BuiltInPartitioner for keyed records), with
// murmur2 exactly as org.apache.kafka.common.utils.Utils.murmur2 (seed
// 0x9747b28c, little-endian 4-byte blocks, Java's fall-through tail).
// Keyless records use a Sticky partitioner: one partition for a whole batch,
// a different one for the next, which fills batches faster than round robin.
//
// Invariants:
//
//   - Murmur2 and ForKey are pure: the same bytes and partition count always
//     give the same partition, on every platform and in every process.
//   - ForKey and Sticky never return a partition outside [0, partitions) and
//     never panic; for a partition count below 1 they return -1.
//   - A Sticky is safe for concurrent use.
//
// A key's partition changes when the partition count changes, exactly as in
// Kafka; adding partitions to a topic moves keys.
package partitioner
