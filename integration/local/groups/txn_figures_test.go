package groups

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestTxnFigures measures transactions, the figures of docs/performance.md's
// summary and of docs/dev/performance-log.md's Transactions section; it runs
// only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -timeout 30m -run TestTxnFigures -v ./local/groups/
//
// A local cluster (3 metadata voters, 3 storage nodes, 3 offsets replicas,
// one frontend, defaults) and franz-go, in this test's process, share the
// machine. A topic of 4 partitions, RF=3, acks=all, 100-byte records unless
// said:
//   - produce throughput of 4 producers (SLUICE_FIGURES_PRODUCERS) together
//     for 8 s, SLUICE_FIGURES_RUNS times (default 3) each, alternating:
//     franz-go's idempotent producer flushing every 1,000 records, and its
//     transactional producer committing every 100 and every 1,000 records
//     (each producer its own transactional id); then the idempotent producer
//     never flushing, and the transactional one committing every 100 ms
//     (Kafka's published measure of what transactions cost), with values of
//     100 bytes and of 1 KiB;
//   - commit latency: EndTransaction's time after the transaction's records
//     were flushed (the markers' round trip), p50 and p99;
//   - consume throughput of a log of 1,000,000 records written in
//     transactions of 1,000 (a tenth of them aborted), read_committed (which
//     returns the 900,000 committed) next to read_uncommitted (all), as log
//     records per second over three passes of each (each a new client,
//     connected before the clock starts), alternating which reads first.
func TestTxnFigures(t *testing.T) {
	itest.FiguresOnly(t, "the transaction figures")
	runs := 3
	if n, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_RUNS")); err == nil && n > 0 {
		runs = n
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx := context.Background()
	value := make([]byte, 100)
	producers := 4
	if n, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_PRODUCERS")); err == nil && n > 0 {
		producers = n
	}
	report := func(format string, args ...any) { t.Log("FIGURE " + fmt.Sprintf(format, args...)) }

	topicN := 0
	newTopic := func() string {
		topicN++
		name := fmt.Sprintf("tfig-%d", topicN)
		itest.CreateTopic(t, ctx, c, name, 4, 3)
		return name
	}

	// A workload of the producers: transactions of perTxn records, or
	// (every > 0) transactions of what each producer sends in every, or
	// (neither) franz-go's idempotent producer, flushing every 1,000
	// records or (continuous) only at the end; values of size bytes. Each
	// transactional mode is compared with the idempotent one named base.
	type workload struct {
		name       string
		perTxn     int
		every      time.Duration
		continuous bool
		size       int
		base       string
	}
	// produce runs producers producers (each its own client, and for
	// transactions its own transactional id) for d and returns their
	// records/s together and, for transactions, the EndTransaction
	// latencies.
	produce := func(w workload, d time.Duration) (float64, []time.Duration) {
		topic := newTopic()
		value := make([]byte, w.size)
		transactional := w.perTxn > 0 || w.every > 0
		var mu sync.Mutex
		var total int
		var commits []time.Duration
		var wg sync.WaitGroup
		start := time.Now()
		for i := range producers {
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond), kgo.MaxBufferedRecords(100000)}
			if transactional {
				opts = append(opts, kgo.TransactionalID(fmt.Sprintf("tfig-%d-%d", topicN, i)))
			}
			cl := itest.FranzClient(t, c, opts...)
			wg.Go(func() {
				var n int
				var mine []time.Duration
				promise := func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				}
				for time.Since(start) < d {
					if transactional {
						if err := cl.BeginTransaction(); err != nil {
							t.Error(err)
							return
						}
					}
					switch {
					case w.every > 0:
						for opened := time.Now(); time.Since(opened) < w.every; n++ {
							cl.Produce(ctx, &kgo.Record{Value: value}, promise)
						}
					case w.continuous:
						for ; time.Since(start) < d; n++ {
							cl.Produce(ctx, &kgo.Record{Value: value}, promise)
						}
					default:
						batch := cmp.Or(w.perTxn, 1000)
						for range batch {
							cl.Produce(ctx, &kgo.Record{Value: value}, promise)
						}
						n += batch
					}
					if err := cl.Flush(ctx); err != nil {
						t.Error(err)
						return
					}
					if transactional {
						end := time.Now()
						if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
							t.Error(err)
							return
						}
						mine = append(mine, time.Since(end))
					}
				}
				mu.Lock()
				total += n
				commits = append(commits, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		return float64(total) / time.Since(start).Seconds(), commits
	}

	modes := []workload{
		{name: "idempotent", size: 100},
		{name: "transactions of 100", perTxn: 100, size: 100, base: "idempotent"},
		{name: "transactions of 1000", perTxn: 1000, size: 100, base: "idempotent"},
		{name: "idempotent without flushes", continuous: true, size: 100},
		{name: "transactions every 100 ms", every: 100 * time.Millisecond, size: 100, base: "idempotent without flushes"},
		{name: "idempotent without flushes, 1 KiB", continuous: true, size: 1024},
		{name: "transactions every 100 ms, 1 KiB", every: 100 * time.Millisecond, size: 1024, base: "idempotent without flushes, 1 KiB"},
	}
	rates := map[string][]float64{}
	latencies := map[string][]time.Duration{}
	for run := range runs {
		for _, m := range modes {
			rate, commits := produce(m, 8*time.Second)
			rates[m.name] = append(rates[m.name], rate)
			latencies[m.name] = append(latencies[m.name], commits...)
			report("run %d: produce %s: %.0f records/s", run+1, m.name, rate)
		}
	}
	for _, m := range modes {
		r := itest.Median(rates[m.name])
		if m.base == "" {
			report("produce %s: median %.0f records/s", m.name, r)
			continue
		}
		report("produce %s: median %.0f records/s (%.2f of %s)", m.name, r, r/itest.Median(rates[m.base]), m.base)
		if l := latencies[m.name]; len(l) > 0 {
			slices.Sort(l)
			report("commit latency, %s: p50 %v, p99 %v (%d commits)", m.name, l[len(l)/2], l[len(l)*99/100], len(l))
		}
	}

	// Consume: 1,000,000 records in transactions of 1,000, one in ten aborted.
	topic := newTopic()
	cl := itest.FranzClient(t, c, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("tfig-consume"), kgo.MaxBufferedRecords(100000))
	for txn := range 1000 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			cl.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(txn%10 != 9)); err != nil {
			t.Fatal(err)
		}
	}
	// consume reads the log passes times, each with a new client whose
	// connection to the cluster is made before the clock starts, and
	// returns log records per second.
	const passes = 3
	consume := func(isolation kgo.IsolationLevel, want int) float64 {
		var spent time.Duration
		for range passes {
			r := itest.FranzClient(t, c, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
			if err := r.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r.AddConsumeTopics(topic)
			n := 0
			for n < want {
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				fs := r.PollFetches(pctx)
				cancel()
				if pctx.Err() != nil && fs.NumRecords() == 0 {
					t.Fatalf("consume stalled at %d of %d records", n, want)
				}
				n += fs.NumRecords()
			}
			spent += time.Since(start)
			r.Close()
		}
		// The rate over the log's million records, so that both readers
		// are measured on the same bytes.
		return passes * 1e6 / spent.Seconds()
	}
	var committed, uncommitted []float64
	for run := range runs {
		var rc, ru float64
		if run%2 == 0 { // alternating which reads first
			rc = consume(kgo.ReadCommitted(), 900000)
			ru = consume(kgo.ReadUncommitted(), 1000000)
		} else {
			ru = consume(kgo.ReadUncommitted(), 1000000)
			rc = consume(kgo.ReadCommitted(), 900000)
		}
		committed, uncommitted = append(committed, rc), append(uncommitted, ru)
		report("run %d: consume read_committed %.0f log records/s, read_uncommitted %.0f log records/s", run+1, rc, ru)
	}
	report("consume: read_committed median %.0f log records/s, read_uncommitted %.0f (%.2f)", itest.Median(committed), itest.Median(uncommitted),
		itest.Median(committed)/itest.Median(uncommitted))
}
