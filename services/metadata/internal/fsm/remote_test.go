package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

// seg is a well-formed segment of [base, end) in object key.
func seg(key string, base, end int64) cluster.RemoteSegment {
	return cluster.RemoteSegment{Object: key, BaseOffset: base, EndOffset: end, LogBytes: 100, Bytes: 130, MaxTimestamp: -1,
		Sections: cluster.RemoteSections{IndexPos: 100, IndexLen: 20, EpochsPos: 120, EpochsLen: 10},
		Epochs:   []cluster.RemoteEpoch{{Epoch: 0, StartOffset: base}}}
}

// by names a leader: node id at its node epoch, leading at leader epoch le.
func by(topic string, part, id int32, nodeEpoch int64, le int32) cluster.RemoteLeader {
	return cluster.RemoteLeader{Topic: topic, Partition: part, LeaderID: id, NodeEpoch: nodeEpoch, LeaderEpoch: le}
}

func addSeg(l cluster.RemoteLeader, s cluster.RemoteSegment) Command {
	return Command{Type: TypeAddRemoteSegment, AddRemoteSegment: &cluster.AddRemoteSegmentRequest{RemoteLeader: l, Segment: s}}
}

func dropBelow(l cluster.RemoteLeader, below int64) Command {
	return Command{Type: TypeDropRemoteSegments, DropRemoteSegments: &cluster.DropRemoteSegmentsRequest{RemoteLeader: l, Below: below}}
}

func clearGarbage(topic string, part int32, objects ...string) Command {
	return Command{Type: TypeClearRemoteGarbage, ClearRemoteGarbage: &cluster.ClearRemoteGarbageRequest{Topic: topic, Partition: part, Objects: objects}}
}

// remoteBase registers nodes 1, 2, 3 (epochs 1, 2, 3) and creates "t" with
// t-0 on 1, 2 (led by 1) and t-1 on 2, 1 (led by 2), leader epochs 0.
func remoteBase(t *testing.T) *harness {
	t.Helper()
	h := newHarness()
	h.applyAll(t, reg(1, ""), reg(2, ""), reg(3, ""), create("t", 2, []int32{1, 2}, []int32{2, 1}))
	return h
}

// lead1 is t-0's leader in remoteBase.
var lead1 = by("t", 0, 1, 1, 0)

// segments returns the partition's remote segments, failing on an error.
func segments(t *testing.T, f *FSM, topic string, part int32) []cluster.RemoteSegment {
	t.Helper()
	l, err := f.RemoteLog(topic, part)
	if err != nil {
		t.Fatalf("RemoteLog(%s, %d): %v", topic, part, err)
	}
	if l.Topic != topic || l.Partition != part || l.Segments == nil {
		t.Fatalf("RemoteLog(%s, %d) = %+v", topic, part, l)
	}
	return l.Segments
}

