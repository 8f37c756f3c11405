package client

import (
	"context"
	"sync/atomic"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// fetchResult is what a fetcher hands to Poll, in order.
type fetchResult struct {
	recs []record.Record
	// reset: after OFFSET_OUT_OF_RANGE the fetcher moved to resetTo; Poll
	// takes it as the partition's position.
	reset   bool
	resetTo int64
}

// fetcher reads one owned partition ahead of Poll: one goroutine with a
// PartitionReader (which follows leader changes), up to Prefetch results
// buffered in ch. A fetcher serves one contiguous run of offsets from its
// start; Seek and rebalances replace it rather than move it, so dropping a
// fetcher drops exactly the data fetched for the old position.
type fetcher struct {
	tp     groups.TP
	ch     chan fetchResult // buffered results; Poll drains it
	hw     atomic.Int64     // high watermark of the last answered fetch, -1 before
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine returned

	left []record.Record // records of a result not returned yet; pollMu holder only
}

// startFetcher starts a fetcher of tp at offset; hw seeds its high watermark
// (carried over from the fetcher it replaces).
func (c *Consumer) startFetcher(tp groups.TP, offset, hw int64) *fetcher {
	ctx, cancel := context.WithCancel(c.bg)
	f := &fetcher{tp: tp, ch: make(chan fetchResult, c.cfg.Prefetch), cancel: cancel, done: make(chan struct{})}
	f.hw.Store(hw)
	go c.runFetcher(ctx, f, offset)
	return f
}

// stop stops the fetcher and waits for its goroutine.
func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

// runFetcher fetches until ctx ends. Retriable errors are retried inside the
// reader (with metadata refreshes); what still fails is logged and retried
// with backoff. OFFSET_OUT_OF_RANGE resets per AutoOffsetReset.
func (c *Consumer) runFetcher(ctx context.Context, f *fetcher, offset int64) {
	defer close(f.done)
	r := NewPartitionReader(c.meta, c.pool, f.tp.Topic, f.tp.Partition, offset, c.rcfg)
	failures := 0
	for ctx.Err() == nil {
		recs, err := r.Fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			failures = 0
			f.hw.Store(r.HighWatermark())
			if len(recs) > 0 && !c.deliver(ctx, f, fetchResult{recs: recs}) {
				return
			}
		case protocol.CodeOf(err) == protocol.OffsetOutOfRange:
			off, ok := c.resetAfterOutOfRange(ctx, f.tp, r.Offset())
			if !ok || !c.deliver(ctx, f, fetchResult{reset: true, resetTo: off}) {
				return
			}
			r = NewPartitionReader(c.meta, c.pool, f.tp.Topic, f.tp.Partition, off, c.rcfg)
		default:
			failures++
			d := retryBackoff(failures)
			c.log.Warn("fetch failed; retrying", "partition", f.tp, "offset", r.Offset(), "retry_in", d, "err", err)
			if !sleepCtx(ctx, d) {
				return
			}
		}
	}
}

// resetAfterOutOfRange finds where to continue after the leader answered
// OFFSET_OUT_OF_RANGE for offset, retrying until it knows or ctx ends.
func (c *Consumer) resetAfterOutOfRange(ctx context.Context, tp groups.TP, offset int64) (int64, bool) {
	for failures := 1; ; failures++ {
		off, err := c.resetOffset(ctx, tp)
		if err == nil {
			c.log.Warn("offset out of range; reset", "partition", tp, "offset", offset, "reset", c.cfg.AutoOffsetReset, "new_offset", off)
			return off, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		c.log.Warn("offset out of range; reset failed, retrying", "partition", tp, "offset", offset, "err", err)
		if !sleepCtx(ctx, retryBackoff(failures)) {
			return 0, false
		}
	}
}

// deliver hands a result to Poll, waiting while the buffer is full.
func (c *Consumer) deliver(ctx context.Context, f *fetcher, r fetchResult) bool {
	select {
	case f.ch <- r:
		signal(c.ready)
		return true
	case <-ctx.Done():
		return false
	}
}

// gather takes up to MaxPollRecords buffered records, fairly: the partitions
// are visited round-robin from a start that moves each Poll, each taking at
// most an equal share per round until the budget is spent or nothing is
// left. It advances each partition's position past the records it returns.
// Nothing is returned while a loss waits to be released.
func (c *Consumer) gather() []ConsumerRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lostGen != c.lostHandled {
		return nil
	}
	var active []groups.TP
	for _, tp := range c.ownedLocked() {
		if p := c.parts[tp]; p.f != nil && !p.seekPending {
			active = append(active, tp)
		}
	}
	if len(active) == 0 {
		return nil
	}
	start := c.rr % len(active)
	c.rr++
	budget := c.cfg.MaxPollRecords
	share := max(1, budget/len(active))
	var out []ConsumerRecord
	for progress := true; progress && budget > 0; {
		progress = false
		for i := 0; i < len(active) && budget > 0; i++ {
			tp := active[(start+i)%len(active)]
			n := c.parts[tp].take(&out, tp, min(share, budget), budget)
			budget -= n
			progress = progress || n > 0
		}
	}
	return out
}

// take moves up to n buffered records of the partition to out, advancing its
// position; results that reset the position apply in order. c.mu and pollMu
// must be held.
func (p *partition) take(out *[]ConsumerRecord, tp groups.TP, n, capHint int) int {
	f, taken := p.f, 0
	for taken < n {
		if len(f.left) == 0 {
			select {
			case r := <-f.ch:
				if r.reset {
					p.position = r.resetTo
				}
				f.left = r.recs
				continue
			default:
				return taken
			}
		}
		rec := f.left[0]
		f.left = f.left[1:]
		if rec.Offset < p.position {
			continue // defensive: never return a record twice
		}
		if *out == nil {
			*out = make([]ConsumerRecord, 0, capHint)
		}
		*out = append(*out, ConsumerRecord{Topic: tp.Topic, Partition: tp.Partition, Record: rec})
		p.position = rec.Offset + 1
		taken++
	}
	return taken
}
