package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// ApplyLocal proposes encoded command bytes on this member, which must lead
// (never forwarded), waits until the FSM applied them and returns the FSM's
// response as it is: decoding it, and telling a rejected command from an
// applied one, is the service's business. The error return is for failures to
// commit: ErrNotStarted, ErrNotLeader (leadership lost before
// the entry was proposed), ErrLeadershipLost (after: it may still commit),
// ErrTimeout. It is bounded by ctx's deadline, or by ApplyTimeout when ctx
// has none.
func (n *Node) ApplyLocal(ctx context.Context, data []byte) (any, error) {
	r := n.raft.Load()
	if r == nil {
		return nil, ErrNotStarted
	}
	f := r.Apply(data, n.timeout(ctx))
	if err := applyErr(n.wait(ctx, f)); err != nil {
		return nil, err
	}
	return f.Response(), nil
}

// applyErr is a proposal's error: raft's ErrLeadershipLost (the entry was
// dispatched by the leader, which then stepped down) is ErrLeadershipLost,
// an unknown outcome, not the ErrNotLeader of a proposal never made.
func applyErr(err error) error {
	if errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("%w: %w", ErrLeadershipLost, raft.ErrLeadershipLost)
	}
	return err
}

// Linearize makes a following read linearizable: it confirms leadership with
// a quorum (VerifyLeader) and waits until every committed entry is applied to
// the FSM (Barrier). Only the leader can do it (ErrNotLeader otherwise).
func (n *Node) Linearize(ctx context.Context) error {
	r := n.raft.Load()
	if r == nil {
		return ErrNotStarted
	}
	if err := n.wait(ctx, r.VerifyLeader()); err != nil {
		return err
	}
	return n.wait(ctx, r.Barrier(n.timeout(ctx)))
}

// Barrier waits until every entry committed before the call is applied.
// Only the leader can do it (ErrNotLeader otherwise).
func (n *Node) Barrier(ctx context.Context) error {
	r := n.raft.Load()
	if r == nil {
		return ErrNotStarted
	}
	return n.wait(ctx, r.Barrier(n.timeout(ctx)))
}

// Snapshot asks raft for a snapshot now (it also takes them by itself on the
// SnapshotInterval/SnapshotThreshold schedule) and waits for it.
func (n *Node) Snapshot(ctx context.Context) error {
	r := n.raft.Load()
	if r == nil {
		return ErrNotStarted
	}
	return n.wait(ctx, r.Snapshot())
}

// timeout is the time left before ctx's deadline, or the apply timeout.
func (n *Node) timeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return n.cfg.ApplyTimeout
}

// wait waits for a raft future or ctx, mapping raft's errors to ours.
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }() // ends when raft resolves the future, at the latest on shutdown
	select {
	case err := <-done:
		return n.mapRaftErr(err)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	}
}

func (n *Node) mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %w", n.errNotLeader(), err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrNotStarted, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

// errNotLeader is ErrNotLeader naming the service: "this metadata member is
// not the raft leader".
func (n *Node) errNotLeader() error {
	return fmt.Errorf("this %s member is %w", n.cfg.Service, ErrNotLeader)
}