func summaryOf(t *testing.T, f *FSM, topic string, part int32) *cluster.RemoteSummary {
	t.Helper()
	tp, ok := f.Topic(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	return tp.Partitions[part].Remote
}

func TestRemoteLogAddContinueRetryDrop(t *testing.T) {
	h := remoteBase(t)
	before, _ := h.Topic("t")
	if segs := segments(t, h.FSM, "t", 0); len(segs) != 0 || summaryOf(t, h.FSM, "t", 0) != nil {
		t.Fatalf("new partition: remote log %v, summary %+v", segs, summaryOf(t, h.FSM, "t", 0))
	}

	// The first segment may start anywhere; adding it is a change of the
	// model that wakes watchers and moves the version, but no epoch.
	_, woken := h.Changed()
	a, b := seg("a", 5, 10), seg("b", 10, 25)
	r := h.apply(t, addSeg(lead1, a))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	select {
	case <-woken:
	default:
		t.Fatal("adding a segment did not wake watchers")
	}
	if h.Version() != r.Index {
		t.Fatalf("version %d; want the entry's index %d", h.Version(), r.Index)
	}
	want := &cluster.RemoteSummary{Start: 5, End: 10, Bytes: 130, Segments: 1}
	if !reflect.DeepEqual(r.Partition.Remote, want) || !reflect.DeepEqual(summaryOf(t, h.FSM, "t", 0), want) {
		t.Fatalf("summary %+v, result %+v; want %+v", summaryOf(t, h.FSM, "t", 0), r.Partition.Remote, want)
	}
	if p, q := before.Partitions[0], r.Partition; q.LeaderEpoch != p.LeaderEpoch || q.PartitionEpoch != p.PartitionEpoch {
		t.Fatalf("epochs moved: %+v -> %+v", p, q)
	}
	if snap := h.Cluster(); !reflect.DeepEqual(snap.Topics[0].Partitions[0].Remote, want) || snap.Topics[0].Partitions[1].Remote != nil {
		t.Fatalf("cluster snapshot summaries: %+v, %+v", snap.Topics[0].Partitions[0].Remote, snap.Topics[0].Partitions[1].Remote)
	}
	// The leader's ISR change, decided at the partition epoch from before,
	// still applies: remote log changes do not fence it.
	h.applyAll(t, alterT(1, 1, 0, 0, 1))

	// The next segment continues the log.
	h.applyAll(t, addSeg(lead1, b))
	if segs := segments(t, h.FSM, "t", 0); !reflect.DeepEqual(segs, []cluster.RemoteSegment{a, b}) {
		t.Fatalf("remote log %+v", segs)
	}

	// A retry changes nothing and wakes no one.
	version, woken := h.Changed()
	r = h.apply(t, addSeg(lead1, b))
	if r.Err != nil || h.Version() != version || r.Partition.Remote.Segments != 2 {
		t.Fatalf("retry: %+v, version %d (was %d)", r, h.Version(), version)
	}
	select {
	case <-woken:
		t.Fatal("a retry woke watchers")
	default:
	}
	// So does a retry of an older segment.
	if r := h.apply(t, addSeg(lead1, a)); r.Err != nil {
		t.Fatalf("retry of the first segment: %v", r.Err)
	}

	// A gap is refused with both offsets.
	r = h.apply(t, addSeg(lead1, seg("c", 30, 40)))
	if !errors.Is(r.Err, ErrRemoteLogGap) || !strings.Contains(r.Err.Error(), "30") || !strings.Contains(r.Err.Error(), "25") {
		t.Fatalf("gap: %v", r.Err)
	}
	if r := h.apply(t, addSeg(lead1, seg("c", 20, 40))); !errors.Is(r.Err, ErrRemoteLogGap) {
		t.Fatalf("overlap: %v", r.Err)
	}
	// The same object with other fields is not a retry.
	other := b
	other.Bytes++
	if r := h.apply(t, addSeg(lead1, other)); !errors.Is(r.Err, ErrInvalidRemoteSegment) {
		t.Fatalf("same object, other fields: %v", r.Err)
	}

	// Dropping nothing is a success that changes nothing.
	version = h.Version()
	r = h.apply(t, dropBelow(lead1, 0))
	if r.Err != nil || r.Dropped != nil || h.Version() != version || r.Partition.Remote.Segments != 2 {
		t.Fatalf("drop below 0: %+v, version %d", r, h.Version())
	}
	// Segments wholly below go, from the front (a start inside a segment:
	// TestDropMovesRemoteStartInsideASegment).
	r = h.apply(t, dropBelow(lead1, 10))
	if r.Err != nil || !reflect.DeepEqual(r.Dropped, []cluster.RemoteSegment{a}) || h.Version() != r.Index {
		t.Fatalf("drop below 10: %+v, version %d", r, h.Version())
	}
	want = &cluster.RemoteSummary{Start: 10, End: 25, Bytes: 130, Segments: 1}
	if got := summaryOf(t, h.FSM, "t", 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("summary after the drop %+v; want %+v", got, want)
	}
	r = h.apply(t, dropBelow(lead1, 1000))
	if r.Err != nil || !reflect.DeepEqual(r.Dropped, []cluster.RemoteSegment{b}) || r.Partition.Remote != nil {
		t.Fatalf("drop below 1000: %+v", r)
	}
	if segs := segments(t, h.FSM, "t", 0); len(segs) != 0 || summaryOf(t, h.FSM, "t", 0) != nil {
		t.Fatalf("emptied log %+v, summary %+v", segs, summaryOf(t, h.FSM, "t", 0))
	}
	// An empty log takes a segment at any offset again.
	h.applyAll(t, addSeg(lead1, seg("d", 100, 200)))
	// The other partition's log is its own.
	if segs := segments(t, h.FSM, "t", 1); len(segs) != 0 {
		t.Fatalf("t-1's remote log %+v", segs)
	}
}

// alterT is an AlterPartition of t-0.
func alterT(leader int32, nodeEpoch int64, le, pe int32, isr ...int32) Command {
	c := alter(leader, nodeEpoch, le, pe, isr...)
	c.AlterPartition.Topic = "t"
	return c
}

func TestRemoteLogChecks(t *testing.T) {
	malformed := func(edit func(s *cluster.RemoteSegment)) Command {
		s := seg("x", 25, 30)
		edit(&s)
		return addSeg(lead1, s)
	}
	tests := []struct {
		name    string
		setup   []Command // after remoteBase and the segment [10, 25)
		cmd     Command
		wantErr error
	}{
		{"no object", nil, malformed(func(s *cluster.RemoteSegment) { s.Object = "" }), ErrInvalidRemoteSegment},
		{"object too long", nil, malformed(func(s *cluster.RemoteSegment) { s.Object = strings.Repeat("o", maxRemoteObjectLen+1) }), ErrInvalidRemoteSegment},
		{"negative base offset", nil, addSeg(by("t", 1, 2, 2, 0), seg("x", -1, 3)), ErrInvalidRemoteSegment},
		{"empty offsets", nil, malformed(func(s *cluster.RemoteSegment) { s.EndOffset = s.BaseOffset }), ErrInvalidRemoteSegment},
		{"no log bytes", nil, malformed(func(s *cluster.RemoteSegment) { s.LogBytes = 0 }), ErrInvalidRemoteSegment},
		{"bytes below log bytes", nil, malformed(func(s *cluster.RemoteSegment) { s.Bytes = 99 }), ErrInvalidRemoteSegment},
		{"section inside the batches", nil, malformed(func(s *cluster.RemoteSegment) { s.Sections.IndexPos = 99 }), ErrInvalidRemoteSegment},
		{"section past the end", nil, malformed(func(s *cluster.RemoteSegment) { s.Sections.EpochsLen = 11 }), ErrInvalidRemoteSegment},
		{"negative section", nil, malformed(func(s *cluster.RemoteSegment) { s.Sections.AbortedPos, s.Sections.AbortedLen = 110, -1 }), ErrInvalidRemoteSegment},
		{"huge section", nil, malformed(func(s *cluster.RemoteSegment) { s.Sections.AbortedPos, s.Sections.AbortedLen = 110, math.MaxInt64 }), ErrInvalidRemoteSegment},
		{"epoch outside the segment", nil, malformed(func(s *cluster.RemoteSegment) {
			s.Epochs = []cluster.RemoteEpoch{{Epoch: 0, StartOffset: s.EndOffset}}
		}), ErrInvalidRemoteSegment},
		{"epoch above the uploader's", nil, malformed(func(s *cluster.RemoteSegment) {
			s.Epochs = []cluster.RemoteEpoch{{Epoch: s.LeaderEpoch + 1, StartOffset: s.BaseOffset}}
		}), ErrInvalidRemoteSegment},
		{"epochs out of order", nil, malformed(func(s *cluster.RemoteSegment) {
			s.Epochs = []cluster.RemoteEpoch{{Epoch: 0, StartOffset: s.BaseOffset + 1}, {Epoch: 0, StartOffset: s.BaseOffset + 1}}
		}), ErrInvalidRemoteSegment},
		{"timestamp below -1", nil, malformed(func(s *cluster.RemoteSegment) { s.MaxTimestamp = -2 }), ErrInvalidRemoteSegment},
		{"segment from a future leader epoch", nil, malformed(func(s *cluster.RemoteSegment) { s.LeaderEpoch = 1 }), ErrInvalidRemoteSegment},
		{"unknown node", nil, addSeg(by("t", 0, 9, 1, 0), seg("x", 25, 30)), ErrUnknownNode},
		{"stale node epoch", nil, addSeg(by("t", 0, 1, 0, 0), seg("x", 25, 30)), ErrStaleNodeEpoch},
		{"fenced node", []Command{fence(1, 1)}, addSeg(lead1, seg("x", 25, 30)), ErrStaleNodeEpoch},
		{"unknown topic", nil, addSeg(by("nope", 0, 1, 1, 0), seg("x", 25, 30)), ErrUnknownTopic},
		{"unknown partition", nil, addSeg(by("t", 2, 1, 1, 0), seg("x", 25, 30)), ErrUnknownPartition},
		{"negative partition", nil, addSeg(by("t", -1, 1, 1, 0), seg("x", 25, 30)), ErrUnknownPartition},
		{"stale leader epoch", nil, addSeg(by("t", 0, 1, 1, 7), seg("x", 25, 30)), ErrFencedLeaderEpoch},
		{"not the leader", nil, addSeg(by("t", 0, 2, 2, 0), seg("x", 25, 30)), ErrNotPartitionLeader},
		// A new leader (leader epoch 1) fences the old one, adding or
		// dropping, even a retry; the new one carries on.
		{"deposed leader adds", []Command{update("t", 0, 0, 0, 2, 2, 1)}, addSeg(lead1, seg("x", 25, 30)), ErrFencedLeaderEpoch},
		{"deposed leader retries", []Command{update("t", 0, 0, 0, 2, 2, 1)}, addSeg(lead1, seg("b", 10, 25)), ErrFencedLeaderEpoch},
		{"deposed leader drops", []Command{update("t", 0, 0, 0, 2, 2, 1)}, dropBelow(lead1, 100), ErrFencedLeaderEpoch},
		{"new leader at the old epoch", []Command{update("t", 0, 0, 0, 2, 2, 1)}, dropBelow(by("t", 0, 2, 2, 0), 100), ErrFencedLeaderEpoch},
		{"new leader adds", []Command{update("t", 0, 0, 0, 2, 2, 1)}, addSeg(by("t", 0, 2, 2, 1), seg("x", 25, 30)), nil},
		{"restarted leader at its old node epoch", []Command{reg(1, "")}, dropBelow(by("t", 0, 1, 1, 1), 100), ErrStaleNodeEpoch},
		{"drop from a follower", nil, dropBelow(by("t", 0, 2, 2, 0), 100), ErrNotPartitionLeader},
		{"drop of an unknown partition", nil, dropBelow(by("t", 5, 1, 1, 0), 100), ErrUnknownPartition},
		{"type without body", nil, Command{Type: TypeAddRemoteSegment}, ErrMalformedCommand},
		{"clear garbage with another body", nil, Command{Type: TypeClearRemoteGarbage, DropRemoteSegments: &cluster.DropRemoteSegmentsRequest{}}, ErrMalformedCommand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := remoteBase(t)
			h.applyAll(t, addSeg(lead1, seg("b", 10, 25)))
			h.applyAll(t, tc.setup...)
			before, beforeRemote := h.View(), remoteState(h.FSM)
			r := h.apply(t, tc.cmd)
			if !errors.Is(r.Err, tc.wantErr) {
				t.Fatalf("err = %v; want %v", r.Err, tc.wantErr)
			}
			if tc.wantErr == nil {
				return
			}
			if !reflect.DeepEqual(h.View(), before) || remoteState(h.FSM) != beforeRemote {
				t.Fatal("a rejected command changed the state")
			}
			// The leader checks before proposing agree with Apply.
			var err error
			switch tc.cmd.Type {
			case TypeAddRemoteSegment:
				if tc.cmd.AddRemoteSegment != nil {
					err = h.CheckAddRemoteSegment(*tc.cmd.AddRemoteSegment)
				}
			case TypeDropRemoteSegments:
				_, err = h.CheckDropRemoteSegments(*tc.cmd.DropRemoteSegments)
			}
			if err != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("check = %v; want %v", err, tc.wantErr)
			}
		})
	}
}

