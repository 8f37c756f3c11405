package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// The Poll goroutine's rebalance steps. Every function here runs with pollMu
// held (from Poll or Close); they take mu only for short critical sections
// and never hold it across I/O or a callback.

// reconcile brings the owned set to the coordinator's target: first releases
// a lost membership, then revokes, then takes new partitions, then starts
// fetchers for partitions whose start offset is known (or looks it up).
func (c *Consumer) reconcile() {
	c.releaseLost()
	if tps := c.toRevoke(); len(tps) > 0 {
		ctx, cancel := context.WithTimeout(c.bg, requestTimeout)
		if err := c.revoke(ctx, tps); err != nil {
			c.log.Warn("commit before revocation failed", "partitions", tps, "err", err)
		}
		cancel()
	}
	if tps := c.takeAssignment(); len(tps) > 0 {
		c.log.Info("partitions assigned", "partitions", tps)
		if c.cfg.OnAssigned != nil {
			c.cfg.OnAssigned(slices.Clone(tps))
		}
	}
	c.startFetchers()
}

// releaseLost releases every owned partition after a loss of membership:
// fetchers stop, buffered records are dropped, OnLost runs, nothing is
// committed. It then lets the group goroutine rejoin.
func (c *Consumer) releaseLost() {
	c.mu.Lock()
	if c.lostGen == c.lostHandled {
		c.mu.Unlock()
		return
	}
	gen, tps := c.lostGen, c.ownedLocked()
	c.mu.Unlock()
	c.stopFetchers(tps)
	if len(tps) > 0 {
		c.log.Warn("partitions lost", "partitions", tps)
		if c.cfg.OnLost != nil {
			c.cfg.OnLost(slices.Clone(tps))
		}
	}
	c.mu.Lock()
	for _, tp := range tps {
		delete(c.parts, tp)
	}
	c.lostHandled = gen
	c.mu.Unlock()
	signal(c.lostAck)
}

// toRevoke returns the owned partitions missing from the target; none while
// a loss waits to be released (the loss releases everything).
func (c *Consumer) toRevoke() []groups.TP {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lostGen != c.lostHandled {
		return nil
	}
	return diffTPs(c.ownedLocked(), c.target)
}

// revoke releases tps: their fetchers stop (their buffered records go with
// them), their positions are committed (AutoCommit), OnRevoked runs, they
// leave the owned set and the group goroutine heartbeats at once to report
// it. It returns the commit's error; the partitions are released anyway.
func (c *Consumer) revoke(ctx context.Context, tps []groups.TP) error {
	c.stopFetchers(tps)
	var err error
	if c.cfg.AutoCommit {
		if offs := c.positions(tps, true); len(offs) > 0 {
			err = c.CommitOffsets(ctx, offs)
		}
	}
	c.log.Info("partitions revoked", "partitions", tps)
	if c.cfg.OnRevoked != nil {
		c.cfg.OnRevoked(slices.Clone(tps))
	}
	c.mu.Lock()
	for _, tp := range tps {
		delete(c.parts, tp)
	}
	c.mu.Unlock()
	signal(c.hbNow)
	return err
}

// takeAssignment makes the target's partitions that are not owned yet owned
// (start offset unknown, no fetcher) and returns them. It checks the target
// and the loss count in the same critical section, so a partition of a
// membership already lost is never taken.
func (c *Consumer) takeAssignment() []groups.TP {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lostGen != c.lostHandled {
		return nil
	}
	tps := diffTPs(c.target, c.ownedLocked())
	for _, tp := range tps {
		c.parts[tp] = &partition{position: -1, committed: -1}
	}
	if len(tps) > 0 {
		signal(c.hbNow)
	}
	return tps
}

