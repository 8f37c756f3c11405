package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// Errors of the ShareConsumer.
var (
	// ErrInvalidShareConsumerConfig wraps every problem NewShareConsumer
	// finds in a configuration.
	ErrInvalidShareConsumerConfig = errors.New("client: invalid share consumer config")
	// ErrAckRefused is what an *AckRefusedError is: the coordinator
	// refused acknowledgements (their locks expired, the records went to
	// another consumer) and the records' state did not change.
	ErrAckRefused = errors.New("client: acknowledgement refused")
)

// AckRefusedError lists the partitions whose acknowledgements the
// coordinator refused, with its reasons; the other partitions' applied.
type AckRefusedError struct {
	Refused map[groups.TP]error
}

func (e *AckRefusedError) Error() string {
	tps := make([]groups.TP, 0, len(e.Refused))
	for tp := range e.Refused {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].Less(tps[j]) })
	msg := ErrAckRefused.Error()
	for _, tp := range tps {
		msg += fmt.Sprintf("; %s: %v", tp, e.Refused[tp])
	}
	return msg
}

// Is makes errors.Is(err, ErrAckRefused) true.
func (e *AckRefusedError) Is(target error) bool { return target == ErrAckRefused }

// ShareConsumerConfig configures a ShareConsumer. Zero fields take the
// defaults documented on them.
type ShareConsumerConfig struct {
	// Metadata lists metadata (or frontend) addresses, for partition
	// leaders; Offsets lists the offsets service's replicas.
	Metadata []string
	Offsets  []string
	// Group is the share group, Topic the topic it reads.
	Group string
	Topic string
	// MemberID names this consumer to the group (default: a random id).
	MemberID string
	// ClientID names this client to the storage nodes (default
	// "sluice-share-consumer").
	ClientID string
	// MaxRecords bounds one Poll (0: the group's share.max.fetch.records).
	MaxRecords int32
	// MaxWait is how long a Poll waits for records (default 500ms).
	MaxWait time.Duration
	// FetchMaxBytes bounds one fetch from a partition leader (default 1 MiB).
	FetchMaxBytes int32
	// TLS, when set, is used for every connection.
	TLS *tls.Config
}

// Validate checks the configuration.
func (c ShareConsumerConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidShareConsumerConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case len(c.Metadata) == 0 || len(c.Offsets) == 0:
		return bad("Metadata and Offsets need an address each at least")
	case c.MaxRecords < 0 || c.MaxWait < 0 || c.FetchMaxBytes < 0:
		return bad("MaxRecords, MaxWait and FetchMaxBytes must not be negative")
	}
	if err := groups.ValidateGroupID(c.Group); err != nil {
		return bad("Group: %v", err)
	}
	if err := cluster.ValidateTopicName(c.Topic); err != nil {
		return bad("Topic: %v", err)
	}
	return nil
}

// ShareRecord is a record acquired by a ShareConsumer: it must be
// acknowledged before LockUntil, or it goes to another consumer.
type ShareRecord struct {
	ConsumerRecord
	// DeliveryCount counts this delivery: 1 the first time.
	DeliveryCount int16
	LockUntil     time.Time
}

// ShareConsumer is a consumer of a share group: Poll acquires records of
// the topic (from any partition; other consumers of the group get others)
// and each one is acknowledged with Acknowledge. Acknowledgements are sent
// by the next Poll, by Commit, or by Close. A record not acknowledged when
// its lock expires, or when the consumer closes, goes to another consumer.
//
// Poll, Commit and Close are meant for one goroutine; Acknowledge is safe
// from any.
type ShareConsumer struct {
	cfg    ShareConsumerConfig
	coord  *shares.Client
	meta   *Metadata
	pool   *storageclient.Pool
	rcfg   ReaderConfig
	member string
	parts  map[int32]*sharePartition // Poll's goroutine only

	mu      sync.Mutex // guards pending and closed
	pending []shares.Ack
	closed  bool
}