func TestCheckRemoteChanges(t *testing.T) {
	h := remoteBase(t)
	h.applyAll(t, addSeg(lead1, seg("a", 0, 10)), addSeg(lead1, seg("b", 10, 25)))
	if err := h.CheckAddRemoteSegment(cluster.AddRemoteSegmentRequest{RemoteLeader: lead1, Segment: seg("c", 25, 30)}); err != nil {
		t.Fatalf("check of the next segment: %v", err)
	}
	if err := h.CheckAddRemoteSegment(cluster.AddRemoteSegmentRequest{RemoteLeader: lead1, Segment: seg("b", 10, 25)}); err != nil {
		t.Fatalf("check of a retry: %v", err)
	}
	if err := h.CheckAddRemoteSegment(cluster.AddRemoteSegmentRequest{RemoteLeader: lead1, Segment: seg("c", 26, 30)}); !errors.Is(err, ErrRemoteLogGap) {
		t.Fatalf("check of a gap: %v", err)
	}
	// Below 0 changes nothing; inside a segment it moves the start; at a
	// segment's end it drops segments.
	for below, want := range map[int64]bool{0: false, 9: true, 10: true, 24: true, 25: true, 1 << 40: true} {
		if changes, err := h.CheckDropRemoteSegments(cluster.DropRemoteSegmentsRequest{RemoteLeader: lead1, Below: below}); err != nil || changes != want {
			t.Errorf("check of a drop below %d = %v, %v; want %v", below, changes, err, want)
		}
	}
}

