package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/partitioner"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/txns"
)

// ProducerRecord is a record to send.
type ProducerRecord struct {
	Topic string
	// Partition is the partition to write to; -1 (or any negative value)
	// lets the producer pick: murmur2 of the key for keyed records (Kafka's
	// choice), one sticky partition per batch for keyless ones.
	Partition int32
	Key       []byte
	Value     []byte
	Headers   []record.RecordHeader
	// Timestamp in Unix milliseconds; 0 takes the time of Send.
	Timestamp int64
}

// RecordMetadata is a record's outcome.
type RecordMetadata struct {
	Topic     string
	Partition int32
	// Offset is the record's offset when Err is nil; -1 when the record was
	// written by an earlier attempt whose answer was lost and whose offset
	// the leader no longer remembers (DUPLICATE_SEQUENCE_NUMBER).
	Offset int64
	Err    error
}

// Producer sends records to Sluice through the frontends, asynchronously: it
// batches records per partition (Linger, BatchSize), compresses batches,
// keeps one batch per partition in flight so the partition's order is the
// order of Send, retries what may succeed on retry (the same bytes: with
// idempotence on, the leader drops a batch it already holds and answers its
// offsets), and calls each record's callback once with its offset or error.
// It is safe for concurrent use.
type Producer struct {
	cfg  ProducerConfig
	log  *slog.Logger
	meta *cluster.Client
	fe   *frontends

	mu       sync.Mutex
	topics   map[string]*topicState // guarded by mu
	buffered int64                  // bytes of records not yet answered; guarded by mu
	freed    chan struct{}          // closed and replaced when buffer space frees; guarded by mu
	flushing int                    // Flush and Produce calls in progress: linger is skipped; guarded by mu
	inFlight int                    // requests in flight; guarded by mu
	closed   bool                   // guarded by mu
	ident    producerIdentity       // guarded by mu
	txn      *txnState              // nil unless TransactionalID is set (producer_txn.go)

	// builders are the batch builders not in use, kept (up to maxFreeBuilders)
	// with their grown buffers; a sync.Pool would drop them at every GC.
	// Guarded by mu.
	builders []*record.Builder
	ctx      context.Context    // ends when Close gives up on what is in flight
	cancel   context.CancelFunc //
	wake     chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup // the sender loop and the request goroutines
}

// producerIdentity is the idempotent producer's id and epoch; gen counts
// the (id, epoch) pairs used, so partitions restart their sequences on a new
// one.
type producerIdentity struct {
	id    int64
	epoch int16
	gen   int
	stale bool // no id yet, or none left to raise: get a new id before the next batch
}

type topicState struct {
	name       string
	partitions int
	// stale is set by expiry, MetadataMaxAge after the last refresh (or a
	// second after a failed one): Send checks a flag, not the clock.
	stale  atomic.Bool
	expiry *time.Timer // guarded by Producer.mu
	sticky *partitioner.Sticky
	parts  map[int32]*partState
}

// partState is one partition's accumulator.
type partState struct {
	topic     string
	partition int32
	queue     []*batchBuf // oldest first; the last one takes new records
	inFlight  *batchBuf   // the partition's batch being delivered, nil when none
	seq       int32       // the next sequence number under identity gen
	gen       int
}

// batchBuf is a batch being built, or sealed and being delivered.
type batchBuf struct {
	part    *partState
	b       *record.Builder
	cbs     []func(RecordMetadata)
	sizes   int64 // buffer bytes its records hold
	created time.Time
	bytes   []byte        // the sealed batch
	done    chan struct{} // closed once every record has its outcome
	gen     int           // the producer identity it was stamped with (producerIdentity.gen)
}

