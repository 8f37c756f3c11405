package api

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestFrontendSessions runs frontend registration through the API of a
// real Raft group: a registered frontend is in the model, heartbeats keep
// it, one that stops heartbeating is removed after the session timeout, and
// its next heartbeat is refused (not retriable) so it registers again under
// the same id. The cluster-wide settings go through the same API.
func TestFrontendSessions(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{sessionTimeout: time.Second})[0]
	c := client(m)
	ctx := context.Background()
	a, err := c.RegisterFrontend(ctx, cluster.RegisterFrontendRequest{Name: "a", KafkaAddr: "127.0.0.1:9092"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.RegisterFrontend(ctx, cluster.RegisterFrontendRequest{Name: "b", KafkaAddr: "127.0.0.1:9094"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterFrontend(ctx, cluster.RegisterFrontendRequest{Name: "c", KafkaAddr: "no-port"}); protocol.CodeOf(err) != protocol.InvalidRequest {
		t.Fatalf("a bad address: %v", err)
	}
	// a heartbeats; b stays silent and expires. Registered first, a would
	// lapse no later than b without its heartbeats: a alone is never seen.
	testkit.Eventually(t, 20*time.Second, func() error {
		if err := c.FrontendHeartbeat(ctx, cluster.FrontendHeartbeatRequest{ID: a.ID, Epoch: a.Epoch}); err != nil {
			t.Fatal(err)
		}
		snap, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Frontends) != 1 || snap.Frontends[0].ID != a.ID {
			return fmt.Errorf("frontends %+v, want a (id %d) alone once b's session lapsed", snap.Frontends, a.ID)
		}
		return nil
	})
	err = c.FrontendHeartbeat(ctx, cluster.FrontendHeartbeatRequest{ID: b.ID, Epoch: b.Epoch})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code.Retriable() {
		t.Fatalf("a removed frontend's heartbeat: %v, want a refusal that is not retriable", err)
	}
	again, err := c.RegisterFrontend(ctx, cluster.RegisterFrontendRequest{Name: "b", KafkaAddr: "127.0.0.1:9094"})
	if err != nil || again.ID != b.ID {
		t.Fatalf("b registering again: %+v %v, want id %d", again, err, b.ID)
	}

	cfg, err := c.SetClusterConfig(ctx, cluster.AlterTopicConfigRequest{Set: map[string]string{"auto.create.topics.enable": "true"}})
	if err != nil || cfg["auto.create.topics.enable"] != "true" {
		t.Fatalf("cluster config: %v %v", cfg, err)
	}
	if _, err := c.SetClusterConfig(ctx, cluster.AlterTopicConfigRequest{Set: map[string]string{"num.partitions": "x"}}); protocol.CodeOf(err) != protocol.InvalidConfig {
		t.Fatalf("a bad setting: %v, want INVALID_CONFIG", err)
	}
}