// A drop below an offset inside the first segment left moves the remote
// log's start there (DeleteRecords): the summary and the read log say so,
// a snapshot keeps it, a lower drop does not move it back, and dropping
// that segment forgets it.
func TestDropMovesRemoteStartInsideASegment(t *testing.T) {
	h := remoteBase(t)
	h.applyAll(t, addSeg(lead1, seg("a", 0, 10)), addSeg(lead1, seg("b", 10, 25)))
	drop := func(below int64) *Result {
		t.Helper()
		r := h.apply(t, Command{Type: TypeDropRemoteSegments, DropRemoteSegments: &cluster.DropRemoteSegmentsRequest{RemoteLeader: lead1, Below: below}})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r
	}
	if r := drop(14); len(r.Dropped) != 1 || r.Partition.Remote.Start != 14 || r.Partition.Remote.Segments != 1 {
		t.Fatalf("drop below 14: dropped %d, summary %+v; want segment a dropped and the start at 14", len(r.Dropped), r.Partition.Remote)
	}
	if l, _ := h.RemoteLog("t", 0); l.LogStart != 14 || l.Start() != 14 {
		t.Fatalf("remote log %+v: start %d, want 14", l, l.Start())
	}
	if r := drop(12); r.Partition.Remote.Start != 14 {
		t.Fatalf("a lower drop moved the start back to %d", r.Partition.Remote.Start)
	}
	snap, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if l, _ := restored.RemoteLog("t", 0); l.Start() != 14 {
		t.Fatalf("after a snapshot the remote log starts at %d, want 14", l.Start())
	}
	if r := drop(25); r.Partition.Remote != nil {
		t.Fatalf("dropping every segment left a summary %+v", r.Partition.Remote)
	}
	if l, _ := h.RemoteLog("t", 0); l.LogStart != 0 {
		t.Fatalf("the start outlived its segment: %+v", l)
	}
}