// sharePartition is what a ShareConsumer read of a partition and did not
// hand out yet: the batches after the last acquired range, as fetched, and
// the reader positioned after them. The records of a range are decoded
// when it is acquired, and only they: the members of a group take turns on
// a partition, so each reads batches of which it is given a part.
type sharePartition struct {
	reader  *PartitionReader
	from    int64  // first offset the batches are kept for
	batches []byte // whole batches, checked, from the one holding `from` to the reader's offset
	it      record.Iterator
}

// NewShareConsumer validates cfg and returns a consumer; it contacts the
// cluster at its first Poll.
func NewShareConsumer(cfg ShareConsumerConfig) (*ShareConsumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "sluice-share-consumer"
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.MemberID == "" {
		cfg.MemberID = groups.NewMemberID(cfg.ClientID)
	}
	return &ShareConsumer{
		cfg:    cfg,
		coord:  shares.NewClientTLS(cfg.Offsets, cfg.TLS),
		meta:   NewMetadata(cluster.NewClientTLS(cfg.Metadata, cfg.TLS)),
		pool:   storageclient.NewPoolTLS(cfg.ClientID, cfg.TLS),
		rcfg:   ReaderConfig{MaxBytes: cfg.FetchMaxBytes, MaxWait: 100 * time.Millisecond, ClientID: cfg.ClientID},
		member: cfg.MemberID,
		parts:  map[int32]*sharePartition{},
	}, nil
}

// MemberID returns the consumer's id in the group.
func (c *ShareConsumer) MemberID() string { return c.member }

// Acknowledge marks a record accepted, released or rejected; the next Poll,
// Commit or Close sends it.
func (c *ShareConsumer) Acknowledge(r ShareRecord, t shares.AckType) {
	c.add(shares.Ack{Topic: r.Topic, Partition: r.Partition, FirstOffset: r.Offset, LastOffset: r.Offset, Type: t})
}

// Reject rejects a record, giving the reason (for the dead-letter topic).
func (c *ShareConsumer) Reject(r ShareRecord, reason string) {
	c.add(shares.Ack{Topic: r.Topic, Partition: r.Partition, FirstOffset: r.Offset, LastOffset: r.Offset, Type: shares.AckReject, Reason: reason})
}

func (c *ShareConsumer) add(a shares.Ack) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.pending); n > 0 && c.pending[n-1].Extends(a) {
		c.pending[n-1].LastOffset = a.LastOffset // records acknowledged in order, as most are
		return
	}
	c.pending = append(c.pending, a)
}

// takePending takes the pending acknowledgements, merged, to send them
// (closing the consumer with closing); ok is false when it was closed
// already.
func (c *ShareConsumer) takePending(closing bool) (acks []shares.Ack, ok bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false
	}
	pending := c.pending
	c.pending, c.closed = nil, closing
	c.mu.Unlock()
	return mergeAcks(pending), true
}

// Commit sends the pending acknowledgements. Refused ones come back as an
// *AckRefusedError; the other partitions' applied. On any other error
// (the coordinator could not be reached) the acknowledgements may or may
// not have applied; the records' locks settle it.
func (c *ShareConsumer) Commit(ctx context.Context) error {
	acks, ok := c.takePending(false)
	if !ok {
		return ErrConsumerClosed
	}
	return c.send(ctx, acks)
}

