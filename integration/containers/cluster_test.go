package containers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// TestContainerCluster starts one containerised cluster and runs the
// scenarios on it in order; the last two each kill a node (an offsets
// replica, then a storage node).
func TestContainerCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("containers suite")
	}
	start := time.Now()
	c := startCluster(t)
	t.Logf("cluster ready in %v", time.Since(start).Round(time.Millisecond))

	t.Run("ProduceAndTwoGroups", func(t *testing.T) { testProduceAndTwoGroups(t, c) })
	t.Run("PauseMetadataLeader", func(t *testing.T) { testPauseMetadataLeader(t, c) })
	t.Run("KillOffsetsReplica", func(t *testing.T) { testKillOffsetsReplica(t, c) })
	t.Run("StorageLeaderKill", func(t *testing.T) { testStorageLeaderKill(t, c) })
}

// testProduceAndTwoGroups: an idempotent acks=all SDK producer through the
// frontend, then two consumer groups each receive every record; the log holds
// every acknowledged record once, in per-key order.
func testProduceAndTwoGroups(t *testing.T, c *tcCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, partitions = "tc-groups", 4
	c.createTopic(t, ctx, topic, partitions, 3)
	c.waitFullISR(t, ctx, topic, 3)

	p := c.producer(t)
	l := &keyedLoad{acked: map[string]bool{}}
	l.sendN(t, p, topic, 20, 3000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(l.errs) > 0 || len(l.acked) != l.sent {
		t.Fatalf("acknowledged %d of %d, %d failed (%s)", len(l.acked), l.sent, len(l.errs), l.errSummary())
	}

	var wg sync.WaitGroup
	for _, g := range []string{"tc-group-a", "tc-group-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.consumeAll(t, ctx, g, topic, l.ackedSet())
		}()
	}
	wg.Wait()
	checkExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)
}

// testStorageLeaderKill: kill -9 the storage leader of partition 0 under an
// idempotent acks=all load; afterwards no acknowledged record is lost, none
// is stored twice and per-key order holds.
func testStorageLeaderKill(t *testing.T, c *tcCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, partitions = "tc-kill", 3
	c.createTopic(t, ctx, topic, partitions, 3)
	c.waitFullISR(t, ctx, topic, 3)

	p := c.producer(t)
	stop := make(chan struct{})
	done := make(chan *keyedLoad)
	go func() { done <- runKeyedLoad(t, p, topic, 30, stop) }()
	time.Sleep(2 * time.Second)
	tp, err := cluster.NewClient(c.metadataURLs).DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := tp.Partitions[0].Leader
	t.Logf("killing storage-%d, leader of %s-0", leader, topic)
	c.kill(fmt.Sprintf("storage-%d", leader))
	time.Sleep(6 * time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(l.acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	if len(l.errs) > 0 || len(l.acked) != l.sent {
		t.Fatalf("acknowledged %d of %d, %d failed (%s): the producer should ride out the failover", len(l.acked), l.sent, len(l.errs), l.errSummary())
	}
	checkExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)
}

func (c *tcCluster) createTopic(t *testing.T, ctx context.Context, topic string, partitions, rf int) {
	t.Helper()
	admin := cluster.NewClient([]string{c.frontendURL})
	_, err := admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: topic, Partitions: partitions, ReplicationFactor: rf,
		Config: map[string]string{"min.insync.replicas": "2"}})
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// waitFullISR waits until every partition has a leader and all rf replicas in sync.
func (c *tcCluster) waitFullISR(t *testing.T, ctx context.Context, topic string, rf int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		tp, err := cluster.NewClient(c.metadataURLs).DescribeTopic(ctx, topic)
		ok := err == nil && len(tp.Partitions) > 0
		if ok {
			for _, p := range tp.Partitions {
				ok = ok && len(p.ISR) == rf && p.Leader >= 0
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR of %s never became full: %+v %v", topic, tp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *tcCluster) producer(t *testing.T) *client.Producer {
	t.Helper()
	cfg := client.DefaultProducerConfig() // acks=all, idempotent
	cfg.Frontends = []string{c.frontendURL}
	cfg.Linger = 2 * time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// consumeAll runs one group member until it has seen every value of want,
// checking that offsets only grow within each partition.
func (c *tcCluster) consumeAll(t *testing.T, ctx context.Context, group, topic string, want map[string]bool) {
	cfg := client.DefaultConsumerConfig()
	cfg.Metadata = c.metadataURLs
	cfg.Offsets = c.offsetsURLs
	cfg.Group = group
	cfg.Topics = []string{topic}
	cfg.ClientID = group + "-member"
	cfg.AutoOffsetReset = client.OffsetResetEarliest
	cfg.Logger = quietLogger()
	cons, err := client.NewConsumer(cfg)
	if err != nil {
		t.Error(err)
		return
	}
	defer cons.Close(context.Background())
	seen := map[string]bool{}
	last := map[int32]int64{}
	deadline := time.Now().Add(90 * time.Second)
	for len(seen) < len(want) {
		if time.Now().After(deadline) {
			t.Errorf("%s: saw %d of %d records in 90s", group, len(seen), len(want))
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		recs, err := cons.Poll(pctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			t.Errorf("%s: poll: %v", group, err)
			return
		}
		for _, r := range recs {
			if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
				t.Errorf("%s: partition %d offset %d after %d", group, r.Partition, r.Offset, prev)
				return
			}
			last[r.Partition] = r.Offset
			if want[string(r.Value)] {
				seen[string(r.Value)] = true
			}
		}
	}
	t.Logf("%s received all %d records", group, len(seen))
}

// readValues reads every partition from the start to its high watermark and
// returns the values per partition in offset order.
func (c *tcCluster) readValues(t *testing.T, ctx context.Context, topic string, partitions int) map[int32][]string {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.metadataURLs))
	pool := storageclient.NewPool("read-back")
	defer pool.Close()
	out := map[int32][]string{}
	for p := int32(0); p < int32(partitions); p++ {
		r := client.NewPartitionReader(meta, pool, topic, p, 0, client.ReaderConfig{MaxWait: 100 * time.Millisecond})
		for {
			recs, err := r.Fetch(ctx)
			if err != nil {
				t.Fatalf("fetch %s-%d at %d: %v", topic, p, r.Offset(), err)
			}
			for _, rec := range recs {
				out[p] = append(out[p], string(rec.Value))
			}
			if r.HighWatermark() >= 0 && r.Offset() >= r.HighWatermark() {
				break
			}
		}
	}
	return out
}

// keyedLoad is what an SDK producer sent ("key-K:seq" values) and what was
// acknowledged.
type keyedLoad struct {
	mu    sync.Mutex
	sent  int
	acked map[string]bool
	errs  []error
	seq   []int
}

func (l *keyedLoad) send(t *testing.T, p *client.Producer, topic string, i, keys int) bool {
	if l.seq == nil {
		l.seq = make([]int, keys)
	}
	k := i % keys
	v := fmt.Sprintf("key-%d:%d", k, l.seq[k])
	l.seq[k]++
	err := p.Send(context.Background(), client.ProducerRecord{Topic: topic, Partition: -1, Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(v)},
		func(m client.RecordMetadata) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if m.Err != nil {
				l.errs = append(l.errs, m.Err)
				return
			}
			l.acked[v] = true
		})
	if err != nil {
		t.Errorf("send: %v", err)
		return false
	}
	l.mu.Lock()
	l.sent++
	l.mu.Unlock()
	return true
}

