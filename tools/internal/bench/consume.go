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

// polled is a record a member received.
type polled struct {
	partition int32
	offset    int64
	value     []byte
}

// partState is a member's view of a partition it owns: its position (known
// once the start is resolved) and the high watermark of its last fetch (-1
// before one).
type partState struct {
	partition int32
	pos, hw   int64
	known     bool
}

// member is one consumer of a run: an SDK group member, or with --protocol
// kafka a franz-go client reading the partitions given to it. Its methods
// are called from the run's goroutines; poll from one at a time.
type member interface {
	// poll returns the next records.
	poll(ctx context.Context) ([]polled, error)
	// states returns the partitions it owns.
	states() []partState
	// close commits (a group member) and leaves.
	close(ctx context.Context)
}

// sdkMember is an SDK consumer group member.
type sdkMember struct{ c *client.Consumer }

func (m sdkMember) poll(ctx context.Context) ([]polled, error) {
	recs, err := m.c.Poll(ctx)
	out := make([]polled, len(recs))
	for i := range recs {
		out[i] = polled{partition: recs[i].Partition, offset: recs[i].Offset, value: recs[i].Value}
	}
	return out, err
}

func (m sdkMember) states() []partState {
	var out []partState
	for _, tp := range m.c.Assignment() {
		pos, ok := m.c.Position(tp)
		out = append(out, partState{partition: tp.Partition, pos: pos, hw: m.c.HighWatermark(tp), known: ok})
	}
	return out
}

func (m sdkMember) close(ctx context.Context) { _ = m.c.Close(ctx) } // a failed commit of a bench group changes nothing

// newConsumers creates the run's consumers: Kafka clients with --protocol
// kafka, else the group's members.
func (r *run) newConsumers() ([]member, error) {
	if r.cfg.Protocol == ProtocolKafka {
		return r.newKafkaConsumers()
	}
	cs, err := r.newGroupMembers()
	var out []member
	for _, c := range cs {
		out = append(out, sdkMember{c})
	}
	return out, err
}

// newGroupMembers creates the group's members. In e2e they start each
// partition where the tracker says (the partitions' ends before producing),
// whatever the group committed.
func (r *run) newGroupMembers() ([]*client.Consumer, error) {
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
			for _, c := range out {
				sdkMember{c}.close(context.Background())
			}
			return nil, fmt.Errorf("consumer: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// closeConsumers closes every member at once.
func closeConsumers(cs []member) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), consumerCloseTimeout)
			defer cancel()
			c.close(ctx)
		}()
	}
	wg.Wait()
}

// consume polls c until ctx ends or a poll fails (stop is then called with
// the reason). It runs on its own goroutine, owned by the run.
func (r *run) consume(ctx context.Context, i int, c member, stop func(error)) {
	for {
		recs, err := c.poll(ctx)
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
			bytes += int64(len(recs[j].value))
		}
		if k > 0 {
			r.cons.count(k, bytes, now)
		}
	}
}

// countE2E counts records received at now: those sent after the warm-up
// (by the stamp in their value) go into the figures with their end-to-end
// latency.
func (r *run) countE2E(recs []polled, now time.Time, lat *Latencies) {
	var n, bytes, warm int64
	from := r.plan.warmupEnd.UnixNano()
	for i := range recs {
		sent, ok := stampOf(recs[i].value)
		if !ok || sent < from {
			warm++
			continue
		}
		lat.Record(time.Duration(now.UnixNano() - sent))
		n++
		bytes += int64(len(recs[i].value))
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
func waitAssigned(ctx context.Context, cs []member, partitions int) error {
	for {
		owned, busy := map[int32]bool{}, 0
		for _, c := range cs {
			st := c.states()
			if len(st) > 0 {
				busy++
			}
			for _, p := range st {
				if p.known {
					owned[p.partition] = true
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
