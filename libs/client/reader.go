package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// Admin is the administrative client: topics and cluster metadata.
type Admin = cluster.Client

// NewAdmin returns an Admin for the given metadata (or frontend) addresses.
func NewAdmin(addrs []string) *Admin { return cluster.NewClient(addrs) }

// Metadata caches the cluster snapshot for readers and refreshes it on demand.
// It is safe for concurrent use.
type Metadata struct {
	admin    *Admin
	internal bool // route to nodes' internal addresses (services inside the cluster network)

	mu   sync.Mutex        // guards snap
	snap *cluster.Snapshot // last snapshot, nil before the first
}

// NewMetadata returns a cache over admin that routes to the storage nodes'
// client (advertised) addresses.
func NewMetadata(admin *Admin) *Metadata { return &Metadata{admin: admin} }

// NewInternalMetadata is NewMetadata for services inside the cluster's
// network: it routes to the nodes' internal addresses, which is what they
// reach when clients outside are given other (advertised) ones.
func NewInternalMetadata(admin *Admin) *Metadata { return &Metadata{admin: admin, internal: true} }

// Get returns the cached snapshot, fetching it when there is none.
func (m *Metadata) Get(ctx context.Context) (*cluster.Snapshot, error) {
	m.mu.Lock()
	s := m.snap
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return m.Refresh(ctx)
}

// Refresh fetches a new snapshot.
func (m *Metadata) Refresh(ctx context.Context) (*cluster.Snapshot, error) {
	s, err := m.admin.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.snap = s
	m.mu.Unlock()
	return s, nil
}

// Leader returns the client address of a partition's leader.
func (m *Metadata) Leader(ctx context.Context, topic string, partition int32) (string, error) {
	s, err := m.Get(ctx)
	if err != nil {
		return "", err
	}
	t, ok := s.Topic(topic)
	if !ok {
		return "", protocol.UnknownTopicOrPartition.Err("no topic %q", topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return "", protocol.UnknownTopicOrPartition.Err("topic %q has no partition %d", topic, partition)
	}
	p := t.Partitions[partition]
	n, ok := s.Node(p.Leader)
	if !ok || p.Leader < 0 {
		return "", protocol.LeaderNotAvailable.Err("%s-%d has no leader", topic, partition)
	}
	if m.internal {
		return n.Addr, nil
	}
	return n.ClientAddr(), nil
}

// ReaderConfig configures a PartitionReader.
type ReaderConfig struct {
	MaxBytes int32         // per fetch (default 1 MiB)
	MaxWait  time.Duration // long-poll wait (default 500ms)
	ClientID string
	// Isolation is protocol.ReadUncommitted (default) or
	// protocol.ReadCommitted (stop at the last stable offset, drop aborted
	// transactions' records).
	Isolation int8
}

// PartitionReader reads one partition from an offset on. It is not safe for
// concurrent use.
type PartitionReader struct {
	Topic     string
	Partition int32

	cfg    ReaderConfig
	meta   *Metadata
	pool   *storageclient.Pool
	offset int64
	hw     int64
	lso    int64
	it     *record.Iterator
	last   int // records the previous fetch returned: the next one's capacity
	// throttledUntil is when the leader lets this client fetch again after a
	// fetch over its quota (the response's ThrottleMs).
	throttledUntil time.Time
}

// NewPartitionReader returns a reader positioned at offset.
func NewPartitionReader(meta *Metadata, pool *storageclient.Pool, topic string, partition int32, offset int64, cfg ReaderConfig) *PartitionReader {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	return &PartitionReader{Topic: topic, Partition: partition, cfg: cfg, meta: meta, pool: pool, offset: offset, hw: -1, lso: -1, it: record.NewIterator(nil)}
}

// Offset returns the next offset the reader will return.
func (r *PartitionReader) Offset() int64 { return r.offset }

// HighWatermark returns the high watermark seen by the last fetch (-1 before).
func (r *PartitionReader) HighWatermark() int64 { return r.hw }

// LastStableOffset returns the last stable offset seen by the last fetch
// (-1 before): where a read_committed reader waits.
func (r *PartitionReader) LastStableOffset() int64 { return r.lso }

// ListOffset asks the partition's leader for the earliest, latest or by-time offset.
func ListOffset(ctx context.Context, meta *Metadata, pool *storageclient.Pool, topic string, partition int32, ts int64) (int64, error) {
	return ListOffsetAt(ctx, meta, pool, topic, partition, ts, protocol.ReadUncommitted)
}

// ListOffsetAt is ListOffset at an isolation level: at
// protocol.ReadCommitted the latest offset is the last stable offset.
func ListOffsetAt(ctx context.Context, meta *Metadata, pool *storageclient.Pool, topic string, partition int32, ts int64, isolation int8) (int64, error) {
	var resp protocol.ListOffsetsResponse
	err := withLeader(ctx, meta, pool, topic, partition, func(c *storageclient.Conn) error {
		_, err := c.Call(ctx, protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: topic, Partition: partition, Timestamp: ts,
			CurrentLeaderEpoch: -1, Isolation: isolation}, nil, &resp)
		return err
	})
	return resp.Offset, err
}