func TestDeletedTopicsRemoteLogsBecomeGarbage(t *testing.T) {
	h := remoteBase(t)
	h.applyAll(t, create("u", 1, []int32{3}),
		addSeg(lead1, seg("t0-a", 0, 10)), addSeg(lead1, seg("t0-b", 10, 20)),
		addSeg(by("t", 1, 2, 2, 0), seg("t1-a", 7, 9)),
		addSeg(by("u", 0, 3, 3, 0), seg("u0-a", 0, 1)))
	if g := h.RemoteGarbage(); g != nil {
		t.Fatalf("garbage before any deletion: %+v", g)
	}
	h.applyAll(t, Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "t"}})
	if _, err := h.RemoteLog("t", 0); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("remote log of a deleted topic: %v", err)
	}
	want := []cluster.RemoteLog{
		{Topic: "t", Partition: 0, Segments: []cluster.RemoteSegment{seg("t0-a", 0, 10), seg("t0-b", 10, 20)}},
		{Topic: "t", Partition: 1, Segments: []cluster.RemoteSegment{seg("t1-a", 7, 9)}},
	}
	if g := h.RemoteGarbage(); !reflect.DeepEqual(g, want) {
		t.Fatalf("garbage %+v; want %+v", g, want)
	}
	if segs := segments(t, h.FSM, "u", 0); len(segs) != 1 {
		t.Fatalf("another topic's remote log: %+v", segs)
	}
	// A topic created again under the name starts with an empty remote log.
	h.applyAll(t, create("t", 1, []int32{1}))
	if segs := segments(t, h.FSM, "t", 0); len(segs) != 0 {
		t.Fatalf("recreated topic's remote log: %+v", segs)
	}

	// Clearing takes objects out of the list, without a version: garbage is
	// not part of the cluster model.
	version, woken := h.Changed()
	h.applyAll(t, clearGarbage("t", 0, "t0-b", "never-there"), clearGarbage("t", 3, "t0-a"), clearGarbage("nope", 0))
	want[0].Segments = want[0].Segments[:1]
	if g := h.RemoteGarbage(); !reflect.DeepEqual(g, want) {
		t.Fatalf("garbage after a partial clear %+v; want %+v", g, want)
	}
	h.applyAll(t, clearGarbage("t", 0, "t0-a"), clearGarbage("t", 0, "t0-a"))
	if g := h.RemoteGarbage(); !reflect.DeepEqual(g, want[1:]) {
		t.Fatalf("garbage after clearing t-0 %+v; want %+v", g, want[1:])
	}
	h.applyAll(t, clearGarbage("t", 1, "t1-a"))
	if g := h.RemoteGarbage(); g != nil {
		t.Fatalf("garbage after clearing everything: %+v", g)
	}
	if h.Version() != version {
		t.Fatalf("clearing garbage moved the version to %d (was %d)", h.Version(), version)
	}
	select {
	case <-woken:
		t.Fatal("clearing garbage woke watchers")
	default:
	}

	// A topic deleted again adds to its partitions' garbage.
	h.applyAll(t, addSeg(by("t", 0, 1, 1, 0), seg("again", 3, 4)), Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "t"}})
	if g := h.RemoteGarbage(); len(g) != 1 || len(g[0].Segments) != 1 || g[0].Segments[0].Object != "again" {
		t.Fatalf("garbage of the second deletion: %+v", g)
	}
}

