package raftgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// member is one node of an in-process cluster with the HTTP server that
// serves its ApplyPath.
type member struct {
	node *Node
	fsm  *memFSM
	sick atomic.Bool // its WithHealth check fails while set
}

var errSick = errors.New("the state file takes no writes")

// applyAnswer is what applyHandler answers on ApplyPath.
type applyAnswer struct {
	Index       uint64 `json:"index"`
	ForwardedBy string `json:"forwarded_by"`
}

// applyHandler serves ApplyPath the way a service does: only the leader
// applies, and it answers with the FSM's result.
func applyHandler(n *Node) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ApplyPath, func(w http.ResponseWriter, r *http.Request) {
		if !n.IsLeader() {
			http.Error(w, "not the leader", http.StatusServiceUnavailable)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := n.ApplyLocal(r.Context(), body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		idx, ok := resp.(uint64)
		if !ok {
			http.Error(w, fmt.Sprint(resp), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(applyAnswer{Index: idx, ForwardedBy: r.Header.Get(ForwardedHeader)})
	})
	return mux
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startCluster starts size members that bootstrap together, each with its
// HTTP server, and stops them when the test ends.
func startCluster(t *testing.T, size int) []*member {
	t.Helper()
	raftLns := make([]net.Listener, size)
	httpLns := make([]net.Listener, size)
	var peers []Peer
	for i := range size {
		raftLns[i], httpLns[i] = listen(t), listen(t)
		peers = append(peers, Peer{ID: fmt.Sprint(i + 1), RaftAddr: raftLns[i].Addr().String(), HTTPAddr: httpLns[i].Addr().String()})
	}
	members := make([]*member, size)
	for i, p := range peers {
		cfg := testConfig(t.TempDir())
		cfg.ID, cfg.RaftAddr, cfg.HTTPAddr, cfg.Peers = p.ID, p.RaftAddr, p.HTTPAddr, peers
		cfg.NoSync = true
		f := newMemFSM()
		m := &member{fsm: f}
		n, err := New(cfg, f, discardLogger(), WithListener(raftLns[i]), WithHealth(func() error {
			if m.sick.Load() {
				return errSick
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		m.node = n
		srv := &http.Server{Handler: applyHandler(n), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(httpLns[i]) }() // ends at srv.Close
		t.Cleanup(func() {
			_ = srv.Close()
			_ = n.Stop()
		})
		members[i] = m
	}
	for _, m := range members {
		if err := m.node.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return members
}

// waitLeader waits until one of ms leads and returns it.
func waitLeader(t *testing.T, ms []*member) *member {
	t.Helper()
	var leader *member
	testkit.WaitFor(t, 20*time.Second, "a leader", func() bool {
		for _, m := range ms {
			if m.node.IsLeader() {
				leader = m
				return true
			}
		}
		return false
	})
	return leader
}

func TestForwardToLeader(t *testing.T) {
	ms := startCluster(t, 3)
	leader := waitLeader(t, ms)
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
			break
		}
	}
	testkit.WaitFor(t, 20*time.Second, "the follower to learn the leader", func() bool { id, _ := follower.node.Leader(); return id == leader.node.ID() })
	if _, addr := follower.node.Leader(); addr != leader.node.HTTPAddr() {
		t.Fatalf("follower's leader address = %q; want %q", addr, leader.node.HTTPAddr())
	}

	status, ctype, body, err := follower.node.Forward(context.Background(), http.MethodPost, ApplyPath, []byte("k=v"))
	if err != nil || status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("Forward = %d %q %s, %v; want 200 JSON", status, ctype, body, err)
	}
	var ans applyAnswer
	if err := json.Unmarshal(body, &ans); err != nil || ans.Index == 0 || ans.ForwardedBy != follower.node.ID() {
		t.Fatalf("leader's answer = %+v (%v); want an index and forwarded_by %q", ans, err, follower.node.ID())
	}
	for _, m := range ms {
		testkit.WaitFor(t, 20*time.Second, "member "+m.node.ID()+" to apply k=v", func() bool { v, _ := m.fsm.get("k"); return v == "v" })
	}
	// The leader's status comes back verbatim, errors included.
	if status, _, _, err := follower.node.Forward(context.Background(), http.MethodPost, ApplyPath, []byte("garbage")); err != nil || status != http.StatusBadRequest {
		t.Fatalf("Forward(garbage) = %d, %v; want the leader's 400", status, err)
	}
	if _, _, _, err := leader.node.Forward(context.Background(), http.MethodPost, ApplyPath, []byte("k=w")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Forward on the leader = %v; want ErrNotLeader", err)
	}
}

// TestSickLeaderHandsOver: a leader whose health check fails hands
// leadership to another member and reports itself not ready.
func TestSickLeaderHandsOver(t *testing.T) {
	ms := startCluster(t, 3)
	leader := waitLeader(t, ms)
	leader.sick.Store(true)
	if err := leader.node.Ready(); !errors.Is(err, errSick) {
		t.Fatalf("Ready of a sick member = %v; want its health check's error", err)
	}
	testkit.WaitFor(t, 20*time.Second, "another member to lead", func() bool {
		for _, m := range ms {
			if m != leader && m.node.IsLeader() {
				return true
			}
		}
		return false
	})
	testkit.WaitFor(t, 20*time.Second, "the sick member to step down", func() bool { return !leader.node.IsLeader() })
}
