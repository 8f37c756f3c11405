package produce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
)

// Sentinel errors of a whole request (per-record errors are in Result.Err).
var (
	// ErrUnknownTopic: the topic is not in the cluster model, even after a
	// refresh (HTTP 404, UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownTopic = protocol.UnknownTopicOrPartition.Err("unknown topic")
	// ErrMetadataUnavailable: the frontend has no usable cluster model and the
	// metadata service does not answer (HTTP 503).
	ErrMetadataUnavailable = errors.New("cluster metadata unavailable")
)

// Metadata is the routing information the Producer needs; *metacache.Cache is
// one. Methods are called from request goroutines concurrently.
type Metadata interface {
	// Route returns the topic's current routing view.
	Route(topic string) (*metacache.Route, bool)
	// Refresh fetches the cluster model from the metadata service now.
	Refresh(ctx context.Context) (*cluster.Snapshot, error)
	// RefreshOlder is Refresh unless the model was heard from the metadata
	// service less than maxAge ago.
	RefreshOlder(ctx context.Context, maxAge time.Duration) (*cluster.Snapshot, error)
	// Changed returns a channel closed when a newer model is published.
	Changed() <-chan struct{}
}

// Sender sends one produce request to a storage node and returns its answer.
// It is called concurrently; requests for one partition are never in flight
// together from one produce request nor from one accumulator lane, and a
// Sender must keep the order of requests it is given on one address
// (storageclient's Conn does).
type Sender interface {
	Produce(ctx context.Context, addr string, req *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error)
}

// Result is the outcome of one record, in request order.
type Result struct {
	Partition int32
	Offset    int64 // valid when Err is nil
	Err       error
}

// Producer routes parsed records to partition leaders. It is safe for
// concurrent use and holds nothing beyond the requests it is serving. With
// Config.Linger > 0 it runs goroutines (one per partition with records
// waiting) that Close stops.
type Producer struct {
	cfg      Config
	meta     Metadata
	send     Sender
	sticky   stickyTable
	metrics  *Metrics
	budget   *Budget
	log      *slog.Logger
	now      func() time.Time
	builders sync.Pool    // *record.Builder, one per partition in flight
	acc      *accumulator // nil when Linger is 0
	ids      pidSource    // producer ids of the accumulator's lanes
}

// NewProducer returns a Producer. ids gives the accumulator's lanes their
// producer ids (idempotence.go); with ids nil their batches go unstamped.
// metrics and log may be nil.
func NewProducer(cfg Config, meta Metadata, send Sender, ids ProducerIDs, metrics *Metrics, log *slog.Logger) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Producer{cfg: cfg, meta: meta, send: send, metrics: metrics, log: log, now: time.Now}
	p.budget = NewBudget(cfg.MaxInFlightBytes, metrics)
	p.ids = pidSource{src: ids, log: log, backoff: cfg.RetryBackoff, timeout: min(pidTimeout, cfg.Timeout), cooldown: pidCooldown}
	p.builders.New = func() any { return record.NewBuilder(record.CodecNone) }
	if cfg.Linger > 0 {
		p.acc = newAccumulator(p, cfg.Linger, cfg.BatchMaxBytes)
	}
	return p, nil
}

// Close sends what the accumulator holds without lingering and waits for its
// goroutines, that is until every lingered batch is answered or abandoned by
// its requests (bounded by Config.Timeout). Records of later requests are
// sent as with Linger 0. The HTTP server stops first, so nothing is waiting
// by then in practice.
func (p *Producer) Close() {
	if p.acc != nil {
		p.acc.close()
	}
}

// Config returns the producer's configuration.
func (p *Producer) Config() Config { return p.cfg }

// Metrics returns the producer's metrics.
func (p *Producer) Metrics() *Metrics { return p.metrics }

// Budget returns the in-flight bytes budget the HTTP layer admits produce
// requests with.
func (p *Producer) Budget() *Budget { return p.budget }

