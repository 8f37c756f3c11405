// Package kafka serves the Kafka wire protocol for Sluice's frontends and
// storage nodes: one listener per process, speaking to any Kafka client
// (librdkafka, franz-go, the Java client, kafka-python) as a broker of one
// Kafka cluster.
//
// The layers, from the socket up:
//
//   - Server (server.go, conn.go) accepts connections (plain or TLS), reads
//     size-prefixed frames, refusing a size above MaxRequestBytes before
//     allocating it, and admits each request's bytes into a memory budget
//     (Kafka's queued.max.request.bytes) before reading it, so many clients
//     sending at once wait instead of growing memory. A connection's
//     requests are read and handled one at a time and answered in request
//     order; a handler may finish its answer on another goroutine
//     (Reply.Async, produce), so a client's pipelined requests overlap, up
//     to maxQueued answers pending per connection.
//   - The request header (header.go) is parsed by hand; the body by kmsg,
//     franz-go's codec of every request at every version. A request of an
//     unknown API key, of a version the route does not serve, or that does
//     not decode closes the connection after a log line naming the reason,
//     as Kafka does; ApiVersions of an unknown version is answered in the
//     v0 format with UNSUPPORTED_VERSION and the supported ranges (KIP-511),
//     so clients can retry lower.
//   - Authentication (sasl.go): SASL/PLAIN and SCRAM-SHA-256/512
//     through SaslHandshake and SaslAuthenticate (after a v0 handshake the
//     tokens come bare, as librdkafka sends them), against the principals
//     of the cluster model (a principal's password is its bearer token); with
//     SASL off a TLS client certificate names the principal; with neither the
//     connection is anonymous. Until a SASL connection authenticated it may
//     only send ApiVersions and the SASL requests.
//   - Routes map an API key and a version range to a Handler; the caller
//     (the frontend, the storage node) registers what it serves. Handlers
//     answer with a kmsg response, a Body they write themselves (a fetch
//     sending segment bytes with sendfile), or nothing (produce with acks
//     0), and may throttle the connection after the answer (KIP-219).
//
// Broker (broker.go and the files after it) holds the handlers every broker
// of the cluster answers alike, from the cluster model and the metadata
// service: Metadata, DescribeCluster, the topic and config admin APIs, the
// ACL APIs and InitProducerId. The data path (Produce, Fetch, ListOffsets,
// OffsetForLeaderEpoch) is the caller's: frontends route produce batches to
// partition leaders and send fetches to the storage node that leads the
// partition (KIP-392's preferred read replica); storage nodes serve fetches
// from their segment files.
package kafka
