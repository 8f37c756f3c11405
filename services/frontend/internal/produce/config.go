package produce

import (
	"fmt"
	"time"
)

// Config tunes how the frontend forwards produce requests.
type Config struct {
	// MaxRecords is the largest number of records one record body (JSON or
	// msgpack) may carry. A batches body is not counted record by record: the
	// frontend never decodes its records.
	MaxRecords int
	// MaxInFlightBytes bounds the sum of the body sizes of the produce
	// requests being served; a request that would pass it is refused with
	// THROTTLING_QUOTA_EXCEEDED (HTTP 429) before anything of it is produced.
	MaxInFlightBytes int64
	// Timeout bounds a whole produce request: every partition's attempts and
	// retries. The storage request carries what remains of it.
	Timeout time.Duration
	// Retries is how many times a partition's batch is resent after a
	// retriable error (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, a broken
	// connection ...), each time after a metadata refresh.
	Retries int
	// RetryBackoff is the first pause before a retry; it doubles on each retry
	// of the same batch up to MaxRetryBackoff. A metadata change ends the
	// pause early.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// UnknownTopicMaxAge: a request for a topic missing from the cached model
	// refreshes the model first, unless the metadata service answered less
	// than this long ago (the watch delivers changes within milliseconds, so
	// a flood of requests for a missing topic need not reach metadata).
	UnknownTopicMaxAge time.Duration
	// Linger is how long a partition's open batch of record-body records
	// (JSON, msgpack) waits after its first record for records of other
	// requests to the same partition and acks. It is sent once the linger
	// has passed and the partition's previous batch was answered (it keeps
	// taking records until then), or sealed at once when full. 0 turns the
	// accumulator off: each request sends its own batch per partition at
	// once. Batches bodies are never lingered.
	Linger time.Duration
	// BatchMaxBytes caps the batches the accumulator builds (Linger > 0): a
	// record that would take its open batch past it goes to the next batch,
	// so a request's records for one partition may be split over several
	// batches, in order. A single record larger than the cap travels alone.
	BatchMaxBytes int
}

// Bounds of Linger and BatchMaxBytes.
const (
	maxLinger        = 10 * time.Second
	minBatchMaxBytes = 1 << 10
	maxBatchMaxBytes = 1 << 30
)

// DefaultConfig returns the settings used by the binary.
func DefaultConfig() Config {
	return Config{
		MaxRecords:         10000,
		MaxInFlightBytes:   256 << 20,
		Timeout:            30 * time.Second,
		Retries:            8,
		RetryBackoff:       50 * time.Millisecond,
		MaxRetryBackoff:    time.Second,
		UnknownTopicMaxAge: 100 * time.Millisecond,
		Linger:             2 * time.Millisecond,
		BatchMaxBytes:      1 << 20,
	}
}

// Validate checks ranges and the relation between the backoff bounds.
func (c Config) Validate() error {
	switch {
	case c.MaxRecords < 1:
		return fmt.Errorf("max records %d must be at least 1", c.MaxRecords)
	case c.MaxInFlightBytes < 1:
		return fmt.Errorf("max in-flight bytes %d must be positive", c.MaxInFlightBytes)
	case c.Timeout < time.Millisecond || c.Timeout > 24*time.Hour:
		return fmt.Errorf("produce timeout %v must be between 1ms and 24h", c.Timeout)
	case c.Retries < 0:
		return fmt.Errorf("retries %d must not be negative", c.Retries)
	case c.RetryBackoff <= 0 || c.MaxRetryBackoff < c.RetryBackoff:
		return fmt.Errorf("retry backoff %v..%v must be positive and ordered", c.RetryBackoff, c.MaxRetryBackoff)
	case c.UnknownTopicMaxAge < 0:
		return fmt.Errorf("unknown topic max age %v must not be negative", c.UnknownTopicMaxAge)
	case c.Linger < 0 || c.Linger > maxLinger:
		return fmt.Errorf("linger %v must be between 0 and %v", c.Linger, maxLinger)
	case c.Linger >= c.Timeout:
		return fmt.Errorf("linger %v must be below the produce timeout %v", c.Linger, c.Timeout)
	case c.BatchMaxBytes < minBatchMaxBytes || c.BatchMaxBytes > maxBatchMaxBytes:
		return fmt.Errorf("batch max bytes %d must be between %d and %d", c.BatchMaxBytes, minBatchMaxBytes, maxBatchMaxBytes)
	}
	return nil
}
