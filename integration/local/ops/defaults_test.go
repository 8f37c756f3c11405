package ops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestDurableDefaults: a topic created without a replication factor over
// HTTP on a 3-node cluster gets 3 replicas and min.insync.replicas 2, which
// the storage nodes enforce: with both followers paused, acks=all is
// refused with NOT_ENOUGH_REPLICAS until the cluster setting is lowered at
// run time, and then accepted without a restart. On `sluice-dev -storage 1`
// such a topic gets 1 replica, and the metadata leader logs why.
func TestDurableDefaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	t.Run("three nodes", func(t *testing.T) {
		c := itest.StartCluster(t, 3, "-replica-lag-time-max", "1s")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// No replication_factor in the body.
		if _, err := cluster.NewClient([]string{c.FrontendURL()}).CreateTopic(ctx, cluster.CreateTopicRequest{Name: "durable", Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		itest.WaitFullISR(t, ctx, c, "durable", 3)
		out, errOut, code := itest.Sluicectl(t, c, "", "topic", "describe", "durable")
		if code != 0 || !strings.HasPrefix(out, "Topic: durable  Partitions: 1  ReplicationFactor: 3  MinInsyncReplicas: 2\n") {
			t.Fatalf("topic describe: exit %d %s\n%s", code, errOut, out)
		}
		if code, err := itest.ProduceOne(ctx, c.FrontendURL(), "durable", "all-in-sync"); err != nil || code != 0 {
			t.Fatalf("produce with the ISR full: code %d, %v", code, err)
		}
		leader, p := itest.LeaderOf(t, ctx, c, "durable", 0)
		for _, id := range p.Replicas {
			if id == leader {
				continue
			}
			proc := c.Proc("storage-" + strconv.Itoa(int(id)))
			if err := c.Pause(proc); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Resume(proc) })
		}
		testkit.Eventually(t, 30*time.Second, func() error {
			if code, err := itest.ProduceOne(ctx, c.FrontendURL(), "durable", "alone"); err != nil || code != int16(protocol.NotEnoughReplicas) {
				return fmt.Errorf("acks=all with the leader alone in sync: code %d, %v; want NOT_ENOUGH_REPLICAS", code, err)
			}
			return nil
		})
		if out, errOut, code := itest.Sluicectl(t, c, "", "cluster", "config", "--set", "min.insync.replicas=1"); code != 0 || !strings.Contains(out, "min.insync.replicas         1      set\n") {
			t.Fatalf("cluster config --set: exit %d %s\n%s", code, errOut, out)
		}
		testkit.Eventually(t, 30*time.Second, func() error {
			if code, err := itest.ProduceOne(ctx, c.FrontendURL(), "durable", "lowered"); err != nil || code != 0 {
				return fmt.Errorf("acks=all after min.insync.replicas=1: code %d, %v", code, err)
			}
			return nil
		})
	})

	t.Run("one node", func(t *testing.T) {
		d := startDev(t, "-storage", "1")
		out := itest.MustSluicectl(t, d, "topic", "create", "alone", "--partitions", "2")
		if out != "created topic alone with 2 partition(s), replication factor 1\n" {
			t.Fatalf("topic create on one storage node: %q", out)
		}
		if out := itest.MustSluicectl(t, d, "topic", "describe", "alone"); !strings.HasPrefix(out, "Topic: alone  Partitions: 2  ReplicationFactor: 1  MinInsyncReplicas: 1\n") {
			t.Fatalf("topic describe:\n%s", out)
		}
		logs, err := filepath.Glob(filepath.Join(d.data, "logs", "metadata-*.log"))
		if err != nil || len(logs) == 0 {
			t.Fatalf("metadata logs: %v %v", logs, err)
		}
		warned := false
		for _, l := range logs {
			b, err := os.ReadFile(l)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "fewer replicas than default.replication.factor") &&
					strings.Contains(line, `"topic":"alone"`) && strings.Contains(line, `"live_storage_nodes":1`) {
					warned = true
				}
			}
		}
		if !warned {
			t.Fatalf("no metadata log warns that topic alone got fewer replicas than default.replication.factor")
		}
		// The setting is the cluster's, shown with its default.
		if out := itest.MustSluicectl(t, d, "cluster", "config"); !strings.Contains(out, "default.replication.factor  3      default\n") {
			t.Fatalf("cluster config:\n%s", out)
		}
	})
}
