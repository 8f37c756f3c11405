package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// gatedRaft holds the first entry proposed through it until release, so
// that every request of a test is queued behind it; entered is closed once
// that entry waits.
type gatedRaft struct {
	Raft
	entered, open chan struct{}
	first, opened sync.Once
}

// startGated is startWith over a gatedRaft; the gate opens at the latest
// when the test ends, before the coordinator stops.
func startGated(t *testing.T) (*Coordinator, *fsm.FSM, *gatedRaft) {
	g := &gatedRaft{entered: make(chan struct{}), open: make(chan struct{})}
	c, f, _ := startWith(t, t.TempDir(), testSettings(), func(c *Coordinator) {
		g.Raft = c.raft
		c.raft = g
	})
	t.Cleanup(g.release) // cleanups run last first: this one before startWith's
	return c, f, g
}

func (g *gatedRaft) ApplyLocal(ctx context.Context, data []byte) (any, error) {
	g.first.Do(func() {
		close(g.entered)
		<-g.open
	})
	return g.Raft.ApplyLocal(ctx, data)
}

func (g *gatedRaft) release() { g.opened.Do(func() { close(g.open) }) }

var bg = context.Background()

// queued reports the submissions waiting for the coordinator's next entry.
func (c *Coordinator) queued() int {
	return c.entries.Queued()
}

// TestGroupCommitPutsConcurrentRequestsInFewEntries: requests of many
// groups that arrive while an entry is in flight share the next entry,
// and each gets its own answer: commits that apply and deletions the FSM
// refuses, mixed in one entry.
func TestGroupCommitPutsConcurrentRequestsInFewEntries(t *testing.T) {
	c, f, gate := startGated(t)
	entries0, commands0 := c.EntryCounts()

	const n = 200
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	wg.Go(func() { // the entry held at the gate
		errs[0] = c.Commit(bg, "first", groups.CommitRequest{Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 1}}})
	})
	<-gate.entered
	for i := 1; i < n; i++ {
		wg.Go(func() {
			errs[i] = c.Commit(bg, fmt.Sprintf("g%d", i), groups.CommitRequest{Offsets: []groups.Offset{{Topic: "t", Partition: 1, Offset: int64(i)}}})
		})
		wg.Go(func() { errs[n+i] = c.Delete(bg, fmt.Sprintf("none-%d", i)) })
	}
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d requests queued", 2*n-2), func() bool { return c.queued() >= 2*n-2 })
	gate.release()
	wg.Wait()

	entries, commands := c.EntryCounts()
	entries, commands = entries-entries0, commands-commands0
	if commands != 2*n-1 {
		t.Fatalf("%d commands proposed, want %d", commands, 2*n-1)
	}
	if entries != 2 {
		t.Fatalf("%d commands went into %d entries, want 2 (the held one, then everything queued behind it)", commands, entries)
	}
	for i := 1; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("commit of g%d: %v", i, errs[i])
		}
		offs, err := f.Offsets(fmt.Sprintf("g%d", i), "t")
		if err != nil || len(offs) != 1 || offs[0].Offset != int64(i) {
			t.Fatalf("g%d's offsets: %v, %v", i, offs, err)
		}
		if !errors.Is(errs[n+i], &protocol.Error{Code: protocol.GroupIDNotFound}) {
			t.Fatalf("deleting none-%d: %v, want GROUP_ID_NOT_FOUND", i, errs[n+i])
		}
	}
	if errs[0] != nil {
		t.Fatalf("the first commit: %v", errs[0])
	}
}

// TestGroupCommitLeavesOutGivenUpRequests: a request whose caller gave up
// while it waited for the next entry is not proposed; the others are.
func TestGroupCommitLeavesOutGivenUpRequests(t *testing.T) {
	c, f, gate := startGated(t)
	_, commands0 := c.EntryCounts()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Commit(bg, "first", groups.CommitRequest{Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 1}}}); err != nil {
			t.Error(err)
		}
	})
	<-gate.entered
	ctx, cancel := context.WithCancel(bg)
	gaveUp := make(chan error, 1)
	go func() {
		gaveUp <- c.Commit(ctx, "impatient", groups.CommitRequest{Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 5}}})
	}()
	testkit.WaitFor(t, 10*time.Second, "the impatient request queued", func() bool { return c.queued() >= 1 })
	wg.Go(func() {
		if err := c.Commit(bg, "patient", groups.CommitRequest{Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 6}}}); err != nil {
			t.Error(err)
		}
	})
	testkit.WaitFor(t, 10*time.Second, "2 requests queued", func() bool { return c.queued() >= 2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, &protocol.Error{Code: protocol.RequestTimedOut}) {
		t.Fatalf("the impatient commit: %v, want REQUEST_TIMED_OUT", err)
	}
	gate.release()
	wg.Wait()
	if _, commands := c.EntryCounts(); commands-commands0 != 2 {
		t.Fatalf("%d commands proposed, want 2 (the impatient one left out)", commands-commands0)
	}
	if offs, _ := f.Offsets("impatient", "t"); len(offs) != 0 {
		t.Fatalf("the impatient commit was applied: %v", offs)
	}
	if offs, _ := f.Offsets("patient", "t"); len(offs) != 1 || offs[0].Offset != 6 {
		t.Fatalf("the patient commit: %v", offs)
	}
}
