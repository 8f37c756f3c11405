package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// memSink is a raft.SnapshotSink writing to memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	h := newHarness()
	h.applyAll(t,
		Command{Type: TypeInitCluster, InitCluster: &InitCluster{ClusterID: "cid"}},
		reg(1, "a"), reg(2, "b"),
		create("orders", 2, []int32{1, 2}, []int32{2, 1}),
		update("orders", 1, 0, 0, 2, 2),
		Command{Type: TypeSetNodeAlive, SetNodeAlive: &SetNodeAlive{ID: 1, Epoch: 2, Alive: false}},
		reg(3, "c"), reg(4, "d"), // epochs 7, 8
		create("events", 3, []int32{3, 4, 2}),
		Command{Type: TypeAlterPartition, AlterPartition: &AlterPartition{Topic: "events", LeaderID: 3, NodeEpoch: 7, ISR: []int32{3, 2}}},
		fence(2, 3), // node 2 dead at epoch 11
		shutdown(4, 8),
		allocIDs(1000), allocIDs(3),
	)
	want := h.View()
	if n, _ := h.Node(2); n.Alive || n.Epoch != 11 || !want.ShuttingDown[4] || want.NextProducerID != FirstProducerID+1003 {
		t.Fatalf("setup: node 2 = %+v, shutting down %v, next producer id %d", n, want.ShuttingDown, want.NextProducerID)
	}

	snap, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || !sink.closed {
		t.Fatalf("Persist = %v, closed %v", err, sink.closed)
	}
	snap.Release()

	g := New()
	_, woken := g.Changed()
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := g.View(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
	}
	select {
	case <-woken:
	default:
		t.Fatal("Restore did not wake watchers")
	}
	// The restored state decides as the original did: the fenced epoch and
	// the shutdown mark still hold, the partition epochs go on.
	if err := g.CheckAlterPartition(AlterPartition{Topic: "events", LeaderID: 3, NodeEpoch: 7, PartitionEpoch: 1, ISR: []int32{3, 2, 4}}); !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("adding a shutting-down node after restore = %v; want ErrIneligibleReplica", err)
	}
	if r := g.ApplyCommand(99, fence(2, 3)); !errors.Is(r.Err, ErrStaleNodeEpoch) {
		t.Fatalf("fencing the old epoch again after restore = %v; want ErrStaleNodeEpoch", r.Err)
	}
	// The restored FSM keeps applying: a re-registration bumps the epoch.
	r := g.Apply(&raft.Log{Index: 100, Data: mustEncode(t, reg(1, "a"))}).(*Result)
	if r.Err != nil || r.Epoch != 100 {
		t.Fatalf("apply after restore = %+v", r)
	}
	// Producer ids go on after the blocks reserved before the snapshot.
	if r := g.ApplyCommand(101, allocIDs(1)); r.Err != nil || r.ProducerID != FirstProducerID+1003 {
		t.Fatalf("reservation after restore = %+v", r)
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "{", `{"format":99}`} {
		f := New()
		if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(in)))); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("Restore(%q) = %v; want ErrCorruptSnapshot", in, err)
		}
	}
}

func mustEncode(t *testing.T, c Command) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