func TestRemoteLogsSurviveSnapshots(t *testing.T) {
	h := remoteBase(t)
	h.applyAll(t, create("gone", 1, []int32{3}),
		addSeg(lead1, seg("a", 0, 10)), addSeg(lead1, seg("b", 10, 20)),
		addSeg(by("gone", 0, 3, 3, 0), seg("g", 0, 5)),
		Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "gone"}})
	g := snapshotRoundTrip(t, h.FSM)
	if !reflect.DeepEqual(g.View(), h.View()) || remoteState(g) != remoteState(h.FSM) {
		t.Fatalf("restored state differs:\n%s\n%s", remoteState(g), remoteState(h.FSM))
	}
	if s := summaryOf(t, g, "t", 0); s == nil || s.End != 20 {
		t.Fatalf("restored summary %+v", s)
	}
	// The restored FSM goes on: retries are recognized, gaps refused.
	if r := g.ApplyCommand(100, addSeg(lead1, seg("b", 10, 20))); r.Err != nil || g.Version() == 100 {
		t.Fatalf("retry after restore: %v", r.Err)
	}
	if r := g.ApplyCommand(101, addSeg(lead1, seg("c", 21, 30))); !errors.Is(r.Err, ErrRemoteLogGap) {
		t.Fatalf("gap after restore: %v", r.Err)
	}

	// A snapshot from before remote logs restores with none.
	old, err := os.ReadFile("testdata/snapshot-before-producer-ids.json")
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if f.RemoteGarbage() != nil || remoteState(f) != remoteState(New()) {
		t.Fatalf("remote state of an old snapshot: %s", remoteState(f))
	}
}

