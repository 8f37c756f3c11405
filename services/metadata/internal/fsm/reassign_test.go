package fsm

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

func reassign(topic string, part int32, replicas ...int32) Command {
	return Command{Type: TypeReassignPartition, ReassignPartition: &ReassignPartition{Topic: topic, Partition: part, Replicas: replicas}}
}

func endReassign(topic string, part int32, complete bool) Command {
	ref := &PartitionRef{Topic: topic, Partition: part}
	if complete {
		return Command{Type: TypeCompleteReassignment, CompleteReassignment: ref}
	}
	return Command{Type: TypeCancelReassignment, CancelReassignment: ref}
}

// reassignBase registers nodes 1..5 and creates "t" with p0 on 1,2,3 (leader
// 1) and p1 on 2,3,1.
func reassignBase(t *testing.T) *harness {
	t.Helper()
	h := newHarness()
	h.applyAll(t, reg(1, ""), reg(2, ""), reg(3, ""), reg(4, ""), reg(5, ""), create("t", 3, []int32{1, 2, 3}, []int32{2, 3, 1}))
	return h
}

func TestReassignmentCompletesAndMovesTheLeader(t *testing.T) {
	h := reassignBase(t)
	r := h.apply(t, reassign("t", 0, 4, 2, 5))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	p := r.Partition
	if !slices.Equal(p.Replicas, []int32{1, 2, 3, 4, 5}) || !slices.Equal(p.TargetReplicas, []int32{4, 2, 5}) ||
		!slices.Equal(p.AddingReplicas, []int32{4, 5}) || !slices.Equal(p.RemovingReplicas(), []int32{1, 3}) {
		t.Fatalf("started: replicas %v target %v adding %v removing %v", p.Replicas, p.TargetReplicas, p.AddingReplicas, p.RemovingReplicas())
	}
	if p.Leader != 1 || !slices.Equal(p.ISR, []int32{1, 2, 3}) || p.PartitionEpoch != 1 || p.LeaderEpoch != 0 {
		t.Fatalf("the start changed leader or ISR: %+v", p)
	}
	if r := h.apply(t, reassign("t", 0, 1, 2, 3)); !errors.Is(r.Err, ErrReassignmentInProgress) {
		t.Fatalf("second reassignment: %v", r.Err)
	}
	// Only 4 caught up: not ready.
	h.applyAll(t, update("t", 0, 0, 1, 1, 1, 2, 3, 4))
	if r := h.apply(t, endReassign("t", 0, true)); !errors.Is(r.Err, ErrReassignmentNotReady) {
		t.Fatalf("completion with 5 out of the ISR: %v", r.Err)
	}
	h.applyAll(t, update("t", 0, 0, 2, 1, 1, 2, 3, 4, 5))
	r = h.apply(t, endReassign("t", 0, true))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	p = r.Partition
	// Leader 1 leaves: the first target replica in the ISR (4) leads at a
	// new leader epoch; 1 and 3 leave replicas and ISR.
	if !slices.Equal(p.Replicas, []int32{4, 2, 5}) || !slices.Equal(p.ISR, []int32{2, 4, 5}) || p.Leader != 4 || p.LeaderEpoch != 1 ||
		p.Reassigning() || p.AddingReplicas != nil {
		t.Fatalf("completed: %+v", p)
	}
	if r := h.apply(t, endReassign("t", 0, true)); !errors.Is(r.Err, ErrNoReassignmentInProgress) {
		t.Fatalf("second completion: %v", r.Err)
	}
}

