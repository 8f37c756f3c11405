package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// readValues reads every partition of topic back from the local cluster.
func readValues(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions int) map[int32][]string {
	t.Helper()
	return loadcheck.ReadValues(t, ctx, c.MetadataURLs(), topic, partitions)
}

func quietProducer(t *testing.T, frontends []string) *client.Producer {
	t.Helper()
	cfg := client.DefaultProducerConfig()
	cfg.Frontends = frontends
	cfg.Linger = 2 * time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFrontendKillDuringProducerLoad: kill -9 one of two frontends under a
// steady SDK load: the producer moves to the other, no acknowledged record
// is lost, none is stored twice, and per-key order holds.
func TestFrontendKillDuringProducerLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, ctx, c, "fe-kill", 4, 3, map[string]string{"min.insync.replicas": "2"})
	p := quietProducer(t, c.FrontendURLs())
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
	loadcheck.CheckExactlyOnceInOrder(t, readValues(t, ctx, c, "fe-kill", 4), l)
}

// TestLeaderKillDuringIdempotentLoad: kill -9 a partition leader under an
// idempotent acks=all load: after the failover every record is stored
// exactly once, in per-key order.
func TestLeaderKillDuringIdempotentLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, ctx, c, "idem", 3, 3, map[string]string{"min.insync.replicas": "2"})
	waitFullISR(t, ctx, c, "idem", 3)
	p := quietProducer(t, c.FrontendURLs())
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	go func() { done <- loadcheck.Run(t, p, "idem", 30, 200, stop) }()
	time.Sleep(2 * time.Second)
	leader, _ := leaderOf(t, ctx, c, "idem", 0)
	c.StopProc(c.Proc(fmt.Sprintf("storage-%d", leader)), true)
	time.Sleep(5 * time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, ": the producer should ride out the failover")
	loadcheck.CheckExactlyOnceInOrder(t, readValues(t, ctx, c, "idem", 3), l)
}
