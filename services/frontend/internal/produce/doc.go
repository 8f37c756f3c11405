// Package produce turns HTTP produce bodies into record batches on partition
// leaders.
//
// Parse reads a body in the Confluent REST Proxy v2 shape (JSON, or the same
// structure in msgpack) into records. A Producer picks each record's partition
// (explicit, murmur2 of the key as Kafka does, or one sticky partition per
// request for keyless records) and sends RecordBatch v2 built with
// libs/record to each partition's leader over the storage protocol,
// partitions concurrently. With Linger 0 each request builds and sends its
// own batch per partition. Otherwise an accumulator (accumulator.go) gathers
// the records of concurrent requests per (topic, partition, acks) into shared
// batches: a batch goes when its linger has passed and the partition's
// previous batch was answered, or at once when full (BatchMaxBytes), and each
// request gets its records' offsets (the batch's base offset plus each
// record's position in it) or the batch's error.
//
// Each accumulator lane is an idempotent producer (idempotence.go), as
// Kafka's REST proxy is: on first use it gets a producer id of its own from
// the metadata service (ProducerIDs, InitProducerID) and stamps its batches
// with the id, its epoch and consecutive sequences. A resend after a lost
// answer (a storage deadline tears the shared connection down while the old
// copy is on its way) is then answered by the leader as a duplicate with its
// original offsets, and a late copy is never appended twice nor after the
// lane's next batch. A batch that fails for good puts the lane's sequence in
// doubt: the lane's next batch starts a fresh id. When no id can be had
// (metadata down; asked again after pidCooldown), batches go unstamped, at
// least once, with one warning per outage: availability before the extra
// guarantee. With Linger 0 batches are never stamped. The request's acks goes to
// the leader as given; the storage protocol answers every request, so
// acks=none still reports offsets and only spares the wait for replicas and
// fsync.
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
//   - the records of one request bound for one partition travel in request
//     order: in one batch (with Linger 0, a batch of their own), or, when
//     they pass BatchMaxBytes, in consecutive batches of the partition's
//     lane; once one of those fails, the later ones are not sent;
//   - a partition has at most one batch of record-body records in flight per
//     acks level, sent only after the previous one was answered (Linger > 0),
//     so batches reach the leader in the order records were accumulated;
//   - the batches of a batches body bound for one partition are sent in body
//     order, each only after the previous one was acknowledged, and none
//     after one failed for good;
//   - a batch is resent only after its previous attempt has answered, and
//     nothing else of the same request (or lane) goes to that partition
//     meanwhile, so a retry never reorders a partition;
//   - Produce and ProduceBatches return only when every partition has
//     answered, failed, or the request's timeout passed (then ErrTimedOut,
//     with the results known so far), so a client that waits for each answer
//     before its next request (one HTTP connection) keeps its order per
//     partition across requests; records still waiting in the accumulator
//     when a request's time runs out are never sent ("not sent"), those in a
//     batch in flight have an unknown outcome;
//   - the accumulator refers to the records of requests still waiting
//     (admitted by the Budget) and copies none until it builds a batch: a
//     request that answers leaves its records unreachable from the lanes,
//     and each lane owns at most its one built batch in flight;
//   - a lane's stamped batches carry consecutive sequences under its id, in
//     send order; its sequence moves only after a batch was acknowledged,
//     and after a failure of a batch that may have reached a leader the lane
//     never uses that id again;
//   - the frontend holds no state a restart would lose: a request either got
//     its answer or the client resends it. Delivery of one attempt of a
//     batch is exactly once for stamped batches (lingered record bodies with
//     a producer id, and SDK batches with one), which leaders deduplicate,
//     and at-least-once for the others (Linger 0, no id obtainable,
//     batches-body batches without an id), whose resend after a lost answer
//     may duplicate them or land a late copy after a later batch. A batch
//     answered "outcome unknown" may still be appended once, before or after
//     the lane's next batch (that one starts a new id); a client that resends
//     its records then may duplicate them, as with any Kafka producer;
//   - Parse never panics and never trusts a declared length for an allocation;
//     every error it returns wraps ErrMalformed, ErrTooManyRecords or
//     ErrContentType with a reason naming the record and field.
package produce
