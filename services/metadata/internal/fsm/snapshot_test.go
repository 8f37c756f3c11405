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
	)
	want := h.Cluster()

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
	if got := g.Cluster(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
	}
	select {
	case <-woken:
	default:
		t.Fatal("Restore did not wake watchers")
	}
	// The restored FSM keeps applying: a re-registration bumps the epoch.
	r := g.Apply(&raft.Log{Index: 100, Data: mustEncode(t, reg(1, "a"))}).(*Result)
	if r.Err != nil || r.Epoch != 100 {
		t.Fatalf("apply after restore = %+v", r)
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