// sendN sends n records over the given number of keys.
func (l *keyedLoad) sendN(t *testing.T, p *client.Producer, topic string, keys, n int) {
	for i := 0; i < n; i++ {
		if !l.send(t, p, topic, i, keys) {
			return
		}
	}
}

// runKeyedLoad sends a steady keyed load until stop is closed.
func runKeyedLoad(t *testing.T, p *client.Producer, topic string, keys int, stop <-chan struct{}) *keyedLoad {
	l := &keyedLoad{acked: map[string]bool{}}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return l
		default:
		}
		if !l.send(t, p, topic, i, keys) {
			return l
		}
		if i%20 == 19 {
			// A steady load (at most ~10k records/s), not a flood: the
			// machine's two cores are shared with the whole cluster.
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func (l *keyedLoad) ackedSet() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool, len(l.acked))
	for v := range l.acked {
		out[v] = true
	}
	return out
}

func (l *keyedLoad) errSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[string]int{}
	for _, e := range l.errs {
		counts[e.Error()]++
	}
	var parts []string
	for msg, n := range counts {
		parts = append(parts, fmt.Sprintf("%d× %s", n, msg))
	}
	return strings.Join(parts, "; ")
}

// checkExactlyOnceInOrder: every acknowledged record is in the log, none is
// there twice, and each key's sequence numbers only grow.
func checkExactlyOnceInOrder(t *testing.T, stored map[int32][]string, l *keyedLoad) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for p, values := range stored {
		for _, v := range values {
			if seen[v] {
				t.Fatalf("%s stored twice", v)
			}
			seen[v] = true
			k, s, _ := strings.Cut(v, ":")
			n, _ := strconv.Atoi(s)
			if prev, ok := last[k]; ok && n <= prev {
				t.Fatalf("partition %d: %s after seq %d: per-key order broken", p, v, prev)
			}
			last[k] = n
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for v := range l.acked {
		if !seen[v] {
			t.Fatalf("acknowledged record %s is not in the log", v)
		}
	}
	t.Logf("sent %d, acknowledged %d, stored %d, failed %d", l.sent, len(l.acked), len(seen), len(l.errs))
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