func (c *ShareConsumer) send(ctx context.Context, acks []shares.Ack) error {
	if len(acks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.coord.Ack(ctx, c.cfg.Group, shares.AckRequest{MemberID: c.member, Acks: acks})
	if err != nil {
		return err
	}
	return ackOutcome(resp.Results)
}

// ackOutcome is nil when every partition's acknowledgements applied, an
// *AckRefusedError naming the others otherwise.
func ackOutcome(results []shares.AckResult) error {
	var refused map[groups.TP]error
	for _, r := range results {
		if r.ErrorCode != 0 {
			if refused == nil {
				refused = map[groups.TP]error{}
			}
			refused[groups.TP{Topic: r.Topic, Partition: r.Partition}] = protocol.Code(r.ErrorCode).Err("%s", r.Error)
		}
	}
	if refused != nil {
		return &AckRefusedError{Refused: refused}
	}
	return nil
}

// mergeAcks sorts acknowledgements and joins neighbours of one kind (and
// reason) into ranges.
func mergeAcks(in []shares.Ack) []shares.Ack {
	sort.SliceStable(in, func(i, j int) bool {
		a, b := in[i], in[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.FirstOffset < b.FirstOffset
	})
	var out []shares.Ack
	for _, a := range in {
		if n := len(out); n > 0 && out[n-1].Extends(a) {
			out[n-1].LastOffset = a.LastOffset
			continue
		}
		out = append(out, a)
	}
	return out
}

// Poll sends the pending acknowledgements with a request for records (one
// step at the coordinator: what they free can be taken at once), then
// reads the records acquired from the partition leaders. It waits up to
// MaxWait for records and returns none when there were none. A refused
// acknowledgement is returned as Commit returns it, with the records
// acquired; when the request fails, the acknowledgements' outcome is
// unknown, as with Commit.
func (c *ShareConsumer) Poll(ctx context.Context) ([]ShareRecord, error) {
	acks, ok := c.takePending(false)
	if !ok {
		return nil, ErrConsumerClosed
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.MaxWait+requestTimeout)
	resp, err := c.coord.Acquire(actx, c.cfg.Group, shares.AcquireRequest{MemberID: c.member, Topic: c.cfg.Topic,
		MaxRecords: c.cfg.MaxRecords, WaitMs: int32(c.cfg.MaxWait.Milliseconds()), Acks: acks})
	cancel()
	if err != nil {
		return nil, err
	}
	ackErr := ackOutcome(resp.AckResults)
	if len(acks) > 0 && len(resp.AckResults) == 0 {
		// An offsets service older than acknowledgements on acquisitions
		// ignored them: send them on their own.
		ackErr = c.send(ctx, acks)
	}
	lock := time.UnixMilli(resp.LockUntilMs)
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var delayMs int64
	if len(resp.Acquired) > 0 {
		snap, _ := c.meta.Get(rctx) // no snapshot: the partition reads below fail and say why
		delayMs = shares.TopicDelayMs(snap, c.cfg.Topic)
	}
	now := time.Now().UnixMilli()
	n := int64(0)
	for _, a := range resp.Acquired {
		n += a.LastOffset - a.FirstOffset + 1
	}
	out := make([]ShareRecord, 0, min(n, maxPresize))
	var gaps []shares.Ack
	for i, a := range resp.Acquired {
		recs, missing, err := c.read(rctx, a)
		if err != nil {
			// Give what could not be read back at once rather than at
			// the lock's expiry.
			_ = c.send(ctx, mergeAcks(append(gaps, shares.Releases(resp.Acquired[i:])...)))
			return out, errors.Join(ackErr, err)
		}
		for _, r := range recs {
			if at := shares.DeliverAt(r.Headers, r.Timestamp, delayMs); at > now {
				// Too early: back to the group until its time, not
				// counted as a delivery.
				gaps = append(gaps, shares.Ack{Topic: a.Topic, Partition: a.Partition, FirstOffset: r.Offset, LastOffset: r.Offset, Type: shares.AckDefer, NotBeforeMs: at})
				continue
			}
			out = append(out, ShareRecord{ConsumerRecord: ConsumerRecord{Topic: a.Topic, Partition: a.Partition, Record: r}, DeliveryCount: a.DeliveryCount, LockUntil: lock})
		}
		gaps = append(gaps, missing...)
	}
	if len(gaps) > 0 {
		// Sent at once, so deferred records are not held until the next
		// Poll; a failure leaves them to the lock's expiry.
		_ = c.send(ctx, mergeAcks(gaps))
	}
	return out, ackErr
}

// read returns the records of an acquired range, and GAP acknowledgements
// for its offsets that hold none (compacted away, transaction markers).
func (c *ShareConsumer) read(ctx context.Context, a shares.Acquired) ([]record.Record, []shares.Ack, error) {
	p := c.parts[a.Partition]
	if p == nil || a.FirstOffset < p.from || a.FirstOffset > p.reader.Offset() {
		p = &sharePartition{reader: NewPartitionReader(c.meta, c.pool, a.Topic, a.Partition, a.FirstOffset, c.rcfg), from: a.FirstOffset}
		c.parts[a.Partition] = p
	}
	for empty := 0; p.reader.Offset() <= a.LastOffset; {
		at := p.reader.Offset()
		var err error
		p.batches, err = p.reader.FetchBatches(ctx, p.batches)
		if err != nil && p.reader.Offset() > a.LastOffset {
			break // the range was read whole: the next fetch meets the error again
		}
		if err == nil && p.reader.Offset() == at {
			if empty++; empty == 20 {
				err = fmt.Errorf("%s-%d: no record at offset %d though it was acquired below the high watermark", a.Topic, a.Partition, at)
			}
		}
		if err != nil {
			delete(c.parts, a.Partition)
			return nil, nil, err
		}
	}
	out := make([]record.Record, 0, min(a.LastOffset-a.FirstOffset+1, maxPresize))
	next := a.FirstOffset // the first offset not yet accounted for
	var gaps []shares.Ack
	gap := func(upTo int64) { // offsets next..upTo-1 hold no record
		if upTo > next {
			gaps = append(gaps, shares.Ack{Topic: a.Topic, Partition: a.Partition, FirstOffset: next, LastOffset: upTo - 1, Type: shares.AckGap})
		}
	}
	p.it.Reset(p.batches)
	p.it.SetChecked(true) // by FetchBatches
	p.it.SetStartOffset(a.FirstOffset)
	p.it.SetEndOffset(a.LastOffset)
	ar := arena{size: shareArenaSize}
	for p.it.Next() {
		r := p.it.Record()
		gap(r.Offset)
		out = append(out, ar.record(r))
		next = r.Offset + 1
	}
	if err := p.it.Err(); err != nil {
		delete(c.parts, a.Partition)
		return nil, nil, fmt.Errorf("%s-%d at offset %d: %w", a.Topic, a.Partition, a.FirstOffset, err)
	}
	gap(a.LastOffset + 1)
	// Keep the batches from the one that holds the range's next offset,
	// moved to the front so that the buffer is reused (the records were
	// copied out).
	p.batches = p.batches[:copy(p.batches, p.batches[batchesThrough(p.batches, a.LastOffset):])]
	p.from = a.LastOffset + 1
	return out, gaps, nil
}

// maxPresize bounds the room made for an acquisition's records before they
// are read.
const maxPresize = 1 << 16

// shareArenaSize is the size of the chunks an acquired range's records are
// copied into: 500 records of 100 bytes (the default acquisition) fit one.
const shareArenaSize = 64 << 10

// batchesThrough returns how many bytes at the start of b are whole
// batches that end at or below offset.
func batchesThrough(b []byte, offset int64) int {
	n := 0
	for n < len(b) {
		h, err := record.ParseHeader(b[n:])
		if err != nil || h.LastOffset() > offset || h.Size() > len(b)-n {
			break
		}
		n += h.Size()
	}
	return n
}

// Close sends the pending acknowledgements and releases the records the
// consumer still holds, so others get them at once.
func (c *ShareConsumer) Close(ctx context.Context) error {
	acks, ok := c.takePending(true)
	if !ok {
		return nil
	}
	err := c.send(ctx, acks)
	if lerr := c.coord.Leave(ctx, c.cfg.Group, c.member); lerr != nil {
		err = errors.Join(err, lerr)
	}
	_ = c.pool.Close()
	return err
}
