package controller

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// Tiered storage: partition leaders add the segments they uploaded to
// their partition's remote log and drop the ones total retention deleted;
// storage nodes clear the remote garbage of deleted topics once they have
// deleted its objects. The rules and errors are the FSM's (fsm/remote.go).
// As for AlterPartition, a change is checked against this leader's state
// first, so a fenced or stale request costs no log entry, and again by
// Apply.

// AddRemoteSegment commits an uploaded segment to its partition's remote
// log and returns the log's summary after it. Errors: ErrNotActive, the
// leader checks' (fsm.ErrUnknownNode, ErrStaleNodeEpoch, ErrUnknownTopic,
// ErrUnknownPartition, ErrFencedLeaderEpoch, ErrNotPartitionLeader),
// fsm.ErrInvalidRemoteSegment, fsm.ErrRemoteLogGap, or a failure to
// commit. A segment in the log already is answered as added.
func (c *Controller) AddRemoteSegment(ctx context.Context, req cluster.AddRemoteSegmentRequest) (cluster.RemoteSummary, error) {
	if !c.Active() {
		return cluster.RemoteSummary{}, ErrNotActive
	}
	if err := c.fsm.CheckAddRemoteSegment(req); err != nil {
		return cluster.RemoteSummary{}, err
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeAddRemoteSegment, AddRemoteSegment: &req})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return cluster.RemoteSummary{}, err
	}
	s := summary(res.Partition)
	c.log.Debug("remote segment added", "partition", fmt.Sprintf("%s-%d", req.Topic, req.Partition), "object", req.Segment.Object,
		"base_offset", req.Segment.BaseOffset, "end_offset", req.Segment.EndOffset, "remote_end", s.End, "remote_segments", s.Segments)
	return s, nil
}

// DropRemoteSegments removes the segments that end at or below req.Below
// from the front of the partition's remote log, moves its start up to
// req.Below inside the first segment left, and returns the removed ones
// (empty, not nil, when none is: nothing is proposed when the start does
// not move either). Errors: ErrNotActive,
// the leader checks' as for AddRemoteSegment, or a failure to commit.
func (c *Controller) DropRemoteSegments(ctx context.Context, req cluster.DropRemoteSegmentsRequest) ([]cluster.RemoteSegment, error) {
	if !c.Active() {
		return nil, ErrNotActive
	}
	changes, err := c.fsm.CheckDropRemoteSegments(req)
	if err != nil {
		return nil, err
	}
	if !changes {
		// Nothing to drop and no start to move in the applied state: that
		// needs no entry (a segment the answer leaves out was never
		// promised gone).
		return []cluster.RemoteSegment{}, nil
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeDropRemoteSegments, DropRemoteSegments: &req})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	dropped := res.Dropped
	if dropped == nil {
		dropped = []cluster.RemoteSegment{}
	}
	s := summary(res.Partition)
	c.log.Info("remote segments dropped", "partition", fmt.Sprintf("%s-%d", req.Topic, req.Partition), "below", req.Below,
		"dropped", len(dropped), "remote_start", s.Start, "remote_segments", s.Segments)
	return dropped, nil
}

// ClearRemoteGarbage removes objects the storage nodes deleted from the
// remote garbage. Errors: ErrNotActive or a failure to commit.
func (c *Controller) ClearRemoteGarbage(ctx context.Context, req cluster.ClearRemoteGarbageRequest) error {
	if !c.Active() {
		return ErrNotActive
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeClearRemoteGarbage, ClearRemoteGarbage: &req})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return err
	}
	c.log.Info("remote garbage cleared", "partition", fmt.Sprintf("%s-%d", req.Topic, req.Partition), "objects", len(req.Objects))
	return nil
}

// summary is a partition's remote log summary, zero when it has none.
func summary(p *cluster.Partition) cluster.RemoteSummary {
	if p == nil || p.Remote == nil {
		return cluster.RemoteSummary{}
	}
	return *p.Remote
}
