// Package bench implements sluice-bench, the load generator and benchmark of a
// Sluice cluster, in the spirit of kafka-producer-perf-test and the
// OpenMessaging Benchmark. cmd/sluice-bench only calls Main.
//
// Modes (the first argument):
//
//   - produce: --producers SDK Producers (--body sdk, the SDK's RecordBatch v2
//     bodies) or HTTP posters of JSON record bodies (--body json, one request
//     in flight each, --json-batch records a request, spread over
//     --frontends) send records to --topic, created when missing. Latency is
//     from Send (or the POST) to the record's outcome. The SDK retries what
//     is retriable until --delivery-timeout; a JSON poster, like a plain REST
//     client, resends only a request refused whole for a retriable reason
//     (429 THROTTLING_QUOTA_EXCEEDED ...) and takes each record's error in
//     the answer as final.
//   - consume: --consumers members of one consumer group (a fresh group by
//     default, so it starts at the earliest offsets) read what the topic
//     holds. The topic must exist and, with --records N, hold at least N
//     records (checked first; reading every partition to its end short of N
//     stops the run with an error). Throughput counts from the first record
//     received, and again from the start (including the group join).
//   - e2e: produce and consume at once. Each value starts with the send time
//     as 8 bytes of big-endian Unix nanoseconds (the record's timestamp is set
//     too); end-to-end latency is the receive time minus that stamp, so
//     producers and consumers must share a clock (they run in this process).
//     Consumers start at the partitions' ends as they were before producing
//     and producing waits until the group owns every partition (and every
//     member some, when there are enough partitions), so the join and its
//     rebalances stay out of the figures. Records acknowledged but not
//     consumed within --grace after producing ended are failures (unless the
//     run was interrupted).
//   - share: --consumers members of a share group (a fresh one by default,
//     set to start at the earliest offsets; --group-config sets its other
//     settings, such as share.max.fetch.records) read what the topic holds
//     and accept every record. Each poll carries the acceptances of the
//     records the previous poll returned; a record counts once its
//     acceptance is confirmed, so the figure is acknowledged records/s,
//     comparable with consume's on the same records. An acceptance refused
//     (an expired lock) leaves the record to be delivered and counted again
//     later.
//
// Counting: --records N counts records sent after the warm-up; --duration D
// is the measured period after the warm-up. Records sent during --warmup
// (default 2s with --duration, 0 with --records; consume has none) are left
// out of throughput and latency but their failures count. Throughput is in
// records/s and in MB/s of record values (1 MB = 10^6 bytes; keys, headers
// and framing are not counted). Latencies go into an HdrHistogram (1 µs
// resolution, 3 significant digits) and are reported in milliseconds.
//
// Choices:
//
//   - --idempotence (default true) turns itself off with --acks leader or
//     none, as sluicectl does; asking for it explicitly with those acks is a
//     usage error.
//   - A flag the mode or body does not use (--consumers for produce,
//     --linger for --body json ...) is a usage error rather than silently
//     ignored; the cluster's addresses are taken by every mode. An existing
//     topic that disagrees with --partitions, --replication-factor or
//     --config given explicitly stops the run (exit 1).
//   - --records N with --warmup sends the warm-up first and then N counted
//     records; --duration D measures D after the warm-up.
//   - --rate paces sends on a fixed schedule shared evenly by the producers:
//     record n is due at start + n/rate. A producer that falls behind catches
//     up by at most maxPacerLag worth of records, so a stall is not followed by
//     an unbounded burst. Latency is measured from the actual send, as
//     kafka-producer-perf-test does.
//
// Exit status: 0 when every record succeeded; 1 when any record failed (the
// count and the first distinct errors are printed) or the run could not
// start; 2 for usage errors; 130 when interrupted (SIGINT or SIGTERM), after
// printing the summary of what was done, marked "interrupted". On an
// interrupt, records in flight get up to drainTimeout to learn their outcome;
// those that do not are failures.
//
// Goroutines: Main's run owns every goroutine it starts (producers, consumers,
// the progress line, timers) and waits for all of them before printing the
// summary; each stops on the run's contexts.
package bench
