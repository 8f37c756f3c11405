package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// requestTimeout bounds the consumer's own requests made on the Poll
// goroutine (commits, committed-offset look-ups, offset resets), so a short
// Poll context cannot starve a rebalance step.
const requestTimeout = 10 * time.Second

// ConsumerRecord is a record with the partition it came from.
type ConsumerRecord struct {
	Topic     string
	Partition int32
	record.Record
}

// TP returns the record's topic partition.
func (r ConsumerRecord) TP() groups.TP { return groups.TP{Topic: r.Topic, Partition: r.Partition} }

// Consumer is a member of a consumer group: the offsets service assigns it
// partitions of its subscription and it reads them from their leaders. See
// the package doc for its lifecycle and guarantees.
//
// Goroutines: one group goroutine (heartbeats) and one fetcher per owned
// partition, started and stopped by the Consumer; Poll's caller runs every
// rebalance step and callback. Concurrent Polls are serialised (meant for
// one polling goroutine); Close may be called from any goroutine and
// interrupts a blocked Poll; the other methods are safe from any goroutine,
// callbacks included. Callbacks must not call Poll or Close.
type Consumer struct {
	cfg   ConsumerConfig
	log   *slog.Logger
	coord *groups.Client
	meta  *Metadata
	pool  *storageclient.Pool
	rcfg  ReaderConfig

	bg          context.Context    // parent of fetchers and internal requests
	bgCancel    context.CancelFunc // ends bg at the end of Close
	groupStop   chan struct{}      // closed by Close: stop after the heartbeat in flight
	groupCancel context.CancelFunc // stops the group goroutine at once, mid-heartbeat
	groupDone   chan struct{}      // closed when the group goroutine returned

	// pollMu is held by Poll and Close for their whole run: it serialises
	// rebalance steps, callbacks and the start and stop of fetchers, and
	// guards the fields below it. Lock order: pollMu, then mu.
	pollMu         sync.Mutex
	rr             int       // round-robin start of gather
	nextAutoCommit time.Time // when Poll auto-commits next
	initFailures   int       // consecutive failed start-offset look-ups
	initRetryAt    time.Time // no look-up before this

	// mu guards the fields below it; it is never held across I/O or a
	// callback.
	mu          sync.Mutex
	closed      bool                     // Close finished
	memberID    string                   // "" while joining or after a loss
	epoch       int32                    // the member epoch last answered
	target      []groups.TP              // the assignment last answered, sorted
	lostGen     uint64                   // counts losses of the membership
	lostHandled uint64                   // the last loss the Poll goroutine released
	parts       map[groups.TP]*partition // owned partitions
	joinErr     error                    // the coordinator refused the join (configuration); Poll returns it

	wake      chan struct{} // cap 1: target, loss or a seek changed; wakes Poll
	ready     chan struct{} // cap 1: a fetcher buffered a result; wakes Poll
	hbNow     chan struct{} // cap 1: owned set changed; heartbeat at once
	lostAck   chan struct{} // cap 1: Poll released a lost membership
	closing   chan struct{} // closed when Close starts
	closeOnce sync.Once
}

// partition is an owned partition's state. Its fields are guarded by
// Consumer.mu; f is replaced only by the pollMu holder.
type partition struct {
	position    int64    // next offset Poll returns; -1 until known
	committed   int64    // last offset this consumer committed, -1 none
	seekPending bool     // Seek moved position: restart the fetcher there
	f           *fetcher // nil until the start offset is known
	// topicID is the topic incarnation position was found in ("" when
	// unknown); commits name it.
	topicID string
}

// NewConsumer validates cfg and starts the group goroutine, which joins the
// group. Partitions arrive through Poll.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	isolation, _ := ParseIsolation(cfg.IsolationLevel) // validated
	bg, bgCancel := context.WithCancel(context.Background())
	c := &Consumer{
		cfg:            cfg,
		log:            cfg.Logger.With("group", cfg.Group, "client_id", cfg.ClientID),
		coord:          groups.NewClientTLS(cfg.Offsets, cfg.TLS),
		meta:           NewMetadata(cluster.NewClientTLS(cfg.Metadata, cfg.TLS)),
		pool:           storageclient.NewPoolTLS(cfg.ClientID, cfg.TLS),
		rcfg:           ReaderConfig{MaxBytes: cfg.FetchMaxBytes, MaxWait: cfg.FetchMaxWait, ClientID: cfg.ClientID, Isolation: isolation},
		bg:             bg,
		bgCancel:       bgCancel,
		groupStop:      make(chan struct{}),
		groupDone:      make(chan struct{}),
		nextAutoCommit: time.Now().Add(cfg.AutoCommitInterval),
		parts:          map[groups.TP]*partition{},
		wake:           make(chan struct{}, 1),
		ready:          make(chan struct{}, 1),
		hbNow:          make(chan struct{}, 1),
		lostAck:        make(chan struct{}, 1),
		closing:        make(chan struct{}),
	}
	gctx, gcancel := context.WithCancel(bg)
	c.groupCancel = gcancel
	go c.runGroup(gctx)
	return c, nil
}

