// Package produce turns HTTP produce bodies into record batches on partition
// leaders.
//
// Parse reads a body in the Confluent REST Proxy v2 shape (JSON, or the same
// structure in msgpack) into records. A Producer picks each record's partition
// (explicit, murmur2 of the key as Kafka does, or one sticky partition per
// request for keyless records), builds one RecordBatch v2 per partition with
// libs/record, and sends each batch to its partition's leader over the
// storage protocol, partitions concurrently. The request's acks goes to the
// leader as given; the storage protocol answers every request, so acks=none
// still reports offsets and only spares the wait for replicas and fsync.
//
// Invariants:
//   - the records of one request bound for one partition travel in one batch,
//     in request order, so their offsets are consecutive and follow the request;
//   - a batch is resent only after its previous attempt has answered, and
//     nothing else of the same request goes to that partition meanwhile, so a
//     retry never reorders a partition;
//   - Produce returns only when every partition has answered or failed, so a
//     client that waits for each answer before its next request (one HTTP
//     connection) keeps its order per partition across requests;
//   - the frontend holds no state a restart would lose: a request either got
//     its answer or the client resends it (delivery is at-least-once);
//   - Parse never panics and never trusts a declared length for an allocation;
//     every error it returns wraps ErrMalformed, ErrTooManyRecords or
//     ErrContentType with a reason naming the record and field.
package produce