// WriteTxnMarker has the partition's leader append a transaction marker
// (the transaction coordinator's call; see protocol.WriteTxnMarkerRequest)
// and returns its offset, following leader changes.
func WriteTxnMarker(ctx context.Context, meta *Metadata, pool *storageclient.Pool, req protocol.WriteTxnMarkerRequest) (int64, error) {
	var resp protocol.WriteTxnMarkerResponse
	err := withLeader(ctx, meta, pool, req.Topic, req.Partition, func(c *storageclient.Conn) error {
		_, err := c.Call(ctx, protocol.APIWriteTxnMarker, &req, nil, &resp)
		return err
	})
	return resp.Offset, err
}

// ProduceBatch appends one RecordBatch v2 to a partition with acks=all,
// following leader changes, and returns its base offset. A retried
// idempotent batch the leader still remembers answers its first offsets.
func ProduceBatch(ctx context.Context, meta *Metadata, pool *storageclient.Pool, topic string, partition int32, batch []byte) (int64, error) {
	var resp protocol.ProduceResponse
	err := withLeader(ctx, meta, pool, topic, partition, func(c *storageclient.Conn) error {
		_, err := c.Call(ctx, protocol.APIProduce, &protocol.ProduceRequest{Topic: topic, Partition: partition, Acks: protocol.AcksAll,
			TimeoutMs: int32(10 * time.Second / time.Millisecond)}, batch, &resp)
		return err
	})
	return resp.BaseOffset, err
}

// Fetch long-polls the leader once and returns the records at or after the
// reader's offset (possibly none), advancing the offset past them.
func (r *PartitionReader) Fetch(ctx context.Context) ([]record.Record, error) {
	resp, res, err := r.fetch(ctx)
	if err != nil {
		return nil, err
	}
	defer res.Release() // records are copied out below
	r.it.Reset(res.Payload)
	r.it.SetStartOffset(r.offset)
	if r.cfg.Isolation == protocol.ReadCommitted {
		r.it.SetAborted(resp.Aborted)
	}
	var out []record.Record
	if r.last > 0 {
		out = make([]record.Record, 0, r.last)
	}
	a := arena{size: len(res.Payload)}
	for r.it.Next() {
		out = append(out, a.record(r.it.Record()))
	}
	r.last = len(out)
	if err := r.it.Err(); err != nil {
		return out, fmt.Errorf("%s-%d at offset %d: %w", r.Topic, r.Partition, r.offset, err)
	}
	if next := r.it.NextOffset(); next > r.offset {
		r.offset = next
	}
	return out, nil
}

