package fsm

import (
	"bytes"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

func open(t *testing.T, path string) *FSM {
	t.Helper()
	f, err := Open(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func entry(t *testing.T, index uint64, cmd Command) *raft.Log {
	t.Helper()
	b, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}
}

func commit(group, member string, epoch int32, topic string, partition int32, offset int64) Command {
	return Command{Type: TypeCommit, Commit: &Commit{Group: group, MemberID: member, MemberEpoch: epoch, TimeMs: 1,
		Offsets: []groups.Offset{{Topic: topic, Partition: partition, Offset: offset}}}}
}

func apply(t *testing.T, f *FSM, logs ...*raft.Log) []*Result {
	t.Helper()
	var out []*Result
	for _, r := range f.ApplyBatch(logs) {
		out = append(out, r.(*Result))
	}
	return out
}

func offsetOf(t *testing.T, f *FSM, group string, partition int32) int64 {
	t.Helper()
	offs, err := f.Offsets(group, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.Partition == partition {
			return o.Offset
		}
	}
	return -1
}

// memberGroup is a group whose member m1 (epoch 3) holds t-0 (assigned) and
// t-1 (being revoked); t-2 belongs to m2.
func memberGroup() *Group {
	return &Group{Name: "g", Epoch: 2, Members: map[string]*Member{
		"m1": {ID: "m1", Epoch: 3, Topics: []string{"t"}, Assigned: []groups.TP{{Topic: "t", Partition: 0}}, Revoking: []groups.TP{{Topic: "t", Partition: 1}},
			GrantedAt: map[string]int32{"t/0": 2, "t/1": 1}},
		"m2": {ID: "m2", Epoch: 1, Topics: []string{"t"}, Assigned: []groups.TP{{Topic: "t", Partition: 2}}},
	}}
}

func TestCheckCommitFencing(t *testing.T) {
	g := memberGroup()
	for _, tc := range []struct {
		name string
		g    *Group
		c    Command
		want protocol.Code
	}{
		{"no member, no group", nil, commit("g", "", 0, "t", 0, 1), protocol.None},
		{"no member, empty group", &Group{Name: "g"}, commit("g", "", 0, "t", 0, 1), protocol.None},
		{"no member, active group", g, commit("g", "", 0, "t", 0, 1), protocol.UnknownMemberID},
		{"unknown member (zombie)", g, commit("g", "gone", 3, "t", 0, 1), protocol.UnknownMemberID},
		{"epoch from the future", g, commit("g", "m1", 4, "t", 0, 1), protocol.FencedMemberEpoch},
		{"epoch zero", g, commit("g", "m1", 0, "t", 0, 1), protocol.FencedMemberEpoch},
		{"assigned partition", g, commit("g", "m1", 3, "t", 0, 1), protocol.None},
		{"older epoch, still held", g, commit("g", "m1", 2, "t", 0, 1), protocol.None},
		{"epoch before the partition was given back", g, commit("g", "m1", 1, "t", 0, 1), protocol.StaleMemberEpoch},
		{"partition being revoked", g, commit("g", "m1", 3, "t", 1, 1), protocol.None},
		{"partition of another member", g, commit("g", "m1", 3, "t", 2, 1), protocol.StaleMemberEpoch},
		{"negative offset", nil, commit("g", "", 0, "t", 0, -1), protocol.InvalidRequest},
		{"bad topic", nil, commit("g", "", 0, "a/b", 0, 1), protocol.InvalidTopic},
		{"bad group", nil, commit("g/x", "", 0, "t", 0, 1), protocol.InvalidGroupID},
	} {
		if got := protocol.CodeOf(CheckCommit(tc.g, tc.c.Commit)); got != tc.want {
			t.Errorf("%s: code %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestApplyCommitsAreFencedInLogOrder(t *testing.T) {
	f := open(t, filepath.Join(t.TempDir(), "state.db"))
	res := apply(t, f,
		entry(t, 1, Command{Type: TypePutGroup, PutGroup: &PutGroup{Group: memberGroup()}}),
		entry(t, 2, commit("g", "m1", 3, "t", 0, 10)),
		// m1 is removed (session expired) in the next entry: its later commit is a zombie's.
		entry(t, 3, Command{Type: TypePutGroup, PutGroup: &PutGroup{ExpectVersion: 1, Group: &Group{Name: "g", Epoch: 3, Members: map[string]*Member{}}}}),
		entry(t, 4, commit("g", "m1", 3, "t", 0, 99)),
		// A stale put (the version moved on) is rejected.
		entry(t, 5, Command{Type: TypePutGroup, PutGroup: &PutGroup{ExpectVersion: 1, Group: memberGroup()}}),
	)
	for i, want := range []protocol.Code{protocol.None, protocol.None, protocol.None, protocol.UnknownMemberID, protocol.InvalidUpdateVersion} {
		if got := protocol.CodeOf(res[i].Err); got != want {
			t.Errorf("entry %d: %v, want %v", i+1, res[i].Err, want)
		}
	}
	if got := offsetOf(t, f, "g", 0); got != 10 {
		t.Fatalf("committed offset %d, want 10 (the zombie's 99 must be rejected)", got)
	}
	if g, _ := f.Group("g"); g.Version != 3 || len(g.Members) != 0 {
		t.Fatalf("group = %+v, want version 3 without members", g)
	}
}

func TestReplayAfterRestartSkipsAppliedEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f := open(t, path)
	apply(t, f, entry(t, 1, commit("g", "", 0, "t", 0, 5)), entry(t, 2, commit("g", "", 0, "t", 0, 7)))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = open(t, path)
	if got := f.AppliedIndex(); got != 2 {
		t.Fatalf("applied index after reopen = %d, want 2", got)
	}
	// Raft replays the log from its last snapshot: entry 1 again must not
	// move the offset back to 5.
	apply(t, f, entry(t, 1, commit("g", "", 0, "t", 0, 5)), entry(t, 2, commit("g", "", 0, "t", 0, 7)), entry(t, 3, commit("g", "", 0, "t", 1, 3)))
	if got := offsetOf(t, f, "g", 0); got != 7 {
		t.Fatalf("offset of t-0 = %d after replay, want 7", got)
	}
	if got := offsetOf(t, f, "g", 1); got != 3 {
		t.Fatalf("offset of t-1 = %d, want 3", got)
	}
}

func TestResetAndDeleteNeedAnEmptyGroup(t *testing.T) {
	f := open(t, filepath.Join(t.TempDir(), "state.db"))
	reset := Command{Type: TypeReset, Reset: &Reset{Group: "g", Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 1}}}}
	del := Command{Type: TypeDeleteGroup, DeleteGroup: &DeleteGroup{Group: "g"}}
	res := apply(t, f,
		entry(t, 1, del),
		entry(t, 2, Command{Type: TypePutGroup, PutGroup: &PutGroup{Group: memberGroup()}}),
		entry(t, 3, reset),
		entry(t, 4, del),
		entry(t, 5, Command{Type: TypePutGroup, PutGroup: &PutGroup{ExpectVersion: 2, Group: &Group{Name: "g"}}}),
		entry(t, 6, reset),
		entry(t, 7, del),
	)
	for i, want := range []protocol.Code{protocol.GroupIDNotFound, protocol.None, protocol.NonEmptyGroup, protocol.NonEmptyGroup, protocol.None, protocol.None, protocol.None} {
		if got := protocol.CodeOf(res[i].Err); got != want {
			t.Errorf("entry %d: %v, want %v", i+1, res[i].Err, want)
		}
	}
	if _, ok := f.Group("g"); ok || len(f.GroupNames()) != 0 {
		t.Fatalf("group still present after delete: %v", f.GroupNames())
	}
}

type bufSink struct{ bytes.Buffer }

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { return nil }
func (s *bufSink) Close() error  { return nil }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := open(t, filepath.Join(t.TempDir(), "state.db"))
	apply(t, src, entry(t, 1, Command{Type: TypePutGroup, PutGroup: &PutGroup{Group: memberGroup()}}), entry(t, 2, commit("g", "m1", 3, "t", 0, 42)))
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	dst := open(t, filepath.Join(t.TempDir(), "state.db"))
	apply(t, dst, entry(t, 1, commit("other", "", 0, "t", 0, 1)))
	if err := dst.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	if got := offsetOf(t, dst, "g", 0); got != 42 {
		t.Fatalf("restored offset %d, want 42", got)
	}
	if names := dst.GroupNames(); len(names) != 1 || names[0] != "g" {
		t.Fatalf("restored groups %v, want [g] (the state before the restore is replaced)", names)
	}
	if g, ok := dst.Group("g"); !ok || g.Members["m1"].Epoch != 3 || dst.AppliedIndex() != 2 {
		t.Fatalf("restored group %+v applied %d", g, dst.AppliedIndex())
	}
}

func TestDecodeCommandRejectsMalformed(t *testing.T) {
	for _, b := range []string{``, `{`, `{"type":"nope"}`, `{"type":"commit"}`, `{"type":"put_group","put_group":{}}`} {
		if _, err := DecodeCommand([]byte(b)); err == nil {
			t.Errorf("%q decoded without error", b)
		}
	}
	f := open(t, filepath.Join(t.TempDir(), "state.db"))
	res := apply(t, f, &raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte("garbage")})
	if protocol.CodeOf(res[0].Err) != protocol.InvalidRequest || f.AppliedIndex() != 1 {
		t.Fatalf("garbage entry: %v, applied %d", res[0].Err, f.AppliedIndex())
	}
}

