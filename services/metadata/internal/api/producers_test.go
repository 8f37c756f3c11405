package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// ids collects producer ids and checks that each new one is above all the
// ones before (so also distinct).
type ids struct {
	t    *testing.T
	seen []int64
}

func (s *ids) add(what string, r cluster.InitProducerIDResponse, err error) int64 {
	s.t.Helper()
	if err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
	if r.ProducerEpoch != 0 {
		s.t.Fatalf("%s: epoch %d for a new producer id; want 0", what, r.ProducerEpoch)
	}
	if n := len(s.seen); n > 0 && r.ProducerID <= s.seen[n-1] {
		s.t.Fatalf("%s: producer id %d after %v; want a higher one", what, r.ProducerID, s.seen)
	}
	s.seen = append(s.seen, r.ProducerID)
	return r.ProducerID
}

func (s *ids) last() int64 { return s.seen[len(s.seen)-1] }

// TestProducerIDsInAThreeMemberGroup allocates producer ids through
// followers (relayed) and the leader, with blocks of 3 ids, and across the
// loss of the leader.
func TestProducerIDsInAThreeMemberGroup(t *testing.T) {
	const block = 3
	ms := startCluster(t, 3, clusterOpts{producerIDBlock: block})
	ctx := context.Background()
	lead := leader(ms)
	if lead == nil {
		t.Fatal("no leader")
	}
	var followers, rest []*member
	for _, m := range ms {
		if m != lead {
			followers = append(followers, m)
			rest = append(rest, m)
		}
	}
	got := &ids{t: t}

	// The raw route on a follower: relayed, 200 with the contract's body.
	resp, err := http.Post("http://"+followers[0].http+"/v1/producers", "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var first cluster.InitProducerIDResponse
	if err := json.Unmarshal(body, &first); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/producers on a follower: HTTP %d %s (%v)", resp.StatusCode, body, err)
	}
	if got.add("first id", first, nil) != fsm.FirstProducerID {
		t.Fatalf("first producer id %d; want %d", first.ProducerID, fsm.FirstProducerID)
	}
	// Through either follower and the leader, several blocks.
	for i := range 9 {
		via := append(followers, lead)[i%3]
		r, err := client(via).InitProducerID(ctx)
		got.add("InitProducerID through member "+via.id, r, err)
	}
	if got.last() != fsm.FirstProducerID+9 {
		t.Fatalf("ids %v; want %d..%d with no gap under one leader", got.seen, fsm.FirstProducerID, fsm.FirstProducerID+9)
	}
	reserved := fsm.FirstProducerID + 4*block // ten ids: four blocks
	testkit.WaitFor(t, 10*time.Second, "the reservations on every member", func() bool {
		for _, m := range ms {
			if m.fsm.NextProducerID() != reserved {
				return false
			}
		}
		return true
	})

	// A block reserved by a forwarded command never overlaps the leader's.
	res, err := followers[0].node.Apply(ctx, fsm.Command{Type: fsm.TypeAllocProducerIDs, AllocProducerIDs: &fsm.AllocProducerIDs{Count: 5}})
	if err != nil || res.Err != nil || res.ProducerID != reserved {
		t.Fatalf("forwarded AllocProducerIDs = %+v, %v; want the block at %d", res, err, reserved)
	}
	r, err := client(lead).InitProducerID(ctx) // the rest of the leader's block
	if got.add("InitProducerID after a forwarded reservation", r, err) != reserved-2 {
		t.Fatalf("id %d; want %d, still in the leader's block", r.ProducerID, reserved-2)
	}
	for range 2 {
		r, err := client(lead).InitProducerID(ctx)
		got.add("InitProducerID past the forwarded block", r, err)
	}
	if want := reserved + 5; got.last() != want {
		t.Fatalf("ids %v; want the new block to start at %d, after the forwarded one", got.seen, want)
	}

	// Wrong method and body.
	if status, eb := rawDo(t, http.MethodGet, "http://"+followers[1].http+"/v1/producers", nil); status != http.StatusMethodNotAllowed || protocol.Code(eb.ErrorCode) != protocol.InvalidRequest {
		t.Fatalf("GET /v1/producers: %d %+v", status, eb)
	}
	if status, eb := rawDo(t, http.MethodPost, "http://"+followers[1].http+"/v1/producers", nil); status != http.StatusBadRequest || protocol.Code(eb.ErrorCode) != protocol.InvalidRequest {
		t.Fatalf("POST /v1/producers without a body: %d %+v", status, eb)
	}

	// Lose the leader: the new one starts above every block reserved.
	before := lead.fsm.NextProducerID()
	lead.stop(t)
	testkit.WaitFor(t, 20*time.Second, "a new leader", func() bool { return leader(rest) != nil })
	rc := client(rest...)
	var after cluster.InitProducerIDResponse
	testkit.WaitFor(t, 20*time.Second, "a producer id from the new leader", func() bool {
		after, err = rc.InitProducerID(ctx)
		switch protocol.CodeOf(err) {
		case protocol.NotController, protocol.RequestTimedOut, protocol.UnknownServerError:
			return false // election or relay in progress; retry
		}
		return true
	})
	if got.add("InitProducerID after the failover", after, err) < before {
		t.Fatalf("id %d after the failover; want one at or above %d, the old leader's reservations", after.ProducerID, before)
	}
	for _, m := range rest {
		r, err := client(m).InitProducerID(ctx)
		got.add("InitProducerID after the failover through member "+m.id, r, err)
	}
}

