package itest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// WaitLeaders waits until every partition's leader answers a ListOffsets.
func WaitLeaders(t *testing.T, ctx context.Context, c interface{ MetadataURLs() []string }, topic string, partitions int) {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("e2e")
	defer pool.Close()
	deadline := time.Now().Add(30 * time.Second)
	for p := 0; p < partitions; p++ {
		for {
			_, err := meta.Refresh(ctx)
			if err == nil {
				_, err = client.ListOffset(ctx, meta, pool, topic, int32(p), -1)
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d never became available: %v", p, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// CreateTopic creates a topic through the frontend and waits for its
// partitions' leaders.
func CreateTopic(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions, rf int) {
	t.Helper()
	CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: partitions, ReplicationFactor: rf})
}

// CreateTopicWith is CreateTopic of a whole request (a topic with configs).
func CreateTopicWith(t *testing.T, ctx context.Context, c *localcluster.Cluster, req cluster.CreateTopicRequest) {
	t.Helper()
	admin := cluster.NewClient(c.FrontendURLs())
	if _, err := admin.CreateTopic(ctx, req); err != nil {
		t.Fatal(err)
	}
	WaitLeaders(t, ctx, c, req.Name, req.Partitions)
}

// LeaderOf returns the node id leading a partition (metadata's view).
func LeaderOf(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, p int32) (int32, cluster.Partition) {
	t.Helper()
	tp, err := cluster.NewClient(c.MetadataURLs()).DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return tp.Partitions[p].Leader, tp.Partitions[p]
}

// WaitFullISR waits until every partition of the topic has all replicas in sync.
func WaitFullISR(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, rf int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		tp, err := cluster.NewClient(c.MetadataURLs()).DescribeTopic(ctx, topic)
		ok := err == nil
		for _, p := range tp.Partitions {
			ok = ok && len(p.ISR) == rf && p.Leader >= 0
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR never became full: %+v %v", tp.Partitions, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// CreateReplicated creates a topic with replication factor 3 and the given
// min.insync.replicas and waits for every ISR to be full.
func CreateReplicated(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions int, minISR string) {
	t.Helper()
	CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: partitions, ReplicationFactor: 3,
		Config: map[string]string{"min.insync.replicas": minISR}})
	WaitFullISR(t, ctx, c, topic, 3)
}
