package ops

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestFrontendKillDuringProducerLoad: kill -9 one of two frontends under a
// steady SDK load: the producer moves to the other, no acknowledged record
// is lost, none is stored twice, and per-key order holds.
func TestFrontendKillDuringProducerLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: "fe-kill", Partitions: 4, ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "2"}})
	p := itest.QuietProducer(t, c.FrontendURLs())
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	go func() { done <- loadcheck.Run(t, p, "fe-kill", 50, 200, stop) }()
	time.Sleep(2 * time.Second)
	c.StopProc(c.Proc("frontend"), true)
	time.Sleep(3 * time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": the producer should move to the other frontend")
	loadcheck.CheckExactlyOnceInOrder(t, itest.ReadValues(t, ctx, c, "fe-kill", 4), l)
}

// TestLeaderKillDuringIdempotentLoad: kill -9 a partition leader under an
// idempotent acks=all load: after the failover every record is stored
// exactly once, in per-key order.
func TestLeaderKillDuringIdempotentLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: "idem", Partitions: 3, ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "2"}})
	itest.WaitFullISR(t, ctx, c, "idem", 3)
	p := itest.QuietProducer(t, c.FrontendURLs())
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	go func() { done <- loadcheck.Run(t, p, "idem", 30, 200, stop) }()
	time.Sleep(2 * time.Second)
	leader, _ := itest.LeaderOf(t, ctx, c, "idem", 0)
	c.StopProc(c.Proc(fmt.Sprintf("storage-%d", leader)), true)
	time.Sleep(5 * time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": the producer should ride out the failover")
	loadcheck.CheckExactlyOnceInOrder(t, itest.ReadValues(t, ctx, c, "idem", 3), l)
}
