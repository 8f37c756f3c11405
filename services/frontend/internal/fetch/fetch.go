package fetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
)

// ErrMetadataUnavailable: the frontend has no usable cluster model and the
// metadata service does not answer (HTTP 503).
var ErrMetadataUnavailable = errors.New("cluster metadata unavailable")

// Offsets a request may give instead of a number, as Kafka's ListOffsets.
const (
	OffsetLatest   = protocol.TimestampLatest   // the high watermark: only new records
	OffsetEarliest = protocol.TimestampEarliest // the log start offset
)

// Config tunes the Fetcher.
type Config struct {
	// Timeout bounds a fetch beyond its max wait: finding the leader, retries
	// after leader changes and the answer's transfer.
	Timeout time.Duration
	// RetryBackoff is the first pause before asking again after a retriable
	// answer; it doubles up to MaxRetryBackoff. A metadata change ends it.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// UnknownTopicMaxAge: a fetch of a topic missing from the cached model
	// refreshes the model first unless it was heard less than this long ago.
	UnknownTopicMaxAge time.Duration
}

// DefaultConfig returns the settings used by the binary.
func DefaultConfig() Config {
	return Config{Timeout: 10 * time.Second, RetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: time.Second, UnknownTopicMaxAge: 100 * time.Millisecond}
}

// Validate checks ranges.
func (c Config) Validate() error {
	switch {
	case c.Timeout <= 0:
		return fmt.Errorf("fetch timeout %v must be positive", c.Timeout)
	case c.RetryBackoff <= 0 || c.MaxRetryBackoff < c.RetryBackoff:
		return fmt.Errorf("fetch retry backoff %v..%v must be positive and ordered", c.RetryBackoff, c.MaxRetryBackoff)
	case c.UnknownTopicMaxAge < 0:
		return fmt.Errorf("unknown topic max age %v must not be negative", c.UnknownTopicMaxAge)
	}
	return nil
}

// Metadata is the routing information the Fetcher needs; *metacache.Cache
// is one. Methods are called from request goroutines concurrently.
type Metadata interface {
	Route(topic string) (*metacache.Route, bool)
	Refresh(ctx context.Context) (*cluster.Snapshot, error)
	RefreshOlder(ctx context.Context, maxAge time.Duration) (*cluster.Snapshot, error)
	Changed() <-chan struct{}
}

// Request is one fetch.
type Request struct {
	Topic     string
	Partition int32
	// Offset is the first offset wanted, or OffsetEarliest / OffsetLatest.
	Offset   int64
	MaxBytes int32
	MaxWait  time.Duration
	// Isolation is protocol.ReadUncommitted (default) or
	// protocol.ReadCommitted: up to the last stable offset, without aborted
	// transactions' records, and OffsetLatest is the last stable offset.
	Isolation int8
}

// Result is a leader's answer: whole batches from the one holding Offset on.
type Result struct {
	// Offset is where the fetch started (OffsetEarliest and OffsetLatest
	// resolved).
	Offset           int64
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Isolation is the request's; at read_committed, Aborted are the
	// aborted transactions the decoding drops.
	Isolation int8
	Aborted   []protocol.AbortedTxn
	// Payload holds the batches as the leader sent them; it aliases a pooled
	// buffer until Release.
	Payload []byte

	res storageclient.Result
}

// Release hands the payload's buffer back; the Result must not be used
// afterwards.
func (r *Result) Release() { r.res.Release(); r.Payload = nil }

// Fetcher fetches from partition leaders. It is safe for concurrent use.
type Fetcher struct {
	cfg  Config
	meta Metadata
	pool *storageclient.Pool
}

// New returns a Fetcher that reaches leaders through pool.
func New(cfg Config, meta Metadata, pool *storageclient.Pool) (*Fetcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Fetcher{cfg: cfg, meta: meta, pool: pool}, nil
}

// Fetch long-polls the partition's leader once (retrying on leader changes)
// for the records at req.Offset and after. Errors carry wire codes:
// UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE (with the partition's log
// start and end offsets in the message), the leader's last retriable error
// when the time ran out, or ErrMetadataUnavailable.
func (f *Fetcher) Fetch(ctx context.Context, req Request) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, req.MaxWait+f.cfg.Timeout)
	defer cancel()
	start := time.Now()
	if err := f.checkPartition(ctx, req.Topic, req.Partition); err != nil {
		return nil, err
	}
	offset := req.Offset
	if offset < 0 {
		var err error
		if offset, err = f.listOffset(ctx, req.Topic, req.Partition, offset, req.Isolation); err != nil {
			return nil, err
		}
	}
	out := &Result{Offset: offset, Isolation: req.Isolation}
	var resp protocol.FetchResponse
	err := f.withLeader(ctx, req.Topic, req.Partition, func(c *storageclient.Conn) error {
		out.res.Release()
		wait := max(req.MaxWait-time.Since(start), 0)
		fr := &protocol.FetchRequest{Topic: req.Topic, Partition: req.Partition, Offset: offset, MaxBytes: req.MaxBytes,
			MaxWaitMs: int32(wait / time.Millisecond), MinBytes: 1, ReplicaID: -1, CurrentLeaderEpoch: -1, FlushedOffset: -1,
			Isolation: req.Isolation}
		var err error
		out.res, err = c.Call(ctx, protocol.APIFetch, fr, nil, &resp)
		return err
	})
	if err != nil {
		out.Release()
		if protocol.CodeOf(err) == protocol.OffsetOutOfRange {
			return nil, f.outOfRange(ctx, req.Topic, req.Partition, offset, err)
		}
		return nil, err
	}
	out.HighWatermark, out.LastStableOffset, out.LogStartOffset, out.Payload = resp.HighWatermark, resp.LastStableOffset, resp.LogStartOffset, out.res.Payload
	out.Aborted = resp.Aborted
	return out, nil
}