func TestRestoreRecomputesAndChecksRemoteLogs(t *testing.T) {
	h := remoteBase(t)
	h.applyAll(t, addSeg(lead1, seg("a", 0, 10)))
	snap, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	var d snapshotData
	if err := json.Unmarshal(sink.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	restore := func(d snapshotData) (*FSM, error) {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		f := New()
		return f, f.Restore(io.NopCloser(bytes.NewReader(b)))
	}
	// A summary the remote logs do not back is recomputed from them.
	d.Topics[0].Partitions[1].Remote = &cluster.RemoteSummary{Start: 1, End: 2, Bytes: 3, Segments: 4}
	f, err := restore(d)
	if err != nil || summaryOf(t, f, "t", 1) != nil || summaryOf(t, f, "t", 0).End != 10 {
		t.Fatalf("restore = %v; summaries %+v, %+v", err, summaryOf(t, f, "t", 0), summaryOf(t, f, "t", 1))
	}
	for name, edit := range map[string]func(d *snapshotData){
		"unknown partition": func(d *snapshotData) { d.RemoteLogs[0].Partition = 7 },
		"twice":             func(d *snapshotData) { d.RemoteLogs = append(d.RemoteLogs, d.RemoteLogs[0]) },
		"gap": func(d *snapshotData) {
			d.RemoteLogs[0].Segments = append(d.RemoteLogs[0].Segments, seg("b", 11, 12))
		},
	} {
		bad := d
		bad.RemoteLogs = []cluster.RemoteLog{{Topic: "t", Segments: []cluster.RemoteSegment{seg("a", 0, 10)}}}
		edit(&bad)
		if _, err := restore(bad); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: restore = %v; want ErrCorruptSnapshot", name, err)
		}
	}
}

func TestRemoteReadersGetCopies(t *testing.T) {
	setup := []Command{create("gone", 1, []int32{3}), addSeg(by("gone", 0, 3, 3, 0), seg("g", 0, 5)),
		Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "gone"}},
		addSeg(lead1, seg("a", 0, 10)), addSeg(lead1, seg("b", 10, 20)), addSeg(lead1, seg("c", 20, 30))}
	retry, drop := addSeg(lead1, seg("c", 20, 30)), dropBelow(lead1, 10)
	// h's copies are changed, twin's are not: both must end alike.
	h, twin := remoteBase(t), remoteBase(t)
	h.applyAll(t, setup...)
	twin.applyAll(t, append(setup, retry, drop)...)

	l, _ := h.RemoteLog("t", 0)
	l.Segments[0].Object = "changed"
	h.RemoteGarbage()[0].Segments[0].Object = "changed"
	tp, _ := h.Topic("t")
	tp.Partitions[0].Remote.End = 99
	h.Cluster().Topics[0].Partitions[0].Remote.End = 99
	h.View().Topics[0].Partitions[0].Remote.End = 99
	r := h.apply(t, retry)
	r.Partition.Remote.End = 99
	r = h.apply(t, drop)
	r.Dropped[0].Object = "changed"
	r.Partition.Remote.End = 99
	if got, want := remoteState(h.FSM), remoteState(twin.FSM); got != want || !reflect.DeepEqual(h.View(), twin.View()) {
		t.Fatalf("state changed through a copy:\n got %s\nwant %s", got, want)
	}
	if s := summaryOf(t, h.FSM, "t", 0); s.Start != 10 || s.End != 30 || s.Segments != 2 {
		t.Fatalf("summary %+v", s)
	}
}

func TestRemoteCommandsEncode(t *testing.T) {
	for _, c := range []Command{addSeg(lead1, seg("a", 0, 10)), dropBelow(lead1, 5), clearGarbage("t", 0, "a")} {
		b, err := c.Encode()
		if err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		got, err := DecodeCommand(b)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("%s: decoded %+v, %v", c.Type, got, err)
		}
	}
}
