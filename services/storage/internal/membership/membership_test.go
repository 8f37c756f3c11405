package membership

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// newFake serves s as the current model of a fake metadata service, closed
// when the test ends.
func newFake(t *testing.T, s *cluster.Snapshot) *fakecluster.Metadata {
	m := fakecluster.NewMetadata()
	t.Cleanup(m.Close)
	m.Update(func(cur *cluster.Snapshot) { cur.Topics = s.Topics })
	return m
}

func topicSnap(version uint64, names ...string) *cluster.Snapshot {
	s := &cluster.Snapshot{Version: version}
	for _, n := range names {
		s.Topics = append(s.Topics, cluster.Topic{Name: n, ReplicationFactor: 1,
			Partitions: []cluster.Partition{{ID: 0, Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}})
	}
	return s
}

func TestMembershipRegistersAppliesAndReregisters(t *testing.T) {
	dir := t.TempDir()
	// A partition directory of topic "old" exists on disk from an earlier run.
	if err := os.MkdirAll(filepath.Join(dir, "old-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := newFake(t, topicSnap(5, "old", "live"))
	fake.SetLagging(topicSnap(2))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := replica.NewManager(dir, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	m := New(Config{NodeID: 1, Addr: "127.0.0.1:1", Heartbeat: 20 * time.Millisecond, WatchWait: 50 * time.Millisecond},
		cluster.NewClient([]string{fake.URL()}), mgr, log)
	if err := m.Ready(); err == nil {
		t.Fatal("ready before registering")
	}
	m.Start()
	defer m.Stop()
	testkit.WaitFor(t, 10*time.Second, "ready", func() bool { return m.Ready() == nil })

	// The first snapshot was a linearizable read: both partitions are open,
	// and the lagging member's older watch answer (no topics) deleted nothing.
	if fake.ConsistentReads() == 0 {
		t.Fatal("first snapshot was not a linearizable read")
	}
	watched := fake.Watches()
	testkit.WaitFor(t, 10*time.Second, "several watch rounds of the lagging member", func() bool { return fake.Watches() >= watched+4 })
	for _, name := range []string{"old", "live"} {
		if _, err := mgr.Get(name, 0); err != nil {
			t.Fatalf("%s-0: %v", name, err)
		}
	}

	// A newer snapshot without "old" (deleted) removes it.
	fake.SetLagging(topicSnap(9, "live"))
	testkit.WaitFor(t, 10*time.Second, "deleted topic removed", func() bool {
		_, err := mgr.Get("old", 0)
		_, statErr := os.Stat(filepath.Join(dir, "old-0"))
		return err != nil && os.IsNotExist(statErr)
	})

	// Fenced by metadata: the node registers again with a new epoch.
	before := fake.Registrations()
	fake.FenceNextHeartbeat()
	testkit.WaitFor(t, 10*time.Second, "re-registration", func() bool { return fake.Registrations() > before })
	testkit.WaitFor(t, 10*time.Second, "new epoch", func() bool { return m.Epoch() >= 20 })
}

func TestApplyFailureKeepsTheNodeNotReady(t *testing.T) {
	dir := t.TempDir()
	// A file where the partition directory should be: opening the log fails.
	if err := os.WriteFile(filepath.Join(dir, "t-0"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := newFake(t, topicSnap(3, "t"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := replica.NewManager(dir, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	m := New(Config{NodeID: 1, Addr: "127.0.0.1:1", Heartbeat: 20 * time.Millisecond, WatchWait: 50 * time.Millisecond},
		cluster.NewClient([]string{fake.URL()}), mgr, log)
	m.Start()
	defer m.Stop()
	testkit.WaitFor(t, 10*time.Second, "a failed apply", func() bool { err := m.Ready(); return err != nil && strings.Contains(err.Error(), "applying") })
	// The obstacle goes away: the retry opens the partition and the node is ready.
	if err := os.Remove(filepath.Join(dir, "t-0")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "ready after the retry", func() bool { return m.Ready() == nil })
	if _, err := mgr.Get("t", 0); err != nil {
		t.Fatal(err)
	}
}
