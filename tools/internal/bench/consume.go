package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/groups"
)

// consumerCloseTimeout bounds a consumer's commit and leave at the end.
const consumerCloseTimeout = 10 * time.Second

// consuming is the consume side of a run, shared by its consumers.
type consuming struct {
	side
	lats []*Latencies // e2e: one per consumer

	limit   int64         // consume --records: records to count; 0: no limit
	mu      sync.Mutex    // guards claimed
	claimed int64         // records counted against limit
	reached chan struct{} // closed once limit records were counted
}

// claim counts up to n more records against the limit and returns how many
// count.
func (cs *consuming) claim(n int64) int64 {
	if cs.limit == 0 {
		return n
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	k := min(n, cs.limit-cs.claimed)
	if k <= 0 {
		return 0
	}
	cs.claimed += k
	if cs.claimed == cs.limit {
		close(cs.reached)
	}
	return k
}

// newConsumers creates the group's members. In e2e they start each
// partition where the tracker says (the partitions' ends before producing),
// whatever the group committed.
func (r *run) newConsumers() ([]*client.Consumer, error) {
	var out []*client.Consumer
	for i := 0; i < r.cfg.Consumers; i++ {
		cc := client.DefaultConsumerConfig()
		cc.Metadata, cc.Offsets = r.cfg.Metadata, r.cfg.Offsets
		cc.Group, cc.Topics, cc.ClientID = r.cfg.Group, []string{r.cfg.Topic}, fmt.Sprintf("sluice-bench-%d", i)
		cc.AutoOffsetReset = client.OffsetResetEarliest
		cc.Logger = r.log
		var c *client.Consumer
		if r.tracker != nil {
			cc.OnAssigned = func(tps []groups.TP) {
				for _, tp := range tps {
					if err := c.Seek(tp, r.tracker.startOf(tp.Partition)); err != nil {
						r.log.Warn("seek", "partition", tp.Partition, "err", err)
					}
				}
			}
		}
		c, err := client.NewConsumer(cc)
		if err != nil {
			closeConsumers(out)
			return nil, fmt.Errorf("consumer: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// closeConsumers commits and leaves the group, each member at once.
func closeConsumers(cs []*client.Consumer) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), consumerCloseTimeout)
			defer cancel()
			_ = c.Close(ctx) // the run is over: a failed commit of a bench group changes nothing
		}()
	}
	wg.Wait()
}

// consume polls c until ctx ends or Poll fails (stop is then called with the
// reason). It runs on its own goroutine, owned by the run.
func (r *run) consume(ctx context.Context, i int, c *client.Consumer, stop func(error)) {
	for {
		recs, err := c.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			stop(fmt.Errorf("consumer %d: %w", i, err))
			return
		}
		now := time.Now()
		if r.tracker != nil {
			r.tracker.consumed(recs)
			r.countE2E(recs, now, r.cons.lats[i])
			continue
		}
		k := r.cons.claim(int64(len(recs)))
		var bytes int64
		for j := int64(0); j < k; j++ {
			bytes += int64(len(recs[j].Value))
		}
		if k > 0 {
			r.cons.count(k, bytes, now)
		}
	}
}

// countE2E counts records received at now: those sent after the warm-up
// (by the stamp in their value) go into the figures with their end-to-end
// latency.
func (r *run) countE2E(recs []client.ConsumerRecord, now time.Time, lat *Latencies) {
	var n, bytes, warm int64
	from := r.plan.warmupEnd.UnixNano()
	for i := range recs {
		sent, ok := stampOf(recs[i].Value)
		if !ok || sent < from {
			warm++
			continue
		}
		lat.Record(time.Duration(now.UnixNano() - sent))
		n++
		bytes += int64(len(recs[i].Value))
	}
	r.cons.warmup.Add(warm)
	if n > 0 {
		r.cons.count(n, bytes, now)
	}
}

// waitAssigned waits until the members together own every partition with a
// known position and, when there are no more members than partitions, each
// member owns some: the first member to join gets every partition at first,
// and the rebalance the others cause must not fall into the measurement.
func waitAssigned(ctx context.Context, cs []*client.Consumer, partitions int) error {
	for {
		owned, busy := map[int32]bool{}, 0
		for _, c := range cs {
			tps := c.Assignment()
			if len(tps) > 0 {
				busy++
			}
			for _, tp := range tps {
				if _, ok := c.Position(tp); ok {
					owned[tp.Partition] = true
				}
			}
		}
		if len(owned) == partitions && busy >= min(len(cs), partitions) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the group owned %d of %d partitions when waiting ended: %w", len(owned), partitions, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
