package log

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// Config holds one log's settings. The topic-level settings (segment.bytes,
// segment.ms, retention.ms, retention.bytes, index.interval.bytes,
// max.message.bytes) map onto it one to one.
type Config struct {
	// SegmentBytes: the active segment rolls when an append would take it past
	// this size (an append into an empty segment is always accepted).
	SegmentBytes int64
	// SegmentMs: the active segment rolls on the next append once its first
	// append is older than this many milliseconds.
	SegmentMs int64
	// RetentionMs: whole non-active segments whose largest timestamp is older
	// than this many milliseconds are deleted; -1 keeps them forever.
	RetentionMs int64
	// RetentionBytes: the oldest non-active segments are deleted while the log
	// would stay at or above this size without them; -1 means unlimited.
	RetentionBytes int64
	// Compact: the log is compacted (cleanup.policy holds compact). Leader
	// appends refuse a record without a key (ErrKeylessRecord); follower
	// appends may skip offsets, which the leader's cleaner removed; the
	// node's cleaner runs Clean on it. Retention applies only if
	// RetentionMs or RetentionBytes says so (compact alone sets both -1).
	Compact bool
	// Tiered: the log's closed segments are copied to remote storage, and
	// retention (the local retention, here) deletes only what the remote
	// log holds (Log.SetUploaded).
	Tiered bool
	// IndexIntervalBytes: bytes between sparse offset-index entries; 0 indexes
	// every batch.
	IndexIntervalBytes int
	// MaxBatchBytes: Append rejects a batch larger than this with
	// ErrBatchTooLarge.
	MaxBatchBytes int
	// Now is the clock used for roll by age, append times and file ages; nil
	// means time.Now. Tests inject a fake clock here.
	Now func() time.Time
	// FS is the file system the log changes its files through
	// (filesystem.go); nil means the operating system's, as in production.
	// Tests inject failures here (package faultfs). Open takes it and
	// SetConfig keeps it: it never changes under an open log.
	FS FileSystem
}

// Bounds of Config fields.
const (
	// MinSegmentBytes is the smallest SegmentBytes: room for one empty batch.
	MinSegmentBytes = record.HeaderSize
	// MaxSegmentBytes keeps file positions within the index's uint32.
	MaxSegmentBytes = math.MaxInt32
	// DefaultMaxBatchBytes is Kafka's max.message.bytes default (1 MiB + 12).
	DefaultMaxBatchBytes = 1<<20 + record.LogOverhead
)

// DefaultConfig returns Kafka's defaults: 1 GiB segments rolled at least
// weekly, seven days' retention without a size limit, an index entry every
// 4 KiB and 1 MiB (+12 bytes) batches.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour.Milliseconds(),
		RetentionMs:        7 * 24 * time.Hour.Milliseconds(),
		RetentionBytes:     -1,
		IndexIntervalBytes: 4096,
		MaxBatchBytes:      DefaultMaxBatchBytes,
	}
}

// Validate checks each field's range.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < MinSegmentBytes || c.SegmentBytes > MaxSegmentBytes:
		return fmt.Errorf("%w: SegmentBytes %d not in [%d, %d]", ErrInvalidConfig, c.SegmentBytes, MinSegmentBytes, MaxSegmentBytes)
	case c.SegmentMs < 1:
		return fmt.Errorf("%w: SegmentMs %d < 1", ErrInvalidConfig, c.SegmentMs)
	case c.RetentionMs < -1:
		return fmt.Errorf("%w: RetentionMs %d < -1", ErrInvalidConfig, c.RetentionMs)
	case c.RetentionBytes < -1:
		return fmt.Errorf("%w: RetentionBytes %d < -1", ErrInvalidConfig, c.RetentionBytes)
	case c.IndexIntervalBytes < 0 || c.IndexIntervalBytes > MaxSegmentBytes:
		return fmt.Errorf("%w: IndexIntervalBytes %d not in [0, %d]", ErrInvalidConfig, c.IndexIntervalBytes, MaxSegmentBytes)
	case c.MaxBatchBytes < record.HeaderSize || c.MaxBatchBytes > MaxSegmentBytes:
		return fmt.Errorf("%w: MaxBatchBytes %d not in [%d, %d]", ErrInvalidConfig, c.MaxBatchBytes, record.HeaderSize, MaxSegmentBytes)
	}
	return nil
}

func (c Config) fileSystem() FileSystem {
	if c.FS != nil {
		return c.FS
	}
	return osFS{}
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
