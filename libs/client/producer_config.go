package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/txns"
)

// Errors of the Producer.
var (
	// ErrInvalidProducerConfig wraps every problem NewProducer finds in a
	// configuration.
	ErrInvalidProducerConfig = errors.New("client: invalid producer config")
	// ErrProducerClosed is returned by Send after Close, and given to the
	// callbacks of records Close had to abandon.
	ErrProducerClosed = errors.New("client: producer closed")
	// ErrBufferFull is returned by Send when the buffer is full and
	// BlockOnBufferFull is off, or stayed full for MaxBlock.
	ErrBufferFull = errors.New("client: producer buffer full")
)

// ProducerConfig configures a Producer. Start from DefaultProducerConfig;
// zero fields take the defaults documented on them.
type ProducerConfig struct {
	// Frontends lists the frontends' base URLs. Requests are spread over
	// them; one that fails is skipped for a while.
	Frontends []string
	// Metadata lists where topic metadata is read (partition counts) and
	// producer ids are allocated: metadata voters or frontends (default:
	// Frontends, which forward these requests).
	Metadata []string
	// ClientID names the producer (default "sluice-producer").
	ClientID string
	// TLS, when set, is used with the frontends and metadata (https unless
	// the addresses say otherwise), for a cluster running TLS.
	TLS *tls.Config
	// Token is the principal's bearer token for frontends that require
	// authentication (-require-auth); empty: none sent.
	Token string
	// Acks is protocol.AcksAll (default), AcksLeader or AcksNone.
	Acks int8
	// Linger is how long a partition's batch may wait for more records
	// before it is sent (default 5ms; negative: send at once); a full batch
	// goes at once.
	Linger time.Duration
	// BatchSize caps a batch's uncompressed size in bytes (default 1 MiB).
	BatchSize int
	// Compression is the batches' codec (default record.CodecNone).
	Compression record.Codec
	// Idempotent makes the producer stamp each batch with its producer id,
	// epoch and sequence so that a retried batch is never stored twice
	// (default on; DisableIdempotence turns it off).
	DisableIdempotence bool
	// DeliveryTimeout bounds the time from Send to the record's outcome,
	// retries included (default 2m).
	DeliveryTimeout time.Duration
	// RequestTimeout bounds one HTTP request to a frontend (default 40s).
	RequestTimeout time.Duration
	// RetryBackoff is the first pause before a retry; it doubles up to
	// MaxRetryBackoff (defaults 50ms and 1s).
	RetryBackoff, MaxRetryBackoff time.Duration
	// BufferMemory bounds the bytes of records sent but not yet answered
	// (default 64 MiB). When full, Send blocks for up to MaxBlock (default
	// 60s) or, with NoBlockOnBufferFull, fails at once with ErrBufferFull.
	BufferMemory        int64
	MaxBlock            time.Duration
	NoBlockOnBufferFull bool
	// MaxRequestBytes caps one request's batches (default 4 MiB, below the
	// frontend's default 8 MiB body limit); a topic's ready batches are split
	// over several requests beyond it.
	MaxRequestBytes int
	// MaxInFlight bounds the requests in flight to the frontends (default 8).
	// Each partition has at most one batch in flight, which keeps its order.
	MaxInFlight int
	// MetadataMaxAge is how old a topic's partition count may get before it
	// is read again (default 30s).
	MetadataMaxAge time.Duration
	// Logger receives the producer's log lines (default slog.Default()).
	Logger *slog.Logger

	// TransactionalID makes the producer transactional (Kafka's
	// transactional.id): records are sent only inside a transaction
	// (BeginTxn, then CommitTxn or AbortTxn), and a new producer with the
	// same id fences this one. It needs idempotence and acks=all.
	TransactionalID string
	// TransactionTimeout is how long a transaction may stay open before
	// the coordinator aborts it (default 1m, as Kafka's
	// transaction.timeout.ms; at most the offsets service's
	// -transaction-max-timeout).
	TransactionTimeout time.Duration
	// Offsets lists the offsets service's replicas, the transaction
	// coordinator; required with TransactionalID.
	Offsets []string
}