// TestProducerIDsSurviveRestarts restarts a single member twice: once with
// the reservations only in its log, once from a snapshot followed by log
// entries. Ids never go back: each restart starts a new block above the old.
func TestProducerIDsSurviveRestarts(t *testing.T) {
	const block = 2
	o := clusterOpts{sessionTimeout: 30 * time.Second, producerIDBlock: block}
	m := startCluster(t, 1, o)[0]
	ctx := context.Background()
	got := &ids{t: t}
	alloc := func(m *member, n int) {
		t.Helper()
		for range n {
			r, err := client(m).InitProducerID(ctx)
			got.add("InitProducerID", r, err)
		}
	}

	alloc(m, 3) // 1000, 1001 (block 1000-1001), 1002 (block 1002-1003)
	m = restart(t, m, o)
	alloc(m, 1) // 1004: the rest of the block before the restart is skipped
	if want := fsm.FirstProducerID + 2*block; got.last() != want {
		t.Fatalf("ids %v; want %d after a restart from the log", got.seen, want)
	}

	alloc(m, 1) // 1005, the last of the block
	if err := m.node.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if v := restoreLatest(t, m.dataDir); v.NextProducerID != fsm.FirstProducerID+3*block {
		t.Fatalf("snapshot holds next producer id %d; want %d", v.NextProducerID, fsm.FirstProducerID+3*block)
	}
	alloc(m, 1) // 1006, a block only in the log after the snapshot
	m = restart(t, m, o)
	alloc(m, 2)
	if want := fsm.FirstProducerID + 4*block; got.seen[len(got.seen)-2] != want {
		t.Fatalf("ids %v; want %d after a restart from the snapshot and the log", got.seen, want)
	}
}

// restart stops a single-voter member and starts it again on the same
// addresses from its data directory.
func restart(t *testing.T, m *member, o clusterOpts) *member {
	t.Helper()
	m.stop(t)
	listenOn := func(addr string) net.Listener {
		var ln net.Listener
		testkit.WaitFor(t, 10*time.Second, "listening again on "+addr, func() bool {
			var err error
			ln, err = net.Listen("tcp", addr)
			return err == nil
		})
		return ln
	}
	n := startMember(t, m.id, m.dataDir, nil, listenOn(m.raft), listenOn(m.http), o, testLogger())
	testkit.WaitFor(t, 20*time.Second, "the restarted member ready with an active controller", func() bool {
		return n.node.Ready() == nil && n.ctrl.Active()
	})
	return n
}
