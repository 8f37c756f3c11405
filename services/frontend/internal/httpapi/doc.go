// Package httpapi is the frontend's public HTTP API, served by fasthttp with a
// router written over the request path:
//
//	POST   /v1/topics/{topic}/records?acks=all|leader|none   produce (JSON, msgpack or batches body)
//	GET    /v1/topics/{topic}/partitions/{p}/records          fetch
//	         ?offset=N|earliest|latest&max_bytes=B&max_wait_ms=W
//	POST   /v1/topics                                         create a topic
//	GET    /v1/topics                                         list topics
//	GET    /v1/topics/{topic}                                 describe a topic
//	DELETE /v1/topics/{topic}                                 delete a topic
//	PATCH  /v1/topics/{topic}/config                          change a topic's config (set, delete)
//	POST   /v1/topics/{topic}/partitions                      add partitions (the new total)
//	GET    /v1/cluster[?since=V&wait_ms=W]                    cluster snapshot / watch
//	POST   /v1/producers                                      new idempotent producer id
//	*      /v1/groups[/...]                                   consumer groups (offsets service)
//	GET    /console[/...]                                     read-only web console (package console)
//
// Produce takes three bodies, by Content-Type: the Confluent REST Proxy v2
// shape in JSON (application/json) or msgpack (application/msgpack), which
// the frontend parses and batches per partition (with the records of
// concurrent requests to the same partition and acks, for up to -linger, in
// batches of up to -batch-max-bytes), answered by
// {"offsets":[...]} with one entry per record; and the SDK's ready-made
// RecordBatch v2 bytes per partition (frontendapi.ContentTypeBatches),
// routed to the leaders undecoded and answered by frontendapi's
// BatchesResponse, one result per batch. A batches body whose structure or
// batch headers are wrong is refused whole (400); a batch a leader refuses
// (CORRUPT_RECORD after its CRC check ...) is a result entry with the code.
//
// Requests are admitted into an in-flight budget (the sum of the bodies being
// served, -max-in-flight-bytes) from their announced length, before their
// bodies are read (body.go): one that does not fit gets 429
// THROTTLING_QUOTA_EXCEEDED with Retry-After: 1, and nothing of it is
// produced. A body over -max-body-bytes gets 413, a record body over
// -max-records 413 RECORD_LIST_TOO_LARGE. When -produce-timeout passes
// before every partition answered, the answer is 504 with the error body's
// fields (REQUEST_TIMED_OUT) next to the usual offsets or results:
// acknowledged records and batches keep their offsets, the others say their
// outcome is unknown (or that they were never sent).
//
// Fetch answers {"records":[...],"next_offset":N,"high_watermark":H} (see
// package fetch for a record's fields), or the same in msgpack with raw
// bytes for Accept: application/msgpack. max_bytes defaults to 1 MiB and is
// capped at 16 MiB, max_wait_ms defaults to 500 and is capped at 30000. An
// offset outside the partition's log is 404 OFFSET_OUT_OF_RANGE with the log
// start offset and end (high watermark) in the message.
//
// The admin routes (topics, cluster, producers) have the paths, bodies and
// JSON error bodies of the metadata service, so libs/cluster's Client may be
// pointed at a frontend. The /v1/groups routes are relayed verbatim (method,
// path, query, body) to the offsets service, failing over between its
// replicas, and answered with its status and body, so libs/groups' Client
// may be pointed at a frontend too. Every error answer of the frontend's own
// is {"error_code":N,"error":"reason"} with N from the wire error table and
// the HTTP status mapped from it in one place (statusOf).
//
// Every request carries an id: the client's X-Request-Id when usable, else a
// generated one; it is echoed in every answer, errors included, passed on to
// the offsets service, and named in log lines.
//
// Invariants: a handler never panics on input (a recovered bug answers 500);
// the server holds no state between requests beyond the metadata cache; Stop
// ends long-polls (cluster watches, fetches) at once and lets produce
// requests in progress finish.
package httpapi
