package containers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// testStorageLeaderPartition cuts the storage leader of a partition off the
// network under load, then reconnects it.
//
// To be sure the cut-off leader holds records no one else has, the two other
// storage nodes are frozen (docker pause) for a second first, while an
// acks=leader side load keeps appending to the leader; then the leader is
// disconnected and the others thawed. Metadata fences the leader (a new leader
// with a higher epoch, the old one out of the ISR); once reconnected it must
// truncate that divergent suffix (its log says so), catch up, rejoin the ISR
// and take its preferred leaderships back. The idempotent acks=all load is
// then read back, through it, exactly once and in per-key order.
func testStorageLeaderPartition(t *testing.T, c *tcCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, side, partitions = "tc-partition", "tc-partition-side", 3
	c.createTopic(t, ctx, topic, partitions, 3)
	c.createTopic(t, ctx, side, 1, 3)
	c.waitPreferredLeaders(t, ctx, topic, side)

	meta := cluster.NewClient(c.metadataURLs)
	before := c.partition(t, ctx, meta, side, 0)
	leader := fmt.Sprintf("storage-%d", before.Leader)
	var others []string
	for i := 1; i <= 3; i++ {
		if name := fmt.Sprintf("storage-%d", i); name != leader {
			others = append(others, name)
		}
	}

	p := c.producer(t)
	sideP := c.producerOn(t, []string{c.frontendURL}, func(cfg *client.ProducerConfig) {
		cfg.Acks, cfg.DisableIdempotence = protocol.AcksLeader, true
	})
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	sideDone := make(chan *loadcheck.KeyedLoad)
	go func() { done <- runKeyedLoad(t, p, topic, 30, stop) }()
	go func() { sideDone <- runKeyedLoad(t, sideP, side, 10, stop) }()
	time.Sleep(2 * time.Second)

	// The freeze must stay well inside the storage session timeout (the
	// harness gives metadata 6s), or metadata fences the frozen nodes too.
	t.Logf("freezing %v, then cutting %s (leader of %s-0, epoch %d) off the network", others, leader, side, before.LeaderEpoch)
	frozen := time.Now()
	c.each(others, c.pause)
	time.Sleep(500 * time.Millisecond)
	c.disconnect(leader)
	connected := false
	defer func() {
		if !connected {
			c.reconnect(leader)
		}
	}()
	c.each(others, c.unpause)
	t.Logf("%v frozen for %v", others, time.Since(frozen).Round(time.Millisecond))

	// Fenced: a new leader with a higher epoch, the old one out of the ISR.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur := c.partition(t, ctx, meta, side, 0)
		if cur.Leader >= 0 && cur.Leader != before.Leader && cur.LeaderEpoch > before.LeaderEpoch && !slices.Contains(cur.ISR, before.Leader) {
			t.Logf("%s-0: leader %d at epoch %d, ISR %v", side, cur.Leader, cur.LeaderEpoch, cur.ISR)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was never fenced: %s-0 is %+v", leader, side, cur)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // load goes on without it

	c.reconnect(leader)
	connected = true
	t.Logf("%s reconnected", leader)
	c.waitPreferredLeaders(t, ctx, topic, side)
	time.Sleep(time.Second)
	close(stop)
	l, sl := <-done, <-sideDone
	for _, pr := range []*client.Producer{p, sideP} {
		if err := pr.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l.RequireAllAcknowledged(t, ": the producer should ride out the partition")

	truncated := false
	for _, line := range strings.Split(c.logs(leader), "\n") {
		if strings.Contains(line, "truncating a divergent suffix") && strings.Contains(line, side) {
			t.Logf("%s: %s", leader, line)
			truncated = true
		}
	}
	if !truncated {
		t.Fatalf("%s never truncated the suffix it appended while cut off", leader)
	}
	// Read back through the reconnected node, which leads again.
	loadcheck.CheckExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)
	stored := map[string]bool{}
	for _, vs := range c.readValues(t, ctx, side, 1) {
		for _, v := range vs {
			stored[v] = true
		}
	}
	lost := 0
	for v := range sl.AckedSet() {
		if !stored[v] {
			lost++
		}
	}
	t.Logf("acks=leader side load: %d acknowledged, %d of them lost with the truncated suffix (allowed for acks=leader)", len(sl.AckedSet()), lost)
}

// each runs f on every named container at once.
func (c *tcCluster) each(names []string, f func(string)) {
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(n)
		}()
	}
	wg.Wait()
}

// partition describes one partition through metadata.
func (c *tcCluster) partition(t *testing.T, ctx context.Context, meta *cluster.Client, topic string, p int32) cluster.Partition {
	t.Helper()
	for {
		tp, err := meta.DescribeTopic(ctx, topic)
		if err == nil && int(p) < len(tp.Partitions) {
			return tp.Partitions[p]
		}
		if ctx.Err() != nil {
			t.Fatalf("describe %s: %v", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPreferredLeaders waits until every partition of the topics has all its
// replicas in sync and is led by its preferred (first) replica.
func (c *tcCluster) waitPreferredLeaders(t *testing.T, ctx context.Context, topics ...string) {
	t.Helper()
	meta := cluster.NewClient(c.metadataURLs)
	deadline := time.Now().Add(90 * time.Second)
	for {
		var bad []string
		for _, topic := range topics {
			tp, err := meta.DescribeTopic(ctx, topic)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", topic, err))
				continue
			}
			for _, p := range tp.Partitions {
				if len(p.ISR) != len(p.Replicas) || len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
					bad = append(bad, fmt.Sprintf("%s-%d leader %d ISR %v replicas %v", topic, p.ID, p.Leader, p.ISR, p.Replicas))
				}
			}
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions never all in sync under their preferred leaders: %s", strings.Join(bad, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