// Produce appends recs to topic with the given acks and returns one Result
// per record in request order. The error is for the whole request:
// ErrUnknownTopic or ErrMetadataUnavailable (no results), or ErrTimedOut with
// the results (acknowledged records keep their offsets, the others say their
// outcome is unknown, or that they were never sent). Partitions are written
// concurrently. With Linger 0 the records of one partition go in one batch of
// their own, in request order; otherwise they join the partition's open
// batch with records of other requests (in request order, split over
// consecutive batches past BatchMaxBytes). Produce returns only when every
// batch has an answer, so the next request on the same client connection
// cannot overtake this one.
func (p *Producer) Produce(ctx context.Context, topic string, acks int8, recs []Input) ([]Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	route, err := p.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	results := make([]Result, len(recs))
	if route.Partitions() == 0 {
		err := protocol.LeaderNotAvailable.Err("topic %q has no partitions yet", topic)
		for i := range results {
			results[i] = Result{Partition: -1, Err: err}
		}
		p.metrics.Records.WithLabelValues("error").Add(float64(len(recs)))
		return results, nil
	}
	n := route.Partitions()
	pl := assign(recs, n, func() int32 { return p.sticky.pick(topic, n) })
	for i, err := range pl.rejected {
		results[i] = Result{Partition: recs[i].Partition, Err: err}
	}
	ts := p.now().UnixMilli()
	if p.acc != nil {
		p.produceLingered(ctx, dest{topic, acks, route}, pl.groups, recs, ts, results)
	} else if len(pl.groups) == 1 {
		p.produceGroup(ctx, dest{topic, acks, route}, &pl.groups[0], recs, ts, results)
	} else {
		var wg sync.WaitGroup
		for gi := range pl.groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.produceGroup(ctx, dest{topic, acks, route}, &pl.groups[gi], recs, ts, results)
			}()
		}
		wg.Wait()
	}
	var ok int
	timedOut := false
	for i := range results {
		if results[i].Err == nil {
			ok++
		} else if protocol.CodeOf(results[i].Err) == protocol.RequestTimedOut {
			timedOut = true
		}
	}
	p.countRecords(ok, len(results)-ok)
	if timedOut {
		return results, p.timedOut()
	}
	return results, nil
}

// countRecords adds to the records metric.
func (p *Producer) countRecords(ok, failed int) {
	p.metrics.Records.WithLabelValues("ok").Add(float64(ok))
	if failed > 0 {
		p.metrics.Records.WithLabelValues("error").Add(float64(failed))
	}
}

// route finds the topic, refreshing the model once when it is not there (it
// may have been created through another frontend a moment ago) and the model
// is older than UnknownTopicMaxAge.
func (p *Producer) route(ctx context.Context, topic string) (*metacache.Route, error) {
	if r, ok := p.meta.Route(topic); ok {
		return r, nil
	}
	snap, err := p.meta.RefreshOlder(ctx, p.cfg.UnknownTopicMaxAge)
	if r, ok := p.meta.Route(topic); ok {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMetadataUnavailable, err)
	}
	if snap == nil {
		return nil, ErrMetadataUnavailable
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownTopic, topic)
}

// produceGroup builds one partition's batch, sends it with retries and fills
// the results of its records. It writes only results[g.index...].
//
// The batch carries no producer id: concurrent requests to one partition
// cannot share a sequence without a lane to order them, so with Linger 0 (and
// after Close) record bodies are produced at least once (a resend after a
// lost answer may duplicate the batch, or land a late copy after a later
// one), as with a non-idempotent Kafka producer.
func (p *Producer) produceGroup(ctx context.Context, d dest, g *group, recs []Input, now int64, results []Result) {
	b := p.builders.Get().(*record.Builder)
	defer func() { b.Reset(); p.builders.Put(b) }()
	b.Reset()
	b.SetProducer(record.NoProducerID, record.NoProducerEpoch, record.NoSequence)
	for _, i := range g.index {
		rec := recs[i].Record
		if rec.Timestamp == 0 {
			rec.Timestamp = now
		}
		b.Append(rec)
	}
	batch, err := b.Build()
	var resp protocol.ProduceResponse
	if err == nil {
		p.metrics.BatchRecords.Observe(float64(len(g.index)))
		resp, err = p.sendWithRetry(ctx, partRequest{dest: d, partition: g.partition, batch: batch})
		err = p.settle(ctx, g.partition, err)
	} else if errors.Is(err, record.ErrTooLarge) {
		err = protocol.MessageTooLarge.Err("%v", err)
	}
	for j, i := range g.index {
		if err != nil {
			results[i] = Result{Partition: g.partition, Err: err}
		} else {
			results[i] = Result{Partition: g.partition, Offset: resp.BaseOffset + int64(j)}
		}
	}
	if err == nil {
		p.metrics.Bytes.Add(float64(len(batch)))
	}
}

