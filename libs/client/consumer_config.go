package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Where a consumer starts a partition that has no committed offset, or whose
// committed offset is out of the range the partition holds
// (ConsumerConfig.AutoOffsetReset).
const (
	OffsetResetEarliest = "earliest"
	OffsetResetLatest   = "latest"
)

// What a consumer reads (ConsumerConfig.IsolationLevel, ReaderConfig),
// under Kafka's isolation.level names.
const (
	// ReadUncommitted reads every record below the high watermark,
	// transactional ones whatever became of their transaction.
	ReadUncommitted = groups.ReadUncommitted
	// ReadCommitted reads below the last stable offset (it waits at an open
	// transaction) and never returns the records of an aborted one.
	ReadCommitted = groups.ReadCommitted
)

// ParseIsolation returns the wire value of an isolation level name ("" is
// read_uncommitted).
func ParseIsolation(level string) (int8, error) {
	switch level {
	case "", ReadUncommitted:
		return protocol.ReadUncommitted, nil
	case ReadCommitted:
		return protocol.ReadCommitted, nil
	}
	return 0, fmt.Errorf("%q is not %s or %s", level, ReadUncommitted, ReadCommitted)
}

// Errors of the Consumer.
var (
	// ErrInvalidConsumerConfig wraps every problem NewConsumer and
	// ConsumerConfig.Validate find in a configuration.
	ErrInvalidConsumerConfig = errors.New("client: invalid consumer config")
	// ErrConsumerClosed is returned by a Consumer's methods after Close, and by
	// a Poll that Close interrupted.
	ErrConsumerClosed = errors.New("client: consumer closed")
	// ErrNotOwned is returned by Seek for a partition the consumer does not own.
	ErrNotOwned = errors.New("client: partition not owned by this consumer")
)

// ConsumerConfig configures a group Consumer. Start from DefaultConsumerConfig
// (it turns AutoCommit on, which the zero value cannot express); other zero
// fields take the defaults documented on them.
type ConsumerConfig struct {
	// Metadata lists metadata (or frontend) addresses, for topics and
	// partition leaders.
	Metadata []string
	// Offsets lists the offsets service's replicas (the group coordinator).
	Offsets []string
	// Group is the consumer group id: 1 to 249 characters of [a-zA-Z0-9._-].
	Group string
	// Topics is the subscription.
	Topics []string
	// ClientID names this client to the coordinator and the storage nodes
	// (default "sluice-consumer").
	ClientID string
	// AutoOffsetReset is where a partition starts when the group committed no
	// offset for it, or when its offset is out of the partition's range:
	// "earliest" or "latest" (default latest, as Kafka).
	AutoOffsetReset string
	// IsolationLevel is read_uncommitted (default, as Kafka) or
	// read_committed: then the consumer stops at each partition's last
	// stable offset, skips aborted transactions' records, and an "latest"
	// AutoOffsetReset starts at the last stable offset.
	IsolationLevel string
	// AutoCommit commits the positions of owned partitions every
	// AutoCommitInterval (default 5s) from inside Poll, before revoking a
	// partition and on Close.
	AutoCommit         bool
	AutoCommitInterval time.Duration
	// SessionTimeout (default 10s) and RebalanceTimeout (default 30s) are sent
	// on every heartbeat. A member that does not heartbeat within the session
	// timeout is removed from the group; one that does not release a revoked
	// partition (by calling Poll) within the rebalance timeout too.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// Assignor is the preferred assignor: "" (the coordinator's default),
	// range, roundrobin or sticky.
	Assignor string
	// FetchMaxBytes (default 1 MiB) and FetchMaxWait (default 500ms) shape
	// each fetch from a partition's leader.
	FetchMaxBytes int32
	FetchMaxWait  time.Duration
	// Prefetch is how many fetch responses are buffered per partition ahead
	// of Poll (default 2).
	Prefetch int
	// MaxPollRecords caps the records one Poll returns (default 500).
	MaxPollRecords int

	// The callbacks run on the goroutine calling Poll (or Close), never
	// concurrently with the processing of records that Poll returned. They
	// may call Assignment, Position, Seek, Commit and CommitOffsets but not
	// Poll or Close.

	// OnAssigned is called with partitions that became owned, before their
	// start offsets are looked up (Seek in it to start elsewhere).
	OnAssigned func([]groups.TP)
	// OnRevoked is called with partitions the coordinator takes away, after
	// their fetchers stopped and (with AutoCommit) their positions were
	// committed, before they are released to the coordinator.
	OnRevoked func([]groups.TP)
	// OnLost is called with every owned partition when the membership is lost
	// (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, or no successful heartbeat for
	// a whole session timeout). Nothing is committed: another member may
	// already own them.
	OnLost func([]groups.TP)

	// Logger receives the consumer's log lines (default slog.Default()).
	Logger *slog.Logger

	// TLS, when set, is used with the metadata and offsets services (https
	// unless the addresses say otherwise) and the storage nodes, for a
	// cluster running TLS; with mutual TLS it carries the client's
	// certificate (tlsconf.ClientFiles builds one from PEM files).
	TLS *tls.Config
}

