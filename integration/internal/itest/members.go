package itest

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/memberlog"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// MemberEvent is one line of a member command's output.
type MemberEvent = memberlog.Event

// Member is a running sluice-testmember process and what it reported.
type Member struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	events []MemberEvent
	owned  map[int32]bool
	ended  int64 // Unix nanoseconds of the kill or exit, 0 while running
}

// StartMember runs an SDK group member process (sluice-testmember); it is
// killed when the test ends.
func StartMember(t *testing.T, c *localcluster.Cluster, name, group, topic string, args ...string) *Member {
	t.Helper()
	return StartMemberProc(t, "sluice-testmember", name,
		append([]string{"-metadata", c.MetadataURL(), "-offsets", c.OffsetsURL(), "-group", group, "-topic", topic, "-client-id", name}, args...))
}

// StartMemberProc runs a member binary whose stdout is member events.
func StartMemberProc(t *testing.T, binary, name string, args []string) *Member {
	t.Helper()
	cmd := exec.Command(filepath.Join(BuildBinaries(t), binary), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &Member{name: name, cmd: cmd, done: make(chan struct{}), owned: map[int32]bool{}}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e MemberEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			m.mu.Lock()
			m.events = append(m.events, e)
			switch e.Ev {
			case "assign":
				m.owned[e.Partition] = true
			case "revoke", "lost":
				delete(m.owned, e.Partition)
			}
			m.mu.Unlock()
		}
		_ = cmd.Wait()
		m.mu.Lock()
		if m.ended == 0 {
			m.ended = time.Now().UnixNano()
		}
		m.mu.Unlock()
	}()
	t.Cleanup(func() {
		if t.Failed() {
			// A member still running when the test failed may be stuck:
			// SIGQUIT makes it print its goroutines to stderr.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-m.done:
			case <-time.After(2 * time.Second):
			}
		}
		_ = cmd.Process.Kill()
		<-m.done
		if t.Failed() && stderr.Len() > 0 {
			out := stderr.String()
			if d := os.Getenv("SLUICE_DEBUG_LOGS"); d != "" {
				_ = os.WriteFile(filepath.Join(d, name+".stderr"), []byte(out), 0o644)
			}
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			t.Logf("%s stderr (tail): %s", name, out)
		}
	})
	return m
}

// Kill sends SIGKILL and records the moment: the member's ownership ends there.
func (m *Member) Kill() {
	m.mu.Lock()
	m.ended = time.Now().UnixNano()
	m.mu.Unlock()
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	m.mu.Lock()
	m.owned = map[int32]bool{}
	m.mu.Unlock()
}

// Stop sends SIGTERM (the member commits, revokes and leaves) and waits.
func (m *Member) Stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	<-m.done
}

// OwnedNow returns the partitions the member owns now.
func (m *Member) OwnedNow() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.owned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Processed returns the values of the records the member processed.
func (m *Member) Processed() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.events {
		if e.Ev == "rec" {
			out = append(out, e.Value)
		}
	}
	return out
}

// Snapshot returns the events the member reported so far and when it
// ended (Unix nanoseconds, 0 while running).
func (m *Member) Snapshot() ([]MemberEvent, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]MemberEvent(nil), m.events...), m.ended
}

// WaitOwnership waits until the members own the given numbers of partitions
// (in order) and together own all n partitions; it returns when that held.
func WaitOwnership(t *testing.T, n int, want []int, members ...*Member) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		total, ok := 0, true
		var got []int
		for i, m := range members {
			o := len(m.OwnedNow())
			got = append(got, o)
			total += o
			if want != nil && o != want[i] {
				ok = false
			}
		}
		if ok && total == n {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("ownership did not reach %v over %d partitions: %v", want, n, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type interval struct {
	member     string
	start, end int64
}

// CheckExclusiveOwnership checks from the members' event logs that no
// partition was owned by two members at any moment: ownership runs from an
// assign event to the next revoke or lost event, or to the member's end.
func CheckExclusiveOwnership(t *testing.T, members ...*Member) {
	t.Helper()
	byPartition := map[int32][]interval{}
	for _, m := range members {
		events, ended := m.Snapshot()
		open := map[int32]int64{}
		for _, e := range events {
			switch e.Ev {
			case "assign":
				if _, dup := open[e.Partition]; dup {
					t.Fatalf("%s: partition %d assigned twice without a revoke", m.name, e.Partition)
				}
				open[e.Partition] = e.Time
			case "revoke", "lost":
				start, ok := open[e.Partition]
				if !ok {
					t.Fatalf("%s: partition %d revoked without being assigned", m.name, e.Partition)
				}
				byPartition[e.Partition] = append(byPartition[e.Partition], interval{m.name, start, e.Time})
				delete(open, e.Partition)
			}
		}
		end := ended
		if end == 0 {
			end = time.Now().UnixNano()
		}
		for p, start := range open {
			byPartition[p] = append(byPartition[p], interval{m.name, start, end})
		}
	}
	for p, ivs := range byPartition {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].start < ivs[i-1].end {
				t.Fatalf("partition %d owned by %s from %d and by %s until %d: two owners for %v",
					p, ivs[i].member, ivs[i].start, ivs[i-1].member, ivs[i-1].end, time.Duration(ivs[i-1].end-ivs[i].start))
			}
		}
	}
}

// WaitProcessed waits until the union of what the members processed covers want.
func WaitProcessed(t *testing.T, want []string, members ...*Member) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		seen := map[string]bool{}
		for _, m := range members {
			for _, v := range m.Processed() {
				seen[v] = true
			}
		}
		missing := 0
		for _, v := range want {
			if !seen[v] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records never processed by any member", missing, len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ConsumerConfig is an SDK group consumer's configuration for the
// cluster: client id group, reading topic from the earliest offset,
// committing every 200 ms.
func ConsumerConfig(c *localcluster.Cluster, group, topic string) client.ConsumerConfig {
	cfg := client.DefaultConsumerConfig()
	cfg.Metadata, cfg.Offsets = c.MetadataURLs(), c.OffsetsURLs()
	cfg.Group, cfg.Topics, cfg.ClientID = group, []string{topic}, group
	cfg.AutoOffsetReset = "earliest"
	cfg.AutoCommitInterval = 200 * time.Millisecond
	return cfg
}

// OffsetsLeader finds the offsets replica that leads its Raft group.
func OffsetsLeader(t *testing.T, c *localcluster.Cluster) *localcluster.Proc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range c.OffsetsReplicas() {
			resp, err := http.Get("http://" + p.AdminAddr + "/metrics")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "\nsluice_offsets_raft_is_leader 1\n") {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no offsets leader found")
	return nil
}