// Poll returns the next records of owned partitions, at most MaxPollRecords,
// taken fairly across partitions. Before looking for records it runs pending
// rebalance steps on the caller's goroutine (OnLost, OnRevoked, OnAssigned,
// start offsets) and, when the interval has passed, the auto-commit. It
// blocks until records arrive, ctx ends (ctx.Err() is returned) or Close is
// called (ErrConsumerClosed). A rebalance step in progress finishes even if
// ctx ends meanwhile. While the coordinator refuses to let the consumer join
// for a reason retrying cannot fix (INVALID_REQUEST such as a session timeout
// outside its bounds, INVALID_TOPIC, INVALID_GROUP_ID), Poll returns that
// error; the consumer keeps trying in the background.
func (c *Consumer) Poll(ctx context.Context) ([]ConsumerRecord, error) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	for {
		select {
		case <-c.closing:
			return nil, ErrConsumerClosed
		default:
		}
		c.reconcile()
		if err := c.joinError(); err != nil {
			return nil, err
		}
		c.maybeAutoCommit(time.Now())
		if recs := c.gather(); len(recs) > 0 {
			return recs, nil
		}
		wait := time.NewTimer(c.nextWakeLocked(time.Now()))
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		case <-c.closing:
			wait.Stop()
			return nil, ErrConsumerClosed
		case <-c.ready:
		case <-c.wake:
		case <-wait.C:
		}
		wait.Stop()
	}
}

// nextWakeLocked is how long a Poll with nothing to return may sleep before
// it has timed work to do: the auto-commit, or retrying start offsets.
func (c *Consumer) nextWakeLocked(now time.Time) time.Duration {
	d := time.Hour
	if c.cfg.AutoCommit {
		d = min(d, c.nextAutoCommit.Sub(now))
	}
	if c.initFailures > 0 {
		d = min(d, c.initRetryAt.Sub(now))
	}
	return max(d, time.Millisecond)
}

// Commit commits the position of every owned partition whose position is
// known: the offset after the last record Poll returned, or where it was
// started or Seek put it. A STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID answer
// (a partition is no longer ours, or we are no longer a member) is returned
// as a *protocol.Error.
func (c *Consumer) Commit(ctx context.Context) error {
	// Positions and identity are read together, so a membership lost and
	// joined anew in between cannot lend its id to the old positions.
	c.mu.Lock()
	offs := c.positionsLocked(nil, false)
	id, epoch, closed := c.memberID, c.epoch, c.closed
	c.mu.Unlock()
	if len(offs) == 0 && !closed {
		return nil
	}
	return c.commitAs(ctx, id, epoch, closed, offs)
}

// TxnOffsets returns the positions of the owned partitions of tps (every
// owned partition when tps is nil) whose position is known, in the name of
// this member and its epoch: what a transactional producer's
// SendOffsetsToTxn commits for the records Poll returned. Positions and
// identity are read together, as Commit reads them.
func (c *Consumer) TxnOffsets(tps []groups.TP) TxnOffsets {
	c.mu.Lock()
	defer c.mu.Unlock()
	return TxnOffsets{Group: c.cfg.Group, MemberID: c.memberID, MemberEpoch: c.epoch, Offsets: c.positionsLocked(tps, false)}
}

// CommitOffsets commits the given offsets (each the next offset to read) in
// the name of this member and its epoch, all or nothing.
func (c *Consumer) CommitOffsets(ctx context.Context, offs []groups.Offset) error {
	c.mu.Lock()
	id, epoch, closed := c.memberID, c.epoch, c.closed
	c.mu.Unlock()
	return c.commitAs(ctx, id, epoch, closed, offs)
}

func (c *Consumer) commitAs(ctx context.Context, id string, epoch int32, closed bool, offs []groups.Offset) error {
	if closed {
		return ErrConsumerClosed
	}
	if id == "" {
		return fmt.Errorf("commit offsets of group %s: %w", c.cfg.Group,
			protocol.UnknownMemberID.Err("the consumer is not a member of the group (joining, or its membership was lost)"))
	}
	err := c.coord.Commit(ctx, c.cfg.Group, groups.CommitRequest{MemberID: id, MemberEpoch: epoch, Offsets: offs})
	if err != nil {
		return fmt.Errorf("commit offsets of group %s: %w", c.cfg.Group, err)
	}
	c.mu.Lock()
	for _, o := range offs {
		if p := c.parts[groups.TP{Topic: o.Topic, Partition: o.Partition}]; p != nil {
			p.committed = o.Offset
		}
	}
	c.mu.Unlock()
	return nil
}

// positions returns the known positions of tps (every owned partition when
// tps is nil), only those not committed yet when changedOnly.
func (c *Consumer) positions(tps []groups.TP, changedOnly bool) []groups.Offset {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.positionsLocked(tps, changedOnly)
}