// TestRestoreWhileASnapshotIsOutstanding: raft may install a snapshot from
// the leader while this member's own snapshot is still being persisted; the
// restore must not wait for it (no open transaction is held by a snapshot).
func TestRestoreWhileASnapshotIsOutstanding(t *testing.T) {
	src := open(t, filepath.Join(t.TempDir(), "state.db"))
	apply(t, src, entry(t, 1, commit("g", "", 0, "t", 0, 42)))
	var sink bufSink
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	dst := open(t, filepath.Join(t.TempDir(), "state.db"))
	pending, err := dst.Snapshot() // persisted later, after the restore
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dst.Restore(io.NopCloser(&sink)) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Restore blocked behind an outstanding snapshot")
	}
	var late bufSink
	if err := pending.Persist(&late); err != nil || late.Len() == 0 {
		t.Fatalf("the outstanding snapshot could not be persisted after the restore: %v (%d bytes)", err, late.Len())
	}
	pending.Release()
	if got := offsetOf(t, dst, "g", 0); got != 42 {
		t.Fatalf("offset after restore %d, want 42", got)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst.path), "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary snapshot files left behind: %v", left)
	}
}

// TestExpiryOfAnIdleGroupIsConditional: a DeleteGroup with IdleBeforeMs
// applies only to a group idle since before it; a commit at or after the
// cutoff keeps the group, and a group with members never expires.
func TestExpiryOfAnIdleGroupIsConditional(t *testing.T) {
	f := open(t, filepath.Join(t.TempDir(), "state.db"))
	c := commit("g", "", 0, "t", 0, 5)
	c.Commit.TimeMs = 1000
	expire := func(before int64) Command {
		return Command{Type: TypeDeleteGroup, DeleteGroup: &DeleteGroup{Group: "g", IdleBeforeMs: before}}
	}
	res := apply(t, f, entry(t, 1, c), entry(t, 2, expire(1000)))
	if res[1].Err == nil {
		t.Fatal("a group committed at the cutoff expired")
	}
	if idle, err := f.IdleSince("g"); err != nil || idle != 1000 {
		t.Fatalf("IdleSince = %d, %v; want the commit's time 1000", idle, err)
	}
	if res := apply(t, f, entry(t, 3, expire(1001))); res[0].Err != nil {
		t.Fatalf("expiring a group idle before the cutoff: %v", res[0].Err)
	}
	if names := f.GroupNames(); len(names) != 0 {
		t.Fatalf("groups %v after the expiry", names)
	}
	// A group with a member is active, whatever its commits' age.
	g := &Group{Name: "g", Members: map[string]*Member{"m": {ID: "m", Epoch: 1}}}
	res = apply(t, f, entry(t, 4, Command{Type: TypePutGroup, PutGroup: &PutGroup{Group: g}}), entry(t, 5, expire(1<<60)))
	if res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("put %v, expiry of a group with a member %v; want it refused", res[0].Err, res[1].Err)
	}
	// Empty since 2000 (its last member left then): idle since 2000.
	g = &Group{Name: "g", EmptySinceMs: 2000}
	apply(t, f, entry(t, 6, Command{Type: TypePutGroup, PutGroup: &PutGroup{ExpectVersion: 4, Group: g}}))
	if idle, err := f.IdleSince("g"); err != nil || idle != 2000 {
		t.Fatalf("IdleSince = %d, %v; want 2000", idle, err)
	}
}

