// Package record reads and writes Kafka's RecordBatch v2 format, the one
// encoding Sluice uses for records on the wire from producers, on disk and on
// the wire to consumers.
//
// Three parts make up the package:
//
//   - header.go: the fixed 61-byte batch header. The storage service uses it to
//     validate a batch (length, magic, CRC-32C) and to stamp the base offset and
//     leader epoch in place without decoding records.
//   - Builder: the producer side. It encodes records into a batch, compresses
//     the records section and computes the CRC.
//   - Iterator: the consumer side. It walks the concatenated batches of a fetch
//     response, checks each batch's CRC, decompresses it and yields records.
//
// Invariants:
//
//   - The bytes a Builder produces are exactly Kafka's: Kafka's Java client,
//     franz-go and librdkafka read them, and the Iterator reads theirs. Snappy is
//     written in the xerial framing of Kafka's Java client and read framed or raw;
//     LZ4 uses the LZ4 frame format; gzip and zstd use their standard frames.
//   - Base offset and partition leader epoch sit outside the CRC, so a leader
//     stamps them (SetBaseOffset, SetLeaderEpoch) without recomputing it.
//   - Nothing in this package panics on malformed input. Every error it returns
//     for bad bytes wraps ErrCorrupt or ErrShortBatch (errors.Is works) and says
//     what was wrong and where.
//   - Decompression output is capped (DefaultMaxDecompressedSize unless the
//     Iterator is told otherwise), so a small hostile batch cannot make a
//     consumer allocate gigabytes.
//   - The Iterator yields a batch's records only after the whole batch decoded
//     cleanly: a consumer never sees half of a corrupt batch.
//   - The uncompressed paths allocate nothing per record once buffers have
//     grown: the Builder reuses its buffers across Reset, the Iterator reuses its
//     record slice across batches (header keys are the exception: each is a
//     string).
//
// Neither Builder nor Iterator is safe for concurrent use; use one per
// goroutine. The compressors and decompressors behind them are pooled and
// shared safely.
package record
