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
	// ErrNotBatchBoundary: TruncateTo was asked to cut inside a batch.
	ErrNotBatchBoundary = errors.New("log: offset is inside a batch")
	// ErrFailed: a write or fsync failed; the log refuses appends and flush
	// waits until it is reopened, which recovers from what is on disk.
	ErrFailed = errors.New("log: failed after an I/O error")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("log: invalid config")
)

// PartitionMetadataFile is the one file besides segments and indexes a log
// directory may hold: the replica manager's record of the topic id. Recovery
// leaves it alone.
const PartitionMetadataFile = "partition.metadata"