// DefaultProducerConfig returns the defaults with acks=all and idempotence.
func DefaultProducerConfig() ProducerConfig {
	return ProducerConfig{Acks: protocol.AcksAll}.withDefaults()
}

func (c ProducerConfig) withDefaults() ProducerConfig {
	if len(c.Metadata) == 0 {
		c.Metadata = c.Frontends
	}
	if c.ClientID == "" {
		c.ClientID = "sluice-producer"
	}
	if c.Linger == 0 {
		c.Linger = 5 * time.Millisecond
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1 << 20
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = 2 * time.Minute
	}
	if c.RequestTimeout == 0 {
		// Above the frontend's 30s produce timeout, so its 504 (with what is
		// known) arrives before the producer gives up on the request.
		c.RequestTimeout = 40 * time.Second
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 4 << 20
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 50 * time.Millisecond
	}
	if c.MaxRetryBackoff == 0 {
		c.MaxRetryBackoff = time.Second
	}
	if c.BufferMemory == 0 {
		c.BufferMemory = 64 << 20
	}
	if c.MaxBlock == 0 {
		c.MaxBlock = time.Minute
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 8
	}
	if c.MetadataMaxAge == 0 {
		c.MetadataMaxAge = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TransactionalID != "" && c.TransactionTimeout == 0 {
		c.TransactionTimeout = time.Minute
	}
	return c
}

// Validate reports every problem of the configuration (after defaults).
func (c ProducerConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Frontends) == 0 {
		bad("Frontends: at least one frontend address is needed")
	}
	switch c.Acks {
	case protocol.AcksAll, protocol.AcksLeader, protocol.AcksNone:
	default:
		bad("Acks %d: want all (-1), leader (1) or none (0)", c.Acks)
	}
	if !c.DisableIdempotence && c.Acks != protocol.AcksAll {
		bad("Acks %d: an idempotent producer needs acks=all (set DisableIdempotence for leader or none)", c.Acks)
	}
	if c.Compression > record.CodecZstd {
		bad("Compression %v: not a codec", c.Compression)
	}
	if c.BatchSize < 1024 || c.BatchSize > record.MaxBatchSize {
		bad("BatchSize %d: want 1 KiB to %d bytes", c.BatchSize, record.MaxBatchSize)
	}
	if c.MaxRequestBytes < c.BatchSize {
		bad("MaxRequestBytes %d: must hold at least one batch (BatchSize %d)", c.MaxRequestBytes, c.BatchSize)
	}
	if c.BufferMemory < int64(c.BatchSize) {
		bad("BufferMemory %d: must hold at least one batch (%d bytes)", c.BufferMemory, c.BatchSize)
	}
	for name, d := range map[string]time.Duration{"DeliveryTimeout": c.DeliveryTimeout, "RequestTimeout": c.RequestTimeout,
		"RetryBackoff": c.RetryBackoff, "MaxRetryBackoff": c.MaxRetryBackoff, "MaxBlock": c.MaxBlock, "MetadataMaxAge": c.MetadataMaxAge} {
		if d < 0 {
			bad("%s %v: must not be negative", name, d)
		}
	}
	if c.MaxInFlight < 1 {
		bad("MaxInFlight %d: must be at least 1", c.MaxInFlight)
	}
	if c.TransactionalID != "" {
		if err := txns.ValidateID(c.TransactionalID); err != nil {
			bad("TransactionalID: %v", err)
		}
		if c.DisableIdempotence {
			bad("TransactionalID: a transactional producer is idempotent (DisableIdempotence is set)")
		}
		if len(nonEmpty(c.Offsets)) == 0 {
			bad("Offsets: a transactional producer needs the offsets service's addresses (its transaction coordinator)")
		}
		if c.TransactionTimeout < 0 || c.TransactionTimeout > time.Duration(math.MaxInt32)*time.Millisecond {
			bad("TransactionTimeout %v: must be positive and fit 32-bit milliseconds", c.TransactionTimeout)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidProducerConfig, errors.Join(errs...))
	}
	return nil
}