func (c *Consumer) positionsLocked(tps []groups.TP, changedOnly bool) []groups.Offset {
	if tps == nil {
		tps = c.ownedLocked()
	}
	var out []groups.Offset
	for _, tp := range tps {
		p := c.parts[tp]
		if p == nil || p.position < 0 || (changedOnly && p.position == p.committed) {
			continue
		}
		out = append(out, groups.Offset{Topic: tp.Topic, Partition: tp.Partition, Offset: p.position, TopicID: p.topicID})
	}
	return out
}

// Seek makes the next records of an owned partition start at offset: data
// already fetched is dropped and the partition's fetcher restarts there. An
// offset out of the partition's range is reset per AutoOffsetReset.
func (c *Consumer) Seek(tp groups.TP, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("seek %s: offset %d is negative", tp, offset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrConsumerClosed
	}
	p := c.parts[tp]
	if p == nil {
		return fmt.Errorf("seek %s: %w", tp, ErrNotOwned)
	}
	p.position, p.seekPending = offset, true
	signal(c.wake)
	return nil
}

// Assignment returns the owned partitions, sorted.
func (c *Consumer) Assignment() []groups.TP {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownedLocked()
}

// Position returns an owned partition's position (the offset after the last
// record Poll returned, or its start offset); false when the partition is not
// owned or its start offset is not known yet.
func (c *Consumer) Position(tp groups.TP) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.parts[tp]; p != nil && p.position >= 0 {
		return p.position, true
	}
	return -1, false
}

// HighWatermark returns an owned partition's high watermark as its last
// fetch saw it, -1 when unknown (not owned, or no fetch answered yet). A
// partition whose position reached it has been read to its end.
func (c *Consumer) HighWatermark(tp groups.TP) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.parts[tp]; p != nil && p.f != nil {
		return p.f.hw.Load()
	}
	return -1
}

// MemberID returns the id the coordinator gave this member, "" while joining.
func (c *Consumer) MemberID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.memberID
}

// Close releases the consumer's partitions and leaves the group. Like
// Kafka's close, it commits the position after every record Poll returned,
// so call it once those records are processed: from the goroutine that
// polls, or after stopping it (cancelling its Poll's context). It waits
// for a running Poll to return, stops every fetcher, commits owned positions
// (with AutoCommit), calls OnRevoked (OnLost, without committing, when the
// membership was lost), stops the group goroutine, heartbeats with epoch -1
// so the partitions are free at once, and closes its connections. ctx bounds
// the commit and the leave. Later calls return nil.
func (c *Consumer) Close(ctx context.Context) error {
	first := false
	c.closeOnce.Do(func() { first = true; close(c.closing) })
	if !first {
		return nil
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	var err error
	c.mu.Lock()
	lost := c.lostGen != c.lostHandled
	c.mu.Unlock()
	if lost {
		c.releaseLost()
	} else if tps := c.Assignment(); len(tps) > 0 {
		err = c.revoke(ctx, tps)
	}
	c.stopGroup(ctx)
	if lerr := c.leave(ctx); lerr != nil {
		err = errors.Join(err, lerr)
	}
	c.mu.Lock()
	c.closed, c.memberID = true, ""
	c.mu.Unlock()
	c.bgCancel()
	_ = c.pool.Close()
	return err
}

// stopGroup stops the group goroutine. A heartbeat in flight is let finish
// (within its own deadline, or until ctx ends), so it cannot reach the
// coordinator after the leave.
func (c *Consumer) stopGroup(ctx context.Context) {
	close(c.groupStop)
	select {
	case <-c.groupDone:
	case <-ctx.Done():
		c.groupCancel()
		<-c.groupDone
	}
	c.groupCancel()
}

// leave heartbeats with LeaveEpoch so the coordinator frees the member's
// partitions at once instead of after its session timeout.
func (c *Consumer) leave(ctx context.Context) error {
	c.mu.Lock()
	id := c.memberID
	c.mu.Unlock()
	if id == "" {
		return nil
	}
	req := groups.HeartbeatRequest{MemberID: id, MemberEpoch: groups.LeaveEpoch, ClientID: c.cfg.ClientID,
		Topics: c.cfg.Topics, Owned: []groups.TopicPartitions{}}
	_, err := c.coord.Heartbeat(ctx, c.cfg.Group, req)
	if err != nil && classifyHeartbeat(err) != hbFenced { // fenced: already out
		return fmt.Errorf("leave group %s: %w", c.cfg.Group, err)
	}
	c.log.Info("left consumer group", "member_id", id)
	return nil
}

// ownedLocked returns the owned partitions, sorted. c.mu must be held.
func (c *Consumer) ownedLocked() []groups.TP {
	out := make([]groups.TP, 0, len(c.parts))
	for tp := range c.parts {
		out = append(out, tp)
	}
	return groups.SortTPs(out)
}

// signal sends on a capacity-one channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleepCtx waits for d or ctx, reporting whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