// FetchBatches long-polls the leader once and appends the whole batches of
// its answer to dst, as they are (possibly none; the first may start below
// the offset), advancing the offset past them. Each batch's length, header
// and CRC are checked (record.Validate), its records not: a record.Iterator
// over them with SetChecked does that, for the part it reads. It is for a
// reader of part of what it fetches, which decodes only that part; a
// read_committed reader, which needs the answer's aborted transactions,
// uses Fetch.
func (r *PartitionReader) FetchBatches(ctx context.Context, dst []byte) ([]byte, error) {
	_, res, err := r.fetch(ctx)
	if err != nil {
		return dst, err
	}
	defer res.Release()     // the batches are copied out below
	n, next := 0, int64(-1) // the whole batches' bytes, and the offset after them
	for {
		h, verr := record.Validate(res.Payload[n:])
		if verr != nil {
			if !errors.Is(verr, record.ErrShortBatch) { // else a trailing part or the end
				err = fmt.Errorf("batch at byte %d: %w", n, verr)
			}
			break
		}
		n += h.Size()
		next = max(next, h.LastOffset()+1)
	}
	dst = append(dst, res.Payload[:n]...)
	if next > r.offset {
		r.offset = next
	}
	if err != nil {
		return dst, fmt.Errorf("%s-%d at offset %d: %w", r.Topic, r.Partition, r.offset, err)
	}
	return dst, nil
}

// fetch long-polls the leader once from the reader's offset, after any
// throttle the leader asked for, and notes the answer's watermarks; the
// caller releases the result.
func (r *PartitionReader) fetch(ctx context.Context) (protocol.FetchResponse, storageclient.Result, error) {
	var resp protocol.FetchResponse
	var res storageclient.Result
	if wait := time.Until(r.throttledUntil); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return resp, res, ctx.Err()
		}
	}
	err := withLeader(ctx, r.meta, r.pool, r.Topic, r.Partition, func(c *storageclient.Conn) error {
		req := &protocol.FetchRequest{Topic: r.Topic, Partition: r.Partition, Offset: r.offset, MaxBytes: r.cfg.MaxBytes,
			MaxWaitMs: int32(r.cfg.MaxWait.Milliseconds()), MinBytes: 1, ReplicaID: -1, CurrentLeaderEpoch: -1, FlushedOffset: -1,
			Isolation: r.cfg.Isolation}
		var err error
		res, err = c.Call(ctx, protocol.APIFetch, req, nil, &resp)
		return err
	})
	if err != nil {
		return resp, res, err
	}
	r.hw, r.lso = resp.HighWatermark, resp.LastStableOffset
	if resp.ThrottleMs > 0 {
		r.throttledUntil = time.Now().Add(time.Duration(resp.ThrottleMs) * time.Millisecond)
	}
	return resp, res, nil
}

// withLeader runs f on a connection to the partition's leader, refreshing
// metadata and retrying a few times on retriable errors.
func withLeader(ctx context.Context, meta *Metadata, pool *storageclient.Pool, topic string, partition int32, f func(*storageclient.Conn) error) error {
	var err error
	backoff := 50 * time.Millisecond
	for attempt := 0; attempt < 6; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(backoff):
			}
			backoff *= 2
			if _, rerr := meta.Refresh(ctx); rerr != nil {
				err = rerr
				continue
			}
		}
		var addr string
		if addr, err = meta.Leader(ctx, topic, partition); err != nil {
			if storageclient.IsRetriable(err) {
				continue
			}
			return err
		}
		var c *storageclient.Conn
		if c, err = pool.Get(ctx, addr); err != nil {
			continue
		}
		if err = f(c); err == nil || !storageclient.IsRetriable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// arena copies the keys, values and header values of one fetch's records
// out of the pooled response buffer into a few large allocations instead of
// one or two per record: a record kept alive keeps its arena chunk alive.
type arena struct {
	size int // bytes of a new chunk (at least the slice being copied)
	buf  []byte
}

func (a *arena) record(r *record.Record) record.Record {
	c := *r
	c.Key = a.bytes(r.Key)
	c.Value = a.bytes(r.Value)
	if r.Headers != nil {
		c.Headers = make([]record.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = record.RecordHeader{Key: h.Key, Value: a.bytes(h.Value)}
		}
	}
	return c
}

// bytes copies b into the arena; the copy's capacity ends with it, so an
// append by the caller never writes over the next record.
func (a *arena) bytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) > cap(a.buf)-len(a.buf) {
		a.buf = make([]byte, 0, max(a.size, len(b)))
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}
