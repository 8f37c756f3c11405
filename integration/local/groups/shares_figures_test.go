package groups

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/shares"
)

// TestShareFigures measures docs/performance.md's share-group figures; it
// runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -timeout 30m -run TestShareFigures -v ./local/groups/
//
// A topic of 4 partitions (RF=3) holds 1,000,000 records of 100 bytes. For
// 1, 4 and 16 in-process SDK share consumers, a new share group reads and
// accepts every record (records/s acknowledged), and in the same run a new
// regular group of one SDK consumer reads the same records.
func TestShareFigures(t *testing.T) {
	itest.FiguresOnly(t, "the share-group figures")
	const records = 1_000_000
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "sfig", 4, 3)
	itest.ProduceInRequests(t, c, "sfig", fmt.Sprintf("%090d", 0), records, 5000)
	for _, n := range []int{1, 4, 16} {
		group := fmt.Sprintf("share-%d", n)
		itest.ConfigureShareGroup(t, ctx, c, group, map[string]string{shares.ConfigAutoOffsetReset: "earliest"})
		var done atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			sc, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: c.MetadataURLs(), Offsets: c.OffsetsURLs(),
				Group: group, Topic: "sfig", MemberID: fmt.Sprintf("%s-%d", group, i), MaxWait: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				acceptAll(ctx, sc, func() bool { return done.Load() >= records }, func(recs []client.ShareRecord, _ time.Time) {
					done.Add(int64(len(recs)))
				})
			}()
		}
		wg.Wait()
		shareRate := float64(records) / time.Since(start).Seconds()

		cons, err := client.NewConsumer(itest.ConsumerConfig(c, fmt.Sprintf("regular-%d", n), "sfig"))
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		read := 0
		for read < records && ctx.Err() == nil {
			recs, err := cons.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			read += len(recs)
		}
		regularRate := float64(records) / time.Since(start).Seconds()
		_ = cons.Close(ctx)
		t.Logf("FIGURE share consumers=%d: %.0f records/s acknowledged; regular group (1 consumer) %.0f records/s; ratio %.2f",
			n, shareRate, regularRate, shareRate/regularRate)
	}
	for _, rate := range []int{10_000, 30_000, 100_000} {
		shareLatency(t, ctx, c, rate)
	}
}

// shareLatency produces at rate records/s for 10 s while 4 share consumers
// accept them, and reports the time from each record's timestamp (its
// send) to its acknowledgement.
func shareLatency(t *testing.T, ctx context.Context, c *localcluster.Cluster, rate int) {
	topic, group := fmt.Sprintf("slat-%d", rate), fmt.Sprintf("lat-%d", rate)
	itest.CreateTopic(t, ctx, c, topic, 4, 3)
	itest.ConfigureShareGroup(t, ctx, c, group, map[string]string{shares.ConfigAutoOffsetReset: "earliest"})
	const seconds = 10
	total := rate * seconds
	var mu sync.Mutex
	var lat []time.Duration
	var done atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		sc, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: c.MetadataURLs(), Offsets: c.OffsetsURLs(),
			Group: group, Topic: topic, MemberID: fmt.Sprintf("%s-%d", group, i), MaxWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			acceptAll(ctx, sc, func() bool { return done.Load() >= int64(total) }, func(recs []client.ShareRecord, at time.Time) {
				mu.Lock()
				for _, r := range recs {
					lat = append(lat, at.Sub(time.UnixMilli(r.Timestamp)))
				}
				mu.Unlock()
				done.Add(int64(len(recs)))
			})
		}()
	}
	cfg := client.DefaultProducerConfig()
	cfg.Frontends = c.FrontendURLs()
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	value := make([]byte, 100)
	for i := range total {
		if i%100 == 0 {
			if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
		}
		if err := p.Send(ctx, client.ProducerRecord{Topic: topic, Partition: -1, Value: value}, nil); err != nil {
			t.Fatal(err)
		}
	}
	_ = p.Close(ctx)
	wg.Wait()
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("FIGURE produce-to-acknowledged at %d records/s (4 share consumers, %d records): p50 %v, p99 %v, max %v; produced in %v",
		rate, len(lat), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// acceptAll polls until enough() and accepts every record, as a share
// consumer does: each Poll carries the acknowledgements of the records the
// previous one returned, and confirmed is called with those records and
// the moment their acknowledgements were confirmed (records whose
// acknowledgements failed are delivered again later). The last records
// are acknowledged by Close.
func acceptAll(ctx context.Context, sc *client.ShareConsumer, enough func() bool, confirmed func([]client.ShareRecord, time.Time)) {
	var held []client.ShareRecord // acknowledged, not confirmed yet
	for !enough() && ctx.Err() == nil {
		recs, err := sc.Poll(ctx)
		if err == nil && len(held) > 0 {
			confirmed(held, time.Now())
		}
		held = recs
		for _, r := range recs {
			sc.Acknowledge(r, shares.AckAccept)
		}
	}
	if err := sc.Close(context.Background()); err == nil && len(held) > 0 {
		confirmed(held, time.Now())
	}
}