// sendWithRetry sends batch to the partition's leader, and after a retriable
// error waits (backoff, cut short by a metadata change), refreshes the model
// and resends the same bytes to the leader it names. Nothing else of this
// request (or of this accumulator lane) is sent to the partition meanwhile,
// so the order holds.
//
// req.answers, when not nil, keeps the leader's last answer, so that a
// request whose time runs out while the batch is retried can say what the
// leader kept answering (a full disk, too few replicas).
func (p *Producer) sendWithRetry(ctx context.Context, req partRequest) (protocol.ProduceResponse, error) {
	backoff := p.cfg.RetryBackoff
	answers := req.answers
	if answers == nil {
		answers = &lastAnswer{}
	}
	part := req.partition
	openAt := -1 // an attempt that got no answer: it may have been appended
	for attempt := 0; ; attempt++ {
		resp, err := p.sendOnce(ctx, req)
		if err == nil {
			return resp, nil
		}
		answers.note(err)
		if attempt >= p.cfg.Retries || !retriable(err) || ctx.Err() != nil {
			if ctx.Err() != nil {
				err = answers.wrap(err)
			}
			if openAt >= 0 && !unanswered(err) && !decisive(err) {
				// The last answer speaks for the last attempt only: the one
				// that got none may be in the log, so the client must not
				// take this for a failure and send the records again.
				err = unknownOutcome{protocol.RequestTimedOut.Err("outcome unknown: attempt %d to the leader of partition %d got no answer and may have been stored; the last attempt's answer: %v",
					openAt+1, part, err)}
			}
			return resp, err
		}
		if openAt < 0 && unanswered(err) {
			openAt = attempt
		}
		p.metrics.Retries.Inc()
		p.log.Debug("produce retry", "topic", req.topic, "partition", part, "attempt", attempt+1, "err", err)
		changed := p.meta.Changed()
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return resp, err // err is the leader's answer or a transport error: kept as it is
		}
		backoff = min(2*backoff, p.cfg.MaxRetryBackoff)
		_, _ = p.meta.Refresh(ctx) // on failure the held view is used again
		r, ok := p.meta.Route(req.topic)
		if !ok {
			return resp, protocol.UnknownTopicOrPartition.Err("topic %q was deleted", req.topic)
		}
		req.route = r
	}
}

// dest is where a produce request's batches go: a topic, with the acks the
// client asked for, through the metadata view the request started with.
type dest struct {
	topic string
	acks  int8
	route *metacache.Route
}

// partRequest is one partition's batch of a produce request, as
// sendWithRetry sends it; route moves on to a new view after a retriable
// error.
type partRequest struct {
	dest
	partition int32
	batch     []byte
	answers   *lastAnswer // nil: not kept
}

func (p *Producer) sendOnce(ctx context.Context, req partRequest) (protocol.ProduceResponse, error) {
	addr := req.route.Leader(req.partition)
	if addr == "" {
		return protocol.ProduceResponse{}, protocol.LeaderNotAvailable.Err("partition %d of %q has no leader", req.partition, req.topic)
	}
	wire := protocol.ProduceRequest{Topic: req.topic, Partition: req.partition, Acks: req.acks, TimeoutMs: storageTimeoutMs(ctx, p.cfg.Timeout)}
	return p.send.Produce(ctx, addr, &wire, req.batch)
}

// lastAnswer is the last error a partition leader answered a send with (not
// a lost connection, not a timeout).
type lastAnswer struct{ err atomic.Pointer[error] }

func (a *lastAnswer) note(err error) {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code != protocol.NetworkException && pe.Code != protocol.RequestTimedOut {
		a.err.Store(&err)
	}
}

// wrap adds the last answer to err, the error of a send cut short.
func (a *lastAnswer) wrap(err error) error {
	if last := a.err.Load(); last != nil && *last != err {
		return fmt.Errorf("%w; the leader's last answer: %v", err, *last)
	}
	return err
}

// unanswered reports whether a failed attempt got no answer from the leader
// (a lost connection, a call cut short): it may have been appended. One that
// never left (no connection to the leader) was not.
func unanswered(err error) bool {
	var ns neverSent
	if errors.As(err, &ns) {
		return false
	}
	var pe *protocol.Error
	return !errors.As(err, &pe) || pe.Code == protocol.NetworkException
}

// decisive reports whether err settles the batch's outcome whatever an
// earlier attempt did (protocol's produce outcome table).
func decisive(err error) bool { return protocol.CodeOf(err).Produce().Settles }

// retriable reports whether resending the same batch may succeed: what
// protocol's produce outcome table resends, except a batch the leader holds
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND) and REQUEST_TIMED_OUT: the leader's
// timeout is this request's own less a margin (storageTimeoutMs), so no time
// is left for another attempt. Resends after a broken connection may
// duplicate a batch without a producer id (a batches-body batch without one,
// a record-body batch built with Linger 0 or while no id could be had):
// delivery is at-least-once for those, as with a non-idempotent Kafka
// producer. A batch with a producer id (the SDK's, or an accumulator lane's)
// is safe to resend: the leader answers a duplicate with its original
// offsets and refuses a sequence out of order.
func retriable(err error) bool {
	c := protocol.CodeOf(err)
	return c.Resend() && c.Produce().Appended != protocol.AppendedYes && c != protocol.RequestTimedOut
}
