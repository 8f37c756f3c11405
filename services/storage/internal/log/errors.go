package log

import "errors"

// Sentinel errors. Every error this package returns about an offset, a batch or
// the log's state wraps one of them (or record.ErrCorrupt / record.ErrShortBatch
// for a malformed batch given to Append) and adds the detail.
var (
	// ErrOffsetOutOfRange: the offset is below the log start offset or above
	// the log end offset (Kafka's OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("log: closed")
	// ErrBatchTooLarge: a batch exceeds Config.MaxBatchBytes, or one append
	// exceeds what a segment can address (Kafka's MESSAGE_TOO_LARGE).
	ErrBatchTooLarge = errors.New("log: batch too large")
	// ErrOffsetMismatch: AppendReplica got batches that do not start at the log
	// end offset or whose offsets do not increase.
	ErrOffsetMismatch = errors.New("log: batch offsets do not follow the log end offset")
	// ErrKeylessRecord: a leader append to a compacted log (Config.Compact)
	// holds a record without a key (Kafka's INVALID_RECORD).
	ErrKeylessRecord = errors.New("log: record without a key on a compacted log")
	// ErrNotBatchBoundary: TruncateTo was asked to cut inside a batch.
	ErrNotBatchBoundary = errors.New("log: offset is inside a batch")
	// ErrFailed: a write or fsync failed; the log refuses appends and flush
	// waits until it is reopened, which recovers from what is on disk.
	ErrFailed = errors.New("log: failed after an I/O error")
	// ErrDiskFull: an append was refused because the file system holding the
	// log is (nearly) full; nothing was written and the log stays usable.
	ErrDiskFull = errors.New("log: disk full")
	// ErrCorruptData: bytes on disk failed a batch's checks when read or
	// scrubbed; the error is a *CorruptError saying where.
	ErrCorruptData = errors.New("log: corrupt data on disk")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("log: invalid config")
	// ErrStaleEpoch: Append was given a leader epoch lower than the latest in
	// the leader-epoch cache: the caller is a fenced leader (Kafka's
	// FENCED_LEADER_EPOCH).
	ErrStaleEpoch = errors.New("log: leader epoch is older than the log's")
	// ErrStaleDamageReport: TruncateCorrupt was given damage seen before the
	// log was last truncated or reset; nothing is cut.
	ErrStaleDamageReport = errors.New("log: the damage was reported before the log was last cut")

	// Idempotent producers (producers.go). Append refuses the whole append,
	// writing nothing, with one of these.

	// ErrInvalidProducerEpoch: a batch's producer epoch is below the one the
	// log knows for its producer id: a newer instance of the producer took
	// over (Kafka's INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("log: producer epoch is older than the producer's current one")
	// ErrOutOfOrderSequence: a batch's sequence does not follow the
	// producer's last appended one, or a new producer epoch does not start at
	// sequence 0 (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrDuplicateSequence: a batch repeats sequences older than the batches
	// the log remembers for its producer, so it was appended before but its
	// offsets are no longer known (Kafka's DUPLICATE_SEQUENCE_NUMBER, which
	// producers take for "already written").
	ErrDuplicateSequence = errors.New("log: duplicate sequence number")
	// ErrMixedDuplicates: an append mixes batches appended before with new
	// ones; nothing of it is appended. It is not ErrDuplicateSequence, which
	// a producer would take for "all written" and so lose the new batches
	// (INVALID_REQUEST: send each partition one batch per request).
	ErrMixedDuplicates = errors.New("log: an append mixes duplicate and new batches")
	// ErrInvalidProducerBatch: a batch carries a producer id but a negative
	// producer epoch or base sequence (Kafka's INVALID_RECORD).
	ErrInvalidProducerBatch = errors.New("log: batch has a producer id without epoch or sequence")

	// Transactions (txn.go).

	// ErrControlBatch: a client's append holds a control batch; only the
	// transaction coordinator writes them, through AppendMarker (Kafka's
	// INVALID_RECORD).
	ErrControlBatch = errors.New("log: control batches are written by the transaction coordinator only")
	// ErrInvalidTxnState: a producer with an open transaction appended a
	// batch outside it (Kafka's INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("log: batch outside the producer's open transaction")
)

// PartitionMetadataFile is the replica manager's record of the topic id in a
// log directory. Recovery leaves it alone; besides it and the segments, a log
// directory holds only the log's own EpochCheckpointFile, HighWatermarkFile
// and producer snapshots.
const PartitionMetadataFile = "partition.metadata"
