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
// ProduceBatches is the SDK's fast path: the body already holds one
// RecordBatch v2 per entry (libs/frontendapi), and each batch's bytes go to
// its partition's leader as they are; CheckBatches looks only at headers
// (length, magic, codec), the leader checks the CRC.
//
// A Budget bounds the bytes of the requests being served; the HTTP layer
// admits each body into it or refuses the request.
//
// Invariants:
//   - the records of one request bound for one partition travel in one batch,
//     in request order, so their offsets are consecutive and follow the request;
//   - the batches of a batches body bound for one partition are sent in body
//     order, each only after the previous one was acknowledged, and none
//     after one failed for good;
//   - a batch is resent only after its previous attempt has answered, and
//     nothing else of the same request goes to that partition meanwhile, so a
//     retry never reorders a partition;
//   - Produce and ProduceBatches return only when every partition has
//     answered, failed, or the request's timeout passed (then ErrTimedOut,
//     with the results known so far), so a client that waits for each answer
//     before its next request (one HTTP connection) keeps its order per
//     partition across requests;
//   - the frontend holds no state a restart would lose: a request either got
//     its answer or the client resends it (delivery is at-least-once; exactly
//     once per batch for idempotent batches, which leaders deduplicate);
//   - Parse never panics and never trusts a declared length for an allocation;
//     every error it returns wraps ErrMalformed, ErrTooManyRecords or
//     ErrContentType with a reason naming the record and field.
package produce