// ListOffset asks the partition's leader for its earliest (log start) or
// latest (high watermark) offset.
func (f *Fetcher) ListOffset(ctx context.Context, topic string, partition int32, which int64) (int64, error) {
	return f.listOffset(ctx, topic, partition, which, protocol.ReadUncommitted)
}

// listOffset is ListOffset at an isolation level (read_committed: latest is
// the last stable offset).
func (f *Fetcher) listOffset(ctx context.Context, topic string, partition int32, which int64, isolation int8) (int64, error) {
	var resp protocol.ListOffsetsResponse
	err := f.withLeader(ctx, topic, partition, func(c *storageclient.Conn) error {
		_, err := c.Call(ctx, protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: topic, Partition: partition, Timestamp: which,
			CurrentLeaderEpoch: -1, Isolation: isolation}, nil, &resp)
		return err
	})
	return resp.Offset, err
}

// outOfRange returns the OFFSET_OUT_OF_RANGE error for offset with the
// partition's current range in the message, or the leader's own error (which
// names its log's range) when the range cannot be had.
func (f *Fetcher) outOfRange(ctx context.Context, topic string, partition int32, offset int64, leaderErr error) error {
	first, err := f.ListOffset(ctx, topic, partition, OffsetEarliest)
	if err != nil {
		return leaderErr
	}
	end, err := f.ListOffset(ctx, topic, partition, OffsetLatest)
	if err != nil {
		return leaderErr
	}
	return protocol.OffsetOutOfRange.Err("offset %d is outside partition %d of %q: its log start offset is %d and its end (high watermark) %d",
		offset, partition, topic, first, end)
}

// checkPartition finds the topic, refreshing the model once when it is
// missing (it may have been created a moment ago), and the partition in it.
func (f *Fetcher) checkPartition(ctx context.Context, topic string, partition int32) error {
	r, ok := f.meta.Route(topic)
	if !ok {
		snap, err := f.meta.RefreshOlder(ctx, f.cfg.UnknownTopicMaxAge)
		if r, ok = f.meta.Route(topic); !ok {
			switch {
			case err != nil:
				return fmt.Errorf("%w: %w", ErrMetadataUnavailable, err)
			case snap == nil:
				return ErrMetadataUnavailable
			}
			return protocol.UnknownTopicOrPartition.Err("unknown topic %q", topic)
		}
	}
	if partition < 0 || int(partition) >= r.Partitions() {
		return protocol.UnknownTopicOrPartition.Err("partition %d does not exist (topic %q has %d)", partition, topic, r.Partitions())
	}
	return nil
}

// withLeader runs call on a connection to the partition's leader; after a
// retriable error it waits (backoff, cut short by a metadata change),
// refreshes the model and tries the leader it names, until ctx ends. It
// returns the last error.
func (f *Fetcher) withLeader(ctx context.Context, topic string, partition int32, call func(*storageclient.Conn) error) error {
	backoff := f.cfg.RetryBackoff
	for {
		changed := f.meta.Changed()
		err := f.once(ctx, topic, partition, call)
		if err == nil || !retriable(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return err
		}
		backoff = min(2*backoff, f.cfg.MaxRetryBackoff)
		_, _ = f.meta.Refresh(ctx) // on failure the held view is used again
	}
}

func (f *Fetcher) once(ctx context.Context, topic string, partition int32, call func(*storageclient.Conn) error) error {
	r, ok := f.meta.Route(topic)
	if !ok {
		return errTopicGone(topic)
	}
	addr := r.Leader(partition)
	if addr == "" {
		return protocol.LeaderNotAvailable.Err("partition %d of %q has no leader", partition, topic)
	}
	c, err := f.pool.Get(ctx, addr)
	if err != nil {
		return err
	}
	return call(c)
}

// topicGone is the error of a topic deleted while it was being fetched: not
// retried, although UNKNOWN_TOPIC_OR_PARTITION from a leader is.
type topicGone struct{ err error }

func (g topicGone) Error() string { return g.err.Error() }
func (g topicGone) Unwrap() error { return g.err }

func errTopicGone(topic string) error {
	return topicGone{protocol.UnknownTopicOrPartition.Err("topic %q was deleted", topic)}
}

// retriable reports whether asking (another) leader again may succeed:
// the table's retriable codes, except a timeout (the fetch's own time ran
// out) and a deleted topic.
func retriable(err error) bool {
	var gone topicGone
	if errors.As(err, &gone) {
		return false
	}
	c := protocol.CodeOf(err)
	return c.Retriable() && c != protocol.RequestTimedOut
}

// AtLeader calls the partition's current leader once, without retries:
// the Kafka listener answers its clients with the leader's errors
// (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, OFFSET_OUT_OF_RANGE), which
// they handle themselves. The result's payload aliases a pooled buffer
// until its Release.
func (f *Fetcher) AtLeader(ctx context.Context, topic string, partition int32, api protocol.APIKey, body, resp protocol.Body) (storageclient.Result, error) {
	var res storageclient.Result
	if r, ok := f.meta.Route(topic); ok && (partition < 0 || int(partition) >= r.Partitions()) {
		return res, protocol.UnknownTopicOrPartition.Err("partition %d does not exist (topic %q has %d)", partition, topic, r.Partitions())
	}
	err := f.once(ctx, topic, partition, func(c *storageclient.Conn) error {
		var err error
		res, err = c.Call(ctx, api, body, nil, resp)
		return err
	})
	return res, err
}