func TestReassignmentCancelRestoresTheReplicas(t *testing.T) {
	h := reassignBase(t)
	h.applyAll(t, reassign("t", 1, 4, 3, 1))
	// 4 joined and leads (the others failed over to it), then the move is
	// cancelled: the leadership goes back to a replica from before.
	h.applyAll(t, update("t", 1, 0, 1, 2, 2, 3, 1, 4), update("t", 1, 0, 2, 4, 3, 1, 4))
	r := h.apply(t, endReassign("t", 1, false))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	p := r.Partition
	if !slices.Equal(p.Replicas, []int32{2, 3, 1}) || !slices.Equal(p.ISR, []int32{3, 1}) || p.Leader != 3 || p.LeaderEpoch != 2 || p.Reassigning() {
		t.Fatalf("cancelled: %+v", p)
	}
	if r := h.apply(t, endReassign("t", 1, false)); !errors.Is(r.Err, ErrNoReassignmentInProgress) {
		t.Fatalf("second cancel: %v", r.Err)
	}
}

func TestReassignmentChecks(t *testing.T) {
	h := reassignBase(t)
	h.applyAll(t, fence(5, 5), Command{Type: TypeDecommissionNode, DecommissionNode: &DecommissionNode{ID: 4, Decommissioned: true}})
	for _, tc := range []struct {
		name string
		cmd  Command
		want error
	}{
		{"too few replicas", reassign("t", 0, 1, 2), ErrInvalidReassignment},
		{"unknown node", reassign("t", 0, 1, 2, 9), ErrInvalidReassignment},
		{"node twice", reassign("t", 0, 1, 2, 2), ErrInvalidReassignment},
		{"dead new node", reassign("t", 0, 1, 2, 5), ErrIneligibleReplica},
		{"decommissioned new node", reassign("t", 0, 1, 2, 4), ErrIneligibleReplica},
		{"unknown partition", reassign("t", 7, 1, 2, 3), ErrUnknownPartition},
		{"unknown topic", reassign("nope", 0, 1, 2, 3), ErrUnknownTopic},
		{"cancel without a move", endReassign("t", 0, false), ErrNoReassignmentInProgress},
	} {
		if r := h.apply(t, tc.cmd); !errors.Is(r.Err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, r.Err, tc.want)
		}
	}
	// A new order of the same replicas applies at once: no data to copy.
	r := h.apply(t, reassign("t", 0, 3, 1, 2))
	if r.Err != nil || !slices.Equal(r.Partition.Replicas, []int32{3, 1, 2}) || r.Partition.Reassigning() {
		t.Fatalf("reorder: %v %+v", r.Err, r.Partition)
	}
	v := h.Version()
	if r := h.apply(t, reassign("t", 0, 3, 1, 2)); r.Err != nil || h.Version() != v {
		t.Fatalf("the same list again: err %v, version %d -> %d", r.Err, v, h.Version())
	}
}

func TestDecommissionSurvivesRegistrationAndSnapshot(t *testing.T) {
	h := reassignBase(t)
	h.applyAll(t, Command{Type: TypeDecommissionNode, DecommissionNode: &DecommissionNode{ID: 2, Decommissioned: true}}, reg(2, ""),
		reassign("t", 0, 1, 3, 4))
	if n, _ := h.Node(2); !n.Decommissioned {
		t.Fatal("re-registration lifted the decommission")
	}
	restored := snapshotRoundTrip(t, h.FSM)
	if n, _ := restored.Node(2); !n.Decommissioned {
		t.Fatal("the snapshot lost the decommission")
	}
	tp, _ := restored.Topic("t")
	if p := tp.Partitions[0]; !slices.Equal(p.TargetReplicas, []int32{1, 3, 4}) || !slices.Equal(p.AddingReplicas, []int32{4}) {
		t.Fatalf("the snapshot lost the reassignment: %+v", p)
	}
	if r := h.apply(t, Command{Type: TypeDecommissionNode, DecommissionNode: &DecommissionNode{ID: 9, Decommissioned: true}}); !errors.Is(r.Err, ErrUnknownNode) {
		t.Fatalf("unknown node: %v", r.Err)
	}
}

// snapshotRoundTrip persists f's snapshot and restores it into a new FSM.
func snapshotRoundTrip(t *testing.T, f *FSM) *FSM {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	g := New()
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return g
}
