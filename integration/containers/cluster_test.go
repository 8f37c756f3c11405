package containers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestContainerCluster starts one containerised cluster and runs the
// scenarios on it in order; a scenario that kills or stops a container starts
// it again before it ends, so each begins with the whole cluster.
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
	t.Run("StorageLeaderPartition", func(t *testing.T) { testStorageLeaderPartition(t, c) })
	t.Run("ScaleFrontends", func(t *testing.T) { testScaleFrontends(t, c) })
	t.Run("RollingRestart", func(t *testing.T) { testRollingRestart(t, c) })
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
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, topic, 20, 3000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, "")

	var wg sync.WaitGroup
	for _, g := range []string{"tc-group-a", "tc-group-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.consumeAll(t, ctx, g, topic, l.AckedSet())
		}()
	}
	wg.Wait()
	loadcheck.CheckExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)
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
	done := make(chan *loadcheck.KeyedLoad)
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
	if len(l.AckedSet()) == 0 {
		t.Fatal("nothing acknowledged")
	}
	l.RequireAllAcknowledged(t, ": the producer should ride out the failover")
	loadcheck.CheckExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)

	// The killed node recovers its log and catches up.
	c.restart(fmt.Sprintf("storage-%d", leader))
	c.waitPreferredLeaders(t, ctx, topic)
}

// createTopic creates a topic, waiting up to a minute for enough live
// storage nodes (a node an earlier scenario restarted may still be joining).
func (c *tcCluster) createTopic(t *testing.T, ctx context.Context, topic string, partitions, rf int) {
	t.Helper()
	admin := cluster.NewClient([]string{c.frontendURL})
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: topic, Partitions: partitions, ReplicationFactor: rf,
			Config: map[string]string{"min.insync.replicas": "2"}})
		if err == nil {
			return
		}
		if protocol.CodeOf(err) != protocol.InvalidReplicationFactor || time.Now().After(deadline) {
			t.Fatalf("create topic %s: %v", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
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

// producer is an idempotent acks=all SDK producer through frontend-1.
func (c *tcCluster) producer(t *testing.T) *client.Producer {
	t.Helper()
	return c.producerOn(t, []string{c.frontendURL})
}

// producerOn is an SDK producer spreading its requests over the given
// frontends: idempotent with acks=all unless adjust changes it.
func (c *tcCluster) producerOn(t *testing.T, frontends []string, adjust ...func(*client.ProducerConfig)) *client.Producer {
	t.Helper()
	cfg := client.DefaultProducerConfig() // acks=all, idempotent
	cfg.Frontends = frontends
	cfg.Linger = 2 * time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	for _, a := range adjust {
		a(&cfg)
	}
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
	cfg.Logger = loadcheck.QuietLogger()
	consumeAllWith(t, ctx, cfg, want)
}

// consumeAllWith reads with a group consumer configured by cfg until it
// has seen every value of want, in offset order per partition.
func consumeAllWith(t *testing.T, ctx context.Context, cfg client.ConsumerConfig, want map[string]bool) {
	group := cfg.Group
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

// readValues reads every partition of topic back through the published
// metadata ports.
func (c *tcCluster) readValues(t *testing.T, ctx context.Context, topic string, partitions int) map[int32][]string {
	t.Helper()
	return loadcheck.ReadValues(t, ctx, c.metadataURLs, topic, partitions)
}

// runKeyedLoad is a steady keyed load of at most ~10k records/s: the
// machine's two cores are shared with the whole cluster.
func runKeyedLoad(t *testing.T, p *client.Producer, topic string, keys int, stop <-chan struct{}) *loadcheck.KeyedLoad {
	return loadcheck.Run(t, p, topic, keys, 20, stop)
}