// DefaultConsumerConfig returns a configuration with every default set and
// AutoCommit on; fill in Metadata, Offsets, Group and Topics.
func DefaultConsumerConfig() ConsumerConfig {
	return ConsumerConfig{
		ClientID:           "sluice-consumer",
		AutoOffsetReset:    OffsetResetLatest,
		AutoCommit:         true,
		AutoCommitInterval: 5 * time.Second,
		SessionTimeout:     10 * time.Second,
		RebalanceTimeout:   30 * time.Second,
		FetchMaxBytes:      1 << 20,
		FetchMaxWait:       500 * time.Millisecond,
		Prefetch:           2,
		MaxPollRecords:     500,
	}
}

// Limits of the durations sent to the coordinator in milliseconds.
const (
	minGroupTimeout = 100 * time.Millisecond
	maxGroupTimeout = time.Duration(math.MaxInt32) * time.Millisecond
)

// Validate checks the configuration; zero values that take a default pass.
// The error wraps ErrInvalidConsumerConfig and names every bad field.
func (c ConsumerConfig) Validate() error {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if len(nonEmpty(c.Metadata)) == 0 {
		add("Metadata: at least one metadata or frontend address is required")
	}
	if len(nonEmpty(c.Offsets)) == 0 {
		add("Offsets: at least one offsets service address is required")
	}
	if err := groups.ValidateGroupID(c.Group); err != nil {
		add("Group: %v", err)
	}
	if len(c.Topics) == 0 {
		add("Topics: subscribe to at least one topic")
	}
	for _, t := range c.Topics {
		if err := cluster.ValidateTopicName(t); err != nil {
			add("Topics: %v", err)
		}
	}
	switch c.AutoOffsetReset {
	case "", OffsetResetEarliest, OffsetResetLatest:
	default:
		add("AutoOffsetReset: %q is not earliest or latest", c.AutoOffsetReset)
	}
	if _, err := ParseIsolation(c.IsolationLevel); err != nil {
		add("IsolationLevel: %v", err)
	}
	if c.AutoCommitInterval < 0 {
		add("AutoCommitInterval: %v is negative", c.AutoCommitInterval)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"SessionTimeout", c.SessionTimeout}, {"RebalanceTimeout", c.RebalanceTimeout}} {
		if d.v != 0 && (d.v < minGroupTimeout || d.v > maxGroupTimeout) {
			add("%s: %v is not between %v and %v", d.name, d.v, minGroupTimeout, maxGroupTimeout)
		}
	}
	switch c.Assignor {
	case "", groups.AssignorRange, groups.AssignorRoundRobin, groups.AssignorSticky:
	default:
		add("Assignor: %q is not range, roundrobin or sticky", c.Assignor)
	}
	if c.FetchMaxBytes < 0 {
		add("FetchMaxBytes: %d is negative", c.FetchMaxBytes)
	}
	if c.FetchMaxWait < 0 || c.FetchMaxWait > maxGroupTimeout {
		add("FetchMaxWait: %v is negative or too long", c.FetchMaxWait)
	}
	if c.Prefetch < 0 {
		add("Prefetch: %d is negative", c.Prefetch)
	}
	if c.MaxPollRecords < 0 {
		add("MaxPollRecords: %d is negative", c.MaxPollRecords)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConsumerConfig, strings.Join(bad, "; "))
	}
	return nil
}

// withDefaults fills zero fields with DefaultConsumerConfig's values, trims
// the address lists and sorts and deduplicates the subscription.
func (c ConsumerConfig) withDefaults() ConsumerConfig {
	d := DefaultConsumerConfig()
	c.Metadata, c.Offsets = nonEmpty(c.Metadata), nonEmpty(c.Offsets)
	c.Topics = sortedUnique(c.Topics)
	if c.ClientID == "" {
		c.ClientID = d.ClientID
	}
	if c.AutoOffsetReset == "" {
		c.AutoOffsetReset = d.AutoOffsetReset
	}
	if c.AutoCommitInterval == 0 {
		c.AutoCommitInterval = d.AutoCommitInterval
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = d.SessionTimeout
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = d.RebalanceTimeout
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = d.FetchMaxBytes
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = d.FetchMaxWait
	}
	if c.Prefetch == 0 {
		c.Prefetch = d.Prefetch
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = d.MaxPollRecords
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// nonEmpty returns the trimmed, non-empty strings of ss.
func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// sortedUnique returns a sorted copy of ss without duplicates.
func sortedUnique(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
