package controller

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

func remoteSeg(key string, base, end int64) cluster.RemoteSegment {
	return cluster.RemoteSegment{Object: key, BaseOffset: base, EndOffset: end, LogBytes: 10, Bytes: 10, MaxTimestamp: -1}
}

// TestRemoteLogChanges: the leader's remote log changes are committed with
// their answers; refused ones and drops of nothing cost no log entry.
func TestRemoteLogChanges(t *testing.T) {
	c, r, _ := newTest(t, nil)
	ctx := context.Background()
	leader := cluster.RemoteLeader{Topic: "orders", Partition: 0, LeaderID: 1}
	if _, err := c.AddRemoteSegment(ctx, cluster.AddRemoteSegmentRequest{RemoteLeader: leader, Segment: remoteSeg("a", 0, 5)}); !errors.Is(err, ErrNotActive) {
		t.Fatalf("add before leadership = %v; want ErrNotActive", err)
	}
	lead(t, c)
	epochs := setup(t, c, r)
	leader.NodeEpoch = epochs[1]
	add := func(s cluster.RemoteSegment) (cluster.RemoteSummary, error) {
		return c.AddRemoteSegment(ctx, cluster.AddRemoteSegmentRequest{RemoteLeader: leader, Segment: s})
	}
	drop := func(below int64) ([]cluster.RemoteSegment, error) {
		return c.DropRemoteSegments(ctx, cluster.DropRemoteSegmentsRequest{RemoteLeader: leader, Below: below})
	}

	if s, err := add(remoteSeg("a", 0, 5)); err != nil || s != (cluster.RemoteSummary{Start: 0, End: 5, Bytes: 10, Segments: 1}) {
		t.Fatalf("add = %+v, %v", s, err)
	}
	if s, err := add(remoteSeg("b", 5, 9)); err != nil || s.End != 9 || s.Segments != 2 {
		t.Fatalf("add of the next = %+v, %v", s, err)
	}
	if s, err := add(remoteSeg("b", 5, 9)); err != nil || s.End != 9 || s.Segments != 2 {
		t.Fatalf("retry = %+v, %v", s, err)
	}
	entries := r.idx
	if _, err := add(remoteSeg("c", 10, 12)); !errors.Is(err, fsm.ErrRemoteLogGap) {
		t.Fatalf("gap = %v", err)
	}
	stale := leader
	stale.LeaderEpoch++
	if _, err := c.AddRemoteSegment(ctx, cluster.AddRemoteSegmentRequest{RemoteLeader: stale, Segment: remoteSeg("c", 9, 12)}); !errors.Is(err, fsm.ErrFencedLeaderEpoch) {
		t.Fatalf("stale leader epoch = %v", err)
	}
	if got, err := drop(0); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("drop of nothing = %#v, %v", got, err)
	}
	if r.idx != entries {
		t.Fatalf("refused requests and an empty drop wrote %d entries", r.idx-entries)
	}
	// Inside the first segment: nothing dropped, the start moves (an entry).
	if got, err := drop(4); err != nil || got == nil || len(got) != 0 || r.idx != entries+1 {
		t.Fatalf("drop inside a segment = %#v, %v (%d entries)", got, err, r.idx-entries)
	}
	if got, err := drop(5); err != nil || !reflect.DeepEqual(got, []cluster.RemoteSegment{remoteSeg("a", 0, 5)}) {
		t.Fatalf("drop = %+v, %v", got, err)
	}
	if p := partitionOf(t, r.f, "orders", 0); p.Remote == nil || p.Remote.Start != 5 {
		t.Fatalf("partition after the drop: %+v", p)
	}

	// A deleted topic's segments wait in the garbage until cleared.
	if res, err := r.Propose(ctx, fsm.Command{Type: fsm.TypeDeleteTopic, DeleteTopic: &fsm.DeleteTopic{Name: "orders"}}); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if g := r.f.RemoteGarbage(); len(g) != 1 || len(g[0].Segments) != 1 {
		t.Fatalf("garbage = %+v", g)
	}
	if err := c.ClearRemoteGarbage(ctx, cluster.ClearRemoteGarbageRequest{Topic: "orders", Objects: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	if g := r.f.RemoteGarbage(); g != nil {
		t.Fatalf("garbage after clearing = %+v", g)
	}
}
