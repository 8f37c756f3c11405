package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// hookRaft is a fakeRaft that runs during before each proposal.
type hookRaft struct {
	*fakeRaft
	during func()
}

func (r *hookRaft) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	if r.during != nil {
		r.during()
	}
	return r.fakeRaft.Propose(ctx, cmd)
}

func initIDs(t *testing.T, c *Controller, n int) []int64 {
	t.Helper()
	var out []int64
	for range n {
		id, err := c.InitProducerID(context.Background())
		if err != nil {
			t.Fatalf("InitProducerID after %v: %v", out, err)
		}
		out = append(out, id)
	}
	return out
}

func seq(from int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

func TestProducerIDsFromBlocks(t *testing.T) {
	c, r, _ := newTest(t, nil)
	c.cfg.ProducerIDBlockSize = 3
	if _, err := c.InitProducerID(context.Background()); !errors.Is(err, ErrNotActive) {
		t.Fatalf("InitProducerID before leading = %v; want ErrNotActive", err)
	}
	lead(t, c)
	start := r.idx
	if got := initIDs(t, c, 7); !slices.Equal(got, seq(fsm.FirstProducerID, 7)) {
		t.Fatalf("ids %v; want %v", got, seq(fsm.FirstProducerID, 7))
	}
	if n := r.idx - start; n != 3 {
		t.Fatalf("%d raft entries for 7 ids in blocks of 3; want 3", n)
	}

	// Losing leadership abandons the block's rest (1007, 1008).
	c.SetLeader(false)
	if _, err := c.InitProducerID(context.Background()); !errors.Is(err, ErrNotActive) {
		t.Fatalf("InitProducerID after losing leadership = %v; want ErrNotActive", err)
	}
	lead(t, c)
	if got := initIDs(t, c, 2); !slices.Equal(got, seq(fsm.FirstProducerID+9, 2)) {
		t.Fatalf("ids after leading again %v; want a new block from %d", got, fsm.FirstProducerID+9)
	}

	// A failed reservation hands out nothing and leaves no block.
	initIDs(t, c, 1) // 1011, the last of the block
	r.mu.Lock()
	r.err = errors.New("no quorum")
	r.mu.Unlock()
	if _, err := c.InitProducerID(context.Background()); err == nil || !strings.Contains(err.Error(), "no quorum") {
		t.Fatalf("InitProducerID with a failing raft = %v", err)
	}
	r.mu.Lock()
	r.err = nil
	r.mu.Unlock()
	if got := initIDs(t, c, 1); got[0] != fsm.FirstProducerID+12 {
		t.Fatalf("id after a failed reservation %v; want %d", got, fsm.FirstProducerID+12)
	}
}

// TestProducerIDBlockStraddlingALeaderChange: the reservation commits, but
// leadership moved meanwhile. Its first id is answered (the block is this
// reservation's alone) and its rest abandoned: the new leadership reserves
// its own block.
func TestProducerIDBlockStraddlingALeaderChange(t *testing.T) {
	f := fsm.New()
	c, r, _ := newTest(t, f)
	c.cfg.ProducerIDBlockSize = 10
	h := &hookRaft{fakeRaft: r}
	c.raft = h
	lead(t, c)
	h.during = func() {
		h.during = nil
		c.SetLeader(false)
		c.SetLeader(true)
		c.syncLeadership()
	}
	if got := initIDs(t, c, 2); !slices.Equal(got, []int64{fsm.FirstProducerID, fsm.FirstProducerID + 10}) {
		t.Fatalf("ids %v; want the straddling block's first id, then a new block", got)
	}
}

// TestConcurrentProducerIDs: concurrent callers share blocks rather than each
// reserving one, and never get the same id.
func TestConcurrentProducerIDs(t *testing.T) {
	c, r, _ := newTest(t, nil)
	c.cfg.ProducerIDBlockSize = 7
	lead(t, c)
	start := r.idx
	const callers, each = 10, 10
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				id, err := c.InitProducerID(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(all)
	if !slices.Equal(all, seq(fsm.FirstProducerID, callers*each)) {
		t.Fatalf("ids %v; want each of %d.. once", all, fsm.FirstProducerID)
	}
	if n, want := r.idx-start, uint64((callers*each+6)/7); n != want {
		t.Fatalf("%d reservations for %d ids in blocks of 7; want %d", n, callers*each, want)
	}
}

func TestProducerIDWaitEndsWithContext(t *testing.T) {
	c, _, _ := newTest(t, nil)
	lead(t, c)
	c.reserving <- struct{}{} // another call is reserving
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.InitProducerID(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("InitProducerID while waiting for a reservation, cancelled = %v", err)
	}
}

func TestProducerIDBlockSizeConfig(t *testing.T) {
	for _, n := range []int64{-1, fsm.MaxProducerIDBlock + 1} {
		bad := DefaultConfig()
		bad.ProducerIDBlockSize = n
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "-producer-id-block-size") {
			t.Fatalf("block size %d: %v", n, err)
		}
	}
	zero := DefaultConfig()
	zero.ProducerIDBlockSize = 0
	if err := zero.Validate(); err != nil || zero.producerIDBlock() != DefaultProducerIDBlockSize {
		t.Fatalf("block size 0: %v, %d", err, zero.producerIDBlock())
	}
}