// NewProducer validates cfg and starts the sender.
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Producer{cfg: cfg, log: cfg.Logger.With("client_id", cfg.ClientID), meta: cluster.NewClientTLS(cfg.Metadata, cfg.TLS).WithToken(cfg.Token),
		fe: newFrontends(cfg.Frontends, cfg.MaxInFlight, cfg.ClientID, cfg.Token, cfg.TransactionalID, cfg.TLS), topics: map[string]*topicState{},
		freed: make(chan struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if len(p.fe.urls) == 0 {
		return nil, fmt.Errorf("%w: Frontends holds no usable address", ErrInvalidProducerConfig)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.ident.id, p.ident.epoch = record.NoProducerID, record.NoProducerEpoch
	if !cfg.DisableIdempotence {
		// Fetched by the sender before its first batch; a transactional
		// producer's by BeginTxn.
		p.ident.stale = true
	}
	if cfg.TransactionalID != "" {
		p.txn = &txnState{id: cfg.TransactionalID, coord: txns.NewClientTLS(nonEmpty(cfg.Offsets), cfg.TLS)}
	}
	p.wg.Add(1)
	go p.runSender()
	return p, nil
}

// Send queues rec; cb (which may be nil) is called once with its outcome,
// from a producer goroutine, the callbacks of one partition in send order
// (a partition's next batch waits for them): it must not block, and must
// not call Flush, Produce, Close, CommitTxn or AbortTxn (they wait for
// callbacks to finish). A
// callback may Send, but with the buffer full that Send waits (up to
// MaxBlock) while its partition's queue cannot go, as in Kafka. Send blocks
// while the buffer is full (up to MaxBlock or ctx), and fails at once for a
// closed producer, an unknown topic or a partition out of range.
func (p *Producer) Send(ctx context.Context, rec ProducerRecord, cb func(RecordMetadata)) error {
	t, err := p.topic(ctx, rec.Topic)
	if err != nil {
		return err
	}
	if rec.Timestamp == 0 {
		rec.Timestamp = time.Now().UnixMilli()
	}
	r := record.Record{Timestamp: rec.Timestamp, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
	size := int64(len(rec.Key) + len(rec.Value) + 32)
	for _, h := range rec.Headers {
		size += int64(len(h.Key) + len(h.Value))
	}
	if size > int64(p.cfg.BatchSize) {
		return protocol.MessageTooLarge.Err("record of %d bytes is larger than BatchSize %d", size, p.cfg.BatchSize)
	}
	if err := p.reserve(ctx, size); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.releaseLocked(size)
		return ErrProducerClosed
	}
	if x := p.txn; x != nil {
		if err := x.sendableLocked(); err != nil {
			p.releaseLocked(size)
			return err
		}
	}
	part, err := p.pickLocked(t, rec)
	if err != nil {
		p.releaseLocked(size)
		return err
	}
	if p.txn != nil {
		p.txn.wrote = true
	}
	ps := t.parts[part]
	if ps == nil {
		ps = &partState{topic: t.name, partition: part}
		t.parts[part] = ps
	}
	last := len(ps.queue) - 1
	if last < 0 || ps.queue[last].b.SizeWith(r) > p.cfg.BatchSize {
		if last >= 0 && rec.Partition < 0 && rec.Key == nil {
			// The sticky partition's batch is full: the next keyless
			// records start a batch elsewhere (this one still goes here).
			t.sticky.NextAfter(int(part))
		}
		b := p.builderLocked()
		ps.queue = append(ps.queue, &batchBuf{part: ps, b: b, created: time.Now(), done: make(chan struct{})})
		last++
		p.signal()
	}
	bb := ps.queue[last]
	bb.b.Append(r)
	bb.cbs = append(bb.cbs, cb)
	bb.sizes += size
	if bb.b.Size() >= p.cfg.BatchSize || p.cfg.Linger < 0 {
		p.signal()
	}
	return nil
}

// pickLocked chooses rec's partition.
func (p *Producer) pickLocked(t *topicState, rec ProducerRecord) (int32, error) {
	switch {
	case rec.Partition >= 0:
		if int(rec.Partition) >= t.partitions {
			return 0, protocol.UnknownTopicOrPartition.Err("topic %q has %d partitions, not %d", t.name, t.partitions, rec.Partition+1)
		}
		return rec.Partition, nil
	case rec.Key != nil:
		return int32(partitioner.ForKey(rec.Key, t.partitions)), nil
	}
	return int32(t.sticky.Partition()), nil
}

// Produce sends one record at once (without waiting for the linger) and
// waits for its outcome. When ctx ends first the outcome is unknown: the
// record may still be written.
func (p *Producer) Produce(ctx context.Context, rec ProducerRecord) (RecordMetadata, error) {
	done := make(chan RecordMetadata, 1)
	p.mu.Lock()
	p.flushing++ // no linger while we wait
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	if err := p.Send(ctx, rec, func(m RecordMetadata) { done <- m }); err != nil {
		return RecordMetadata{Topic: rec.Topic, Partition: rec.Partition, Offset: -1, Err: err}, err
	}
	p.signal()
	select {
	case m := <-done:
		return m, m.Err
	case <-ctx.Done():
		select {
		case m := <-done: // both ready: the outcome wins
			return m, m.Err
		default:
		}
		return RecordMetadata{Topic: rec.Topic, Partition: rec.Partition, Offset: -1, Err: ctx.Err()}, ctx.Err()
	}
}

// Flush sends at once every record Send accepted before the call and waits
// until each has its outcome (or ctx ends). Records sent meanwhile by other
// goroutines are not waited for.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	var waits []chan struct{}
	for _, t := range p.topics {
		for _, ps := range t.parts {
			if ps.inFlight != nil {
				waits = append(waits, ps.inFlight.done)
			}
			for _, bb := range ps.queue {
				waits = append(waits, bb.done)
			}
		}
	}
	p.flushing++
	p.mu.Unlock()
	p.signal()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	for i, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return fmt.Errorf("flush: %d batches still pending: %w", len(waits)-i, ctx.Err())
		}
	}
	return nil
}

