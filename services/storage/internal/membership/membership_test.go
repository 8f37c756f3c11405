package membership

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/testkit"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// fakeMetadata stands in for the metadata service, which lives in another
// module: it serves registration, heartbeats, and snapshots (linearizable
// reads and watches answered from separate, settable states).
type fakeMetadata struct {
	mu          sync.Mutex
	epoch       int64             // the node's registration epoch
	registers   int               // registrations seen
	fenceNext   bool              // answer the next heartbeat STALE_BROKER_EPOCH
	current     *cluster.Snapshot // served to consistent reads
	watch       *cluster.Snapshot // served to watches (a lagging member)
	consistents int               // consistent reads seen
}

func (f *fakeMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	write := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.URL.Path == "/v1/nodes/register":
		f.registers++
		f.epoch += 10
		write(200, cluster.RegisterResponse{Epoch: f.epoch})
	case r.URL.Path == "/v1/nodes/heartbeat":
		if f.fenceNext {
			f.fenceNext = false
			write(409, cluster.ErrorBody{ErrorCode: int16(protocol.StaleBrokerEpoch), Error: "fenced"})
			return
		}
		write(200, struct{}{})
	case r.URL.Path == "/v1/cluster" && r.URL.Query().Get("consistent") == "true":
		f.consistents++
		write(200, f.withNode(f.current))
	case r.URL.Path == "/v1/cluster":
		time.Sleep(20 * time.Millisecond) // a short long-poll
		write(200, f.withNode(f.watch))
	default:
		write(404, cluster.ErrorBody{Error: "no route"})
	}
}

// withNode lists node 1 with its current epoch in s (as any snapshot taken
// after the registration does).
func (f *fakeMetadata) withNode(s *cluster.Snapshot) *cluster.Snapshot {
	c := *s
	c.Nodes = []cluster.Node{{ID: 1, Addr: "x", Epoch: f.epoch, Alive: true}}
	return &c
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
	fake := &fakeMetadata{current: topicSnap(5, "old", "live"), watch: topicSnap(2)}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := replica.NewManager(dir, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	m := New(Config{NodeID: 1, Addr: "127.0.0.1:1", Heartbeat: 20 * time.Millisecond, WatchWait: 50 * time.Millisecond},
		cluster.NewClient([]string{srv.URL}), mgr, log)
	if err := m.Ready(); err == nil {
		t.Fatal("ready before registering")
	}
	m.Start()
	defer m.Stop()
	testkit.WaitFor(t, 10*time.Second, "ready", func() bool { return m.Ready() == nil })

	// The first snapshot was a linearizable read: both partitions are open,
	// and the lagging member's older watch answer (no topics) deleted nothing.
	fake.mu.Lock()
	consistents := fake.consistents
	fake.mu.Unlock()
	if consistents == 0 {
		t.Fatal("first snapshot was not a linearizable read")
	}
	time.Sleep(200 * time.Millisecond) // several watch rounds of the lagging member
	for _, name := range []string{"old", "live"} {
		if _, err := mgr.Get(name, 0); err != nil {
			t.Fatalf("%s-0: %v", name, err)
		}
	}

	// A newer snapshot without "old" (deleted) removes it.
	fake.mu.Lock()
	fake.watch = topicSnap(9, "live")
	fake.mu.Unlock()
	testkit.WaitFor(t, 10*time.Second, "deleted topic removed", func() bool {
		_, err := mgr.Get("old", 0)
		_, statErr := os.Stat(filepath.Join(dir, "old-0"))
		return err != nil && os.IsNotExist(statErr)
	})

	// Fenced by metadata: the node registers again with a new epoch.
	fake.mu.Lock()
	fake.fenceNext = true
	before := fake.registers
	fake.mu.Unlock()
	testkit.WaitFor(t, 10*time.Second, "re-registration", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.registers > before
	})
	testkit.WaitFor(t, 10*time.Second, "new epoch", func() bool { return m.Epoch() >= 20 })
}

func TestApplyFailureKeepsTheNodeNotReady(t *testing.T) {
	dir := t.TempDir()
	// A file where the partition directory should be: opening the log fails.
	if err := os.WriteFile(filepath.Join(dir, "t-0"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := &fakeMetadata{current: topicSnap(3, "t"), watch: topicSnap(3, "t")}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := replica.NewManager(dir, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	m := New(Config{NodeID: 1, Addr: "127.0.0.1:1", Heartbeat: 20 * time.Millisecond, WatchWait: 50 * time.Millisecond},
		cluster.NewClient([]string{srv.URL}), mgr, log)
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