// stopFetchers stops the fetchers of tps and waits for them. A stopped
// fetcher stays attached (its high watermark stays readable) until the
// partition is released or the fetcher replaced.
func (c *Consumer) stopFetchers(tps []groups.TP) {
	var fs []*fetcher
	c.mu.Lock()
	for _, tp := range tps {
		if p := c.parts[tp]; p != nil && p.f != nil {
			fs = append(fs, p.f)
		}
	}
	c.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

// startFetchers (re)starts the fetchers of owned partitions that need one:
// after Seek, or once the start offset is known. Partitions without a start
// offset get one from the committed offsets or AutoOffsetReset.
func (c *Consumer) startFetchers() {
	type start struct {
		tp  groups.TP
		off int64
		old *fetcher
	}
	var starts []start
	var unknown []groups.TP
	c.mu.Lock()
	for tp, p := range c.parts {
		switch {
		case p.seekPending || (p.f == nil && p.position >= 0):
			starts = append(starts, start{tp, p.position, p.f})
			p.seekPending = false
		case p.f == nil:
			unknown = append(unknown, tp)
		}
	}
	c.mu.Unlock()
	for _, s := range starts {
		hw := int64(-1)
		if s.old != nil {
			s.old.stop()
			hw = s.old.hw.Load()
		}
		f := c.startFetcher(s.tp, s.off, hw)
		c.mu.Lock()
		c.parts[s.tp].f = f
		c.mu.Unlock()
	}
	if len(unknown) > 0 && !time.Now().Before(c.initRetryAt) {
		c.initPositions(groups.SortTPs(unknown))
	}
}

// initPositions looks up the start offsets of tps and starts their
// fetchers; on failure it schedules a retry with backoff.
func (c *Consumer) initPositions(tps []groups.TP) {
	ctx, cancel := context.WithTimeout(c.bg, requestTimeout)
	defer cancel()
	offs, ids, err := c.startOffsets(ctx, tps)
	for _, tp := range groups.SortTPs(slices.Collect(maps.Keys(offs))) {
		c.mu.Lock()
		p := c.parts[tp]
		ok := p != nil && p.f == nil && !p.seekPending && p.position < 0
		if ok {
			p.position, p.topicID = offs[tp], ids[tp.Topic]
		}
		c.mu.Unlock()
		if ok {
			f := c.startFetcher(tp, offs[tp], -1)
			c.mu.Lock()
			p.f = f
			c.mu.Unlock()
		}
	}
	if err != nil {
		c.initFailures++
		d := retryBackoff(c.initFailures)
		c.initRetryAt = time.Now().Add(d)
		c.log.Warn("looking up start offsets failed; retrying", "retry_in", d, "err", err)
		return
	}
	c.initFailures = 0
}

// startOffsets returns the start offset of each of tps it could find: the
// group's committed offset, else the AutoOffsetReset end of the partition.
// A committed offset of an earlier incarnation of the topic (deleted and
// created again since) does not count: it is an offset of another log. ids
// maps each topic to the incarnation the offsets are of ("" when unknown).
func (c *Consumer) startOffsets(ctx context.Context, tps []groups.TP) (offs map[groups.TP]int64, ids map[string]string, err error) {
	committed := map[groups.TP]int64{}
	topics := map[string]bool{}
	for _, tp := range tps {
		topics[tp.Topic] = true
	}
	ids = map[string]string{}
	// Fresh metadata: a cached snapshot may predate the topic's latest
	// incarnation. Without it nothing is taken for stale.
	if snap, err := c.meta.Refresh(ctx); err == nil {
		for _, t := range snap.Topics {
			if topics[t.Name] {
				ids[t.Name] = t.ID
			}
		}
	}
	resp, err := c.coord.MemberOffsets(ctx, c.cfg.Group, "", 0)
	if err != nil && protocol.CodeOf(err) != protocol.GroupIDNotFound {
		return nil, nil, fmt.Errorf("committed offsets of group %s: %w", c.cfg.Group, err)
	}
	for _, o := range resp.Offsets {
		if !topics[o.Topic] {
			continue
		}
		if o.Stale(ids[o.Topic]) {
			c.log.Warn("ignoring a committed offset of an earlier topic of the same name", "partition", groups.TP{Topic: o.Topic, Partition: o.Partition},
				"offset", o.Offset, "committed_topic_id", o.TopicID, "topic_id", ids[o.Topic])
			continue
		}
		if o.Offset >= 0 {
			committed[groups.TP{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	}
	// A read_committed consumer waits for offsets an open transaction
	// holds (Kafka's require_stable): the transaction's commit may move
	// them, and starting from the older ones would read its input again.
	pending := map[groups.TP]bool{}
	if c.rcfg.Isolation == protocol.ReadCommitted {
		for _, tp := range resp.Pending {
			pending[tp] = true
		}
	}
	out := map[groups.TP]int64{}
	var errs []error
	for _, tp := range tps {
		if pending[tp] {
			errs = append(errs, protocol.UnstableOffsetCommit.Err("%s: an open transaction holds the group's offset", tp))
			continue
		}
		if off, ok := committed[tp]; ok {
			out[tp] = off
			continue
		}
		off, err := c.resetOffset(ctx, tp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.log.Info("no committed offset; starting per auto offset reset", "partition", tp, "reset", c.cfg.AutoOffsetReset, "offset", off)
		out[tp] = off
	}
	return out, ids, errors.Join(errs...)
}

// resetOffset asks tp's leader for its earliest or latest offset, per
// AutoOffsetReset.
func (c *Consumer) resetOffset(ctx context.Context, tp groups.TP) (int64, error) {
	ts := protocol.TimestampLatest
	if c.cfg.AutoOffsetReset == OffsetResetEarliest {
		ts = protocol.TimestampEarliest
	}
	off, err := ListOffsetAt(ctx, c.meta, c.pool, tp.Topic, tp.Partition, ts, c.rcfg.Isolation)
	if err != nil {
		return 0, fmt.Errorf("%s offset of %s: %w", c.cfg.AutoOffsetReset, tp, err)
	}
	return off, nil
}

// maybeAutoCommit commits, once the interval passed, the positions that
// changed since the last commit, of partitions still owned (revoked ones
// were committed and released by reconcile already). Failures are logged.
func (c *Consumer) maybeAutoCommit(now time.Time) {
	if !c.cfg.AutoCommit || now.Before(c.nextAutoCommit) {
		return
	}
	c.nextAutoCommit = now.Add(c.cfg.AutoCommitInterval)
	offs := c.positions(nil, true)
	if len(offs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.bg, requestTimeout)
	defer cancel()
	if err := c.CommitOffsets(ctx, offs); err != nil {
		c.log.Warn("auto-commit failed", "err", err)
	}
}