func TestCheckFetch(t *testing.T) {
	consumer := &Group{Name: "g", Members: map[string]*Member{"m": {ID: "m", Epoch: 4}}}
	classic := &Group{Name: "c", Protocol: groups.ProtocolClassic, Epoch: 2, Members: map[string]*Member{"m": {ID: "m", Epoch: 2}}}
	for _, tc := range []struct {
		name  string
		g     *Group
		id    string
		epoch int32
		want  protocol.Code
	}{
		{"current epoch", consumer, "m", 4, protocol.None},
		{"older epoch", consumer, "m", 3, protocol.StaleMemberEpoch},
		{"newer epoch", consumer, "m", 5, protocol.StaleMemberEpoch},
		{"gone member", consumer, "x", 4, protocol.UnknownMemberID},
		{"no group", nil, "m", 1, protocol.UnknownMemberID},
		{"classic, unchecked", classic, "x", 9, protocol.None},
	} {
		if got := protocol.CodeOf(CheckFetch(tc.g, "g", tc.id, tc.epoch)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBatchEntryAnswersEachCommand: a group-commit entry applies its
// commands in order, each seeing the ones before it, and answers each on
// its own: a refusal (a fenced commit, a batch inside the batch, bytes that
// are no command) changes nothing and does not stop the commands after it.
func TestBatchEntryAnswersEachCommand(t *testing.T) {
	f := open(t, filepath.Join(t.TempDir(), "state.db"))
	enc := func(c Command) []byte {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inner, err := EncodeBatch([][]byte{enc(commit("h", "", 0, "t", 0, 1)), enc(commit("h", "", 0, "t", 1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeBatch([][]byte{
		enc(Command{Type: TypePutGroup, PutGroup: &PutGroup{Group: memberGroup()}}),
		enc(commit("g", "m1", 3, "t", 0, 10)), // m1 exists: the group was put just before
		enc(commit("g", "m1", 4, "t", 0, 99)), // an epoch from the future: fenced
		inner,
		[]byte(`{"type":"nonsense"}`),
		enc(commit("g", "m2", 1, "t", 2, 20)),
	})
	if err != nil {
		t.Fatal(err)
	}
	res := apply(t, f, &raft.Log{Index: 5, Term: 1, Type: raft.LogCommand, Data: b})[0]
	if res.Err != nil || len(res.Batch) != 6 {
		t.Fatalf("batch answer: %+v", res)
	}
	for i, want := range []protocol.Code{protocol.None, protocol.None, protocol.FencedMemberEpoch, protocol.InvalidRequest, protocol.InvalidRequest, protocol.None} {
		if got := protocol.CodeOf(res.Batch[i].Err); got != want {
			t.Fatalf("command %d answered %v (%v), want %v", i, got, res.Batch[i].Err, want)
		}
	}
	if got := offsetOf(t, f, "g", 0); got != 10 {
		t.Fatalf("t-0 committed at %d, want 10 (the fenced commit changed nothing)", got)
	}
	if got := offsetOf(t, f, "g", 2); got != 20 {
		t.Fatalf("t-2 committed at %d, want 20", got)
	}
	if offs, _ := f.Offsets("h", "t"); len(offs) != 0 {
		t.Fatalf("the nested batch was applied: %v", offs)
	}
	if g, ok := f.Group("g"); !ok || g.Version != 5 {
		t.Fatalf("group after the batch: %+v", g)
	}
	if single, _ := EncodeBatch([][]byte{enc(commit("g", "", 0, "t", 0, 1))}); !bytes.Equal(single, enc(commit("g", "", 0, "t", 0, 1))) {
		t.Fatalf("a batch of one is not the command itself: %s", single)
	}
}

// TestCommittedLeaderEpochs: a commit's leader epoch is kept with the
// offset, through a restart; an offset committed without one has none.
func TestCommittedLeaderEpochs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f := open(t, path)
	five := int32(5)
	cmd := Command{Type: TypeCommit, Commit: &Commit{Group: "g", TimeMs: 1, Offsets: []groups.Offset{
		{Topic: "t", Partition: 0, Offset: 10, LeaderEpoch: &five}, {Topic: "t", Partition: 1, Offset: 20}}}}
	if res := apply(t, f, entry(t, 1, cmd)); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	check := func(f *FSM, when string) {
		t.Helper()
		offs, err := f.Offsets("g", "t")
		if err != nil || len(offs) != 2 {
			t.Fatalf("%s: %+v %v", when, offs, err)
		}
		for _, o := range offs {
			if want := map[int32]int32{0: 5, 1: -1}[o.Partition]; groups.Epoch(o.LeaderEpoch) != want {
				t.Fatalf("%s: %s-%d leader epoch %d, want %d", when, o.Topic, o.Partition, groups.Epoch(o.LeaderEpoch), want)
			}
		}
	}
	check(f, "applied")
	f.Close()
	check(open(t, path), "after a restart")
}