// Close stops taking records, sends what is buffered and waits for the
// outcomes (bounded by ctx; records still pending then get
// ErrProducerClosed), and stops the producer's goroutines.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return nil
	}
	err := p.Flush(ctx)
	p.cancel() // what is still in flight gives up
	close(p.stop)
	p.wg.Wait()
	var abandoned []completion
	p.mu.Lock()
	for _, t := range p.topics {
		if t.expiry != nil {
			t.expiry.Stop()
		}
		for _, ps := range t.parts {
			for _, bb := range ps.queue {
				abandoned = append(abandoned, p.finishLocked(bb, 0, ErrProducerClosed))
			}
			ps.queue = nil
		}
	}
	p.mu.Unlock()
	for _, c := range abandoned {
		c.run()
	}
	p.fe.close()
	return err
}

// reserve takes size bytes of buffer, waiting while it is full.
func (p *Producer) reserve(ctx context.Context, size int64) error {
	var timeout <-chan time.Time
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return ErrProducerClosed
		}
		if p.buffered+size <= p.cfg.BufferMemory || p.buffered == 0 {
			p.buffered += size
			p.mu.Unlock()
			return nil
		}
		freed := p.freed
		p.mu.Unlock()
		if p.cfg.NoBlockOnBufferFull {
			return ErrBufferFull
		}
		if timeout == nil {
			t := time.NewTimer(p.cfg.MaxBlock)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return fmt.Errorf("%w for %v", ErrBufferFull, p.cfg.MaxBlock)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *Producer) releaseLocked(size int64) {
	p.buffered -= size
	close(p.freed)
	p.freed = make(chan struct{})
}

// completion is a finished batch's callbacks, run outside the lock (a
// callback may call Send).
type completion struct {
	done      chan struct{}
	topic     string
	partition int32
	base      int64
	err       error
	cbs       []func(RecordMetadata)
}

func (c completion) run() {
	for i, cb := range c.cbs {
		if cb == nil {
			continue
		}
		m := RecordMetadata{Topic: c.topic, Partition: c.partition, Offset: -1, Err: c.err}
		if c.err == nil && c.base >= 0 {
			m.Offset = c.base + int64(i)
		}
		cb(m)
	}
	close(c.done) // only now are the records done: Flush returns after their callbacks
}

// finishLocked frees what a batch's records held and returns their outcome
// for the caller to run once it released the lock.
func (p *Producer) finishLocked(bb *batchBuf, base int64, err error) completion {
	c := completion{done: bb.done, topic: bb.part.topic, partition: bb.part.partition, base: base, err: err, cbs: bb.cbs}
	p.releaseLocked(bb.sizes)
	if len(p.builders) < maxFreeBuilders {
		p.builders = append(p.builders, bb.b)
	}
	bb.b, bb.cbs, bb.bytes = nil, nil, nil
	return c
}

// maxFreeBuilders bounds the idle batch builders a producer keeps.
const maxFreeBuilders = 64

// builderLocked returns an empty batch builder, an idle one when there is
// one. p.mu must be held.
func (p *Producer) builderLocked() *record.Builder {
	n := len(p.builders)
	if n == 0 {
		b := record.NewBuilder(p.cfg.Compression)
		b.Reset()
		return b
	}
	b := p.builders[n-1]
	p.builders[n-1] = nil
	p.builders = p.builders[:n-1]
	b.Reset()
	return b
}

func (p *Producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// topic returns the topic's state, reading its partition count when unknown
// or older than MetadataMaxAge.
func (p *Producer) topic(ctx context.Context, name string) (*topicState, error) {
	p.mu.Lock()
	t := p.topics[name]
	p.mu.Unlock()
	if t != nil && !t.stale.Load() {
		return t, nil
	}
	if t == nil { // a known topic's name was checked when it was first met
		if err := cluster.ValidateTopicName(name); err != nil {
			return nil, protocol.InvalidTopic.Err("%v", err)
		}
	}
	desc, err := p.meta.DescribeTopic(ctx, name)
	if err != nil {
		if t != nil { // keep producing with the count we know; retry in a while
			p.log.Warn("refreshing topic metadata failed", "topic", name, "err", err)
			p.mu.Lock()
			p.expireLocked(t, min(p.cfg.MetadataMaxAge, time.Second))
			p.mu.Unlock()
			return t, nil
		}
		return nil, fmt.Errorf("topic %q: %w", name, err)
	}
	n := len(desc.Partitions)
	if n == 0 {
		return nil, protocol.LeaderNotAvailable.Err("topic %q has no partitions yet", name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t = p.topics[name]; t == nil {
		t = &topicState{name: name, sticky: partitioner.NewSticky(n), parts: map[int32]*partState{}}
		p.topics[name] = t
	}
	t.partitions = n
	t.sticky.SetPartitions(n)
	p.expireLocked(t, p.cfg.MetadataMaxAge)
	return t, nil
}

// expireLocked marks t fresh until after d. p.mu must be held; Close stops
// the timers.
func (p *Producer) expireLocked(t *topicState, d time.Duration) {
	t.stale.Store(false)
	if p.closed {
		return
	}
	if t.expiry == nil {
		t.expiry = time.AfterFunc(d, func() { t.stale.Store(true) })
		return
	}
	t.expiry.Reset(d)
}

// errDeliveryTimeout is given to records not answered within DeliveryTimeout.
var errDeliveryTimeout = errors.New("delivery timeout")
