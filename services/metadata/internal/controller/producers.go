package controller

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// idBlock is the part of a reserved producer id block not handed out yet:
// [next, end).
type idBlock struct{ next, end int64 }

// InitProducerID returns a new idempotent producer id (Kafka's
// InitProducerId without transactions), unique in the cluster and never
// reused; its epoch is 0. It is served from memory, from the block this
// leader reserved last; when that is used up it reserves the next one with a
// single AllocProducerIDs entry, which the others calling meanwhile wait for
// (up to their ctx) rather than each reserving a block. The block lives only
// as long as this leadership: when it is lost (or the process stops) the ids
// left are abandoned, and the next leader reserves a block above every block
// already reserved.
func (c *Controller) InitProducerID(ctx context.Context) (int64, error) {
	if id, ok, _, err := c.takeProducerID(); ok || err != nil {
		return id, err
	}
	select {
	case c.reserving <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("waiting for a producer id block: %w", ctx.Err())
	}
	defer func() { <-c.reserving }()
	// Another call may have reserved a block while this one waited.
	id, ok, term, err := c.takeProducerID()
	if ok || err != nil {
		return id, err
	}
	size := c.cfg.producerIDBlock()
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeAllocProducerIDs, AllocProducerIDs: &fsm.AllocProducerIDs{Count: size}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return 0, fmt.Errorf("reserving a producer id block: %w", err)
	}
	c.mu.Lock()
	// The block is ours whatever happened meanwhile, so its first id is
	// answered anyway; the rest is kept only within the same leadership, so
	// that a new leadership starts above every earlier leader's block.
	if c.active && c.pidTerm == term {
		c.pids = idBlock{next: res.ProducerID + 1, end: res.ProducerID + size}
	}
	c.mu.Unlock()
	c.log.Info("producer id block reserved", "first", res.ProducerID, "size", size, "index", res.Index)
	return res.ProducerID, nil
}

// takeProducerID hands out the next id of the block when there is one (ok).
// Otherwise it returns the leadership term a new block would belong to, or
// ErrNotActive.
func (c *Controller) takeProducerID() (id int64, ok bool, term uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return 0, false, 0, ErrNotActive
	}
	if c.pids.next < c.pids.end {
		id = c.pids.next
		c.pids.next++
		return id, true, 0, nil
	}
	return 0, false, c.pidTerm, nil
}

// dropProducerIDsLocked abandons the block; called with mu held whenever the
// controller stops being active.
func (c *Controller) dropProducerIDsLocked() {
	c.pids = idBlock{}
	c.pidTerm++
}
