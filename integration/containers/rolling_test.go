package containers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
)

// testScaleFrontends starts frontend-2 and frontend-3 while a load goes
// through frontend-1, then puts a second load through all three. Both new
// frontends serve produce requests as soon as they are ready (they hold no
// state: everything comes from metadata), the first load never notices, and
// both loads are read back exactly once in per-key order.
func testScaleFrontends(t *testing.T, c *tcCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, spread, partitions = "tc-scale", "tc-scale-spread", 3
	c.createTopic(t, ctx, topic, partitions, 3)
	c.createTopic(t, ctx, spread, partitions, 3)
	c.waitFullISR(t, ctx, topic, 3)
	c.waitFullISR(t, ctx, spread, 3)

	p := c.producerOn(t, []string{c.frontendURL})
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	go func() { done <- runKeyedLoad(t, p, topic, 30, stop) }()
	time.Sleep(time.Second)

	start := time.Now()
	c.startAll(ctx, []node{c.frontendNode(2), c.frontendNode(3)})
	t.Logf("frontends 2 and 3 ready in %v under load", time.Since(start).Round(time.Millisecond))

	p2 := c.producerOn(t, c.frontendURLs())
	stop2 := make(chan struct{})
	done2 := make(chan *loadcheck.KeyedLoad)
	go func() { done2 <- runKeyedLoad(t, p2, spread, 30, stop2) }()
	time.Sleep(4 * time.Second)
	close(stop)
	close(stop2)
	l, l2 := <-done, <-done2
	for _, pr := range []*client.Producer{p, p2} {
		if err := pr.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l.RequireAllAcknowledged(t, ": the load through frontend-1 should not notice the scale-out")
	l2.RequireAllAcknowledged(t, ": the load spread over three frontends")

	hc := &http.Client{Timeout: 2 * time.Second}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("frontend-%d", i)
		v := metricValue(hc, c.endpoint(name, "8081/tcp")+"/metrics", `sluice_frontend_produce_requests_total{status="200"}`)
		n, _ := strconv.ParseFloat(v, 64)
		if n <= 0 {
			t.Fatalf("%s answered no produce request with 200 (metric %q)", name, v)
		}
		t.Logf("%s answered %v produce requests with 200", name, n)
	}
	loadcheck.CheckExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)
	loadcheck.CheckExactlyOnceInOrder(t, c.readValues(t, ctx, spread, partitions), l2)
}

// testRollingRestart restarts every container one at a time (graceful stop,
// start on the same disk, then wait until the cluster is whole again) while
// an idempotent acks=all load goes through the frontends and a consumer group
// member reads along with auto-commit. Afterwards every acknowledged record
// is in the log once in per-key order, and the member, which rode out the
// restart of every offsets replica, storage node and frontend, received
// every one of them.
func testRollingRestart(t *testing.T, c *tcCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const topic, partitions, group = "tc-rolling", 3, "tc-rolling-group"
	c.createTopic(t, ctx, topic, partitions, 3)
	c.waitPreferredLeaders(t, ctx, topic)

	p := c.producerOn(t, c.frontendURLs())
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	go func() { done <- runKeyedLoad(t, p, topic, 30, stop) }()

	cons := c.groupConsumer(t, group, topic, c.offsetsURLs, true)
	want := make(chan map[string]bool, 1)
	consumed := make(chan error, 1)
	go func() { consumed <- readAlong(ctx, cons, want) }()
	time.Sleep(2 * time.Second)

	var order []string
	for _, svc := range []string{"metadata", "offsets", "storage", "frontend"} {
		for i := 1; i <= 3; i++ {
			order = append(order, fmt.Sprintf("%s-%d", svc, i))
		}
	}
	for _, name := range order {
		start := time.Now()
		c.stop(name)
		c.restart(name)
		switch name[:len(name)-2] {
		case "metadata":
			c.raftLeader(t, ctx, "metadata", "7072/tcp", nil)
		case "offsets":
			c.raftLeader(t, ctx, "offsets", "7082/tcp", nil)
		case "storage":
			c.waitPreferredLeaders(t, ctx, topic)
		}
		t.Logf("restarted %s; cluster whole again after %v", name, time.Since(start).Round(time.Millisecond))
	}

	time.Sleep(time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": the producer should ride out the rolling restart")
	loadcheck.CheckExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)
	want <- l.AckedSet()
	if err := <-consumed; err != nil {
		t.Fatalf("group member: %v", err)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatalf("close the group member: %v", err)
	}
	t.Logf("the group member received all %d acknowledged records", len(l.AckedSet()))
}

// readAlong polls cons until it has received every value of the set sent on
// want (sent once the load is over); it gives up 90s after receiving the set.
// Records read again after a rebalance (at-least-once) are fine.
func readAlong(ctx context.Context, cons *client.Consumer, want <-chan map[string]bool) error {
	seen := map[string]bool{}
	var target map[string]bool
	var deadline time.Time
	for {
		select {
		case target = <-want:
			deadline = time.Now().Add(90 * time.Second)
		default:
		}
		if target != nil {
			missing := 0
			for v := range target {
				if !seen[v] {
					missing++
				}
			}
			if missing == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d acknowledged records never received", missing, len(target))
			}
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		recs, err := cons.Poll(pctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("poll: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, r := range recs {
			seen[string(r.Value)] = true
		}
	}
}

// frontendURLs lists the published HTTP ports of the running frontends.
func (c *tcCluster) frontendURLs() []string {
	var urls []string
	for i := 1; ; i++ {
		name := fmt.Sprintf("frontend-%d", i)
		c.mu.Lock()
		_, ok := c.nodes[name]
		c.mu.Unlock()
		if !ok {
			return urls
		}
		urls = append(urls, c.endpoint(name, "8080/tcp"))
	}
}
