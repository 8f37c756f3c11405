package fsm

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// FuzzApplyBatch feeds the offsets FSM a batch of arbitrary entries, one per
// line: whatever the bytes, each entry gets a *Result, the replica does not
// break (bad entries are answered, not stored), and reopening the bbolt file
// as a restart would gives the same groups, offsets and applied index.
func FuzzApplyBatch(f *testing.F) {
	seed := func(cmds ...Command) []byte {
		var b bytes.Buffer
		for _, c := range cmds {
			line, err := json.Marshal(c)
			if err != nil {
				f.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		return b.Bytes()
	}
	f.Add(seed(commit("g", "", 0, "t", 0, 42), commit("g", "", 0, "t", 1, 7),
		Command{Type: TypeReset, Reset: &Reset{Group: "g", Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 1}}, TimeMs: 2}},
		Command{Type: TypeDeleteGroup, DeleteGroup: &DeleteGroup{Group: "g"}}))
	f.Add(seed(Command{Type: TypePutGroup, PutGroup: &PutGroup{Group: memberGroup()}}, commit("g", "m1", 3, "t", 0, 5),
		commit("g", "m2", 9, "t", 2, 5), Command{Type: TypeDeleteGroup, DeleteGroup: &DeleteGroup{Group: "g"}}))
	f.Add(seed(Command{Type: TypePutTxn, PutTxn: &PutTxn{Txn: &Txn{ID: "tx", ProducerID: 7, State: TxnOngoing, Groups: []string{"g"},
		Offsets: map[string][]groups.Offset{"g": {{Topic: "t", Partition: 0, Offset: 9}}}}}},
		Command{Type: TypePutTxn, PutTxn: &PutTxn{ExpectVersion: 1, Commit: true, Txn: &Txn{ID: "tx", ProducerID: 7, Epoch: 1, State: TxnCompleteCommit,
			Offsets: map[string][]groups.Offset{"g": {{Topic: "t", Partition: 0, Offset: 9}}}}}},
		Command{Type: TypePutTxn, PutTxn: &PutTxn{ExpectVersion: 1, Txn: &Txn{ID: "tx", ProducerID: 7, State: TxnEmpty}}}))
	f.Add(seed(Command{Type: TypeBatch, Batch: []json.RawMessage{[]byte(`{"type":"commit","commit":{"group":"g","offsets":[{"topic":"t","partition":0,"offset":3}],"time_ms":1}}`),
		[]byte(`{"type":"batch","batch":[{}]}`), []byte(`"x"`)}}))
	// Every share operation, a dead-letter round included, then a
	// deletion refused while records are held and one after they are not.
	share := func(op sharefsm.Command) Command {
		op.Group, op.NowMs = "q", 1000
		return Command{Type: TypeShare, Share: &op}
	}
	cfg := shares.DefaultConfig()
	cfg.DeadLetterTopic, cfg.DeliveryLimit = "dlt", 1
	f.Add(seed(share(sharefsm.Command{Config: &cfg}),
		share(sharefsm.Command{Acquire: &sharefsm.Acquire{MemberID: "m1", Topic: "t", Max: 10, Partitions: []sharefsm.Bounds{{Partition: 0, HighWatermark: 20}, {Partition: 1, HighWatermark: 5}}}}),
		share(sharefsm.Command{Ack: &shares.AckRequest{MemberID: "m1", Acks: []shares.Ack{{Topic: "t", Partition: 0, FirstOffset: 0, LastOffset: 3, Type: shares.AckAccept},
			{Topic: "t", Partition: 0, FirstOffset: 4, LastOffset: 5, Type: shares.AckReject, Reason: "bad"}}}}),
		share(sharefsm.Command{DeadLetterBegin: &sharefsm.DeadLetterBegin{Topic: "t", Partition: 0, ProducerID: 9, Max: 10}}),
		share(sharefsm.Command{DeadLetterDone: &sharefsm.DeadLetterDone{Topic: "t", Partition: 0}}),
		share(sharefsm.Command{Delete: true}),
		share(sharefsm.Command{Leave: "m1"}),
		share(sharefsm.Command{Reset: &sharefsm.Reset{Topic: "t", Partitions: []shares.PartitionReset{{Partition: 0, Offset: 2}}}}),
		share(sharefsm.Command{Reset: &sharefsm.Reset{Topic: "t", Drop: true}}),
		share(sharefsm.Command{Delete: true})))
	f.Add(seed(commit("g", "", 0, "t", 0, 4), commit("g", "", 0, "u", 0, 4),
		Command{Type: TypeDeleteOffsets, DeleteOffsets: &DeleteOffsets{Group: "g", Topic: "t"}},
		Command{Type: TypeDeleteOffsets, DeleteOffsets: &DeleteOffsets{Group: "none", Topic: "t"}}))
	f.Add([]byte("{\"type\":\"commit\",\"commit\":{\"group\":\"\",\"offsets\":[{\"topic\":\"\",\"partition\":-1,\"offset\":-9}]}}\n{}\n\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte("\n"))
		if len(lines) > 32 {
			t.Skip("at most 32 entries: each run creates and opens a state file twice")
		}
		path := filepath.Join(t.TempDir(), "state.db")
		fsm := open(t, path)
		var logs []*raft.Log
		for i, line := range lines {
			logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: line})
		}
		for i, r := range fsm.ApplyBatch(logs) {
			if _, ok := r.(*Result); !ok {
				t.Fatalf("entry %d: %T, not a *Result", i, r)
			}
		}
		if fsm.broken != nil {
			t.Fatalf("bad input broke the replica: %v", fsm.broken)
		}
		want := dump(t, fsm)
		if err := fsm.Close(); err != nil {
			t.Fatal(err)
		}
		again := open(t, path)
		if got := dump(t, again); got != want {
			t.Fatalf("reopened state differs:\n got %s\nwant %s", got, want)
		}
	})
}

// dump renders what a replica serves: applied index, groups and their
// offsets and membership, transactional ids' states.
func dump(t *testing.T, f *FSM) string {
	t.Helper()
	type group struct {
		Name    string
		State   *Group
		Offsets []groups.Committed
	}
	out := struct {
		Applied uint64
		Groups  []group
		Txns    []*Txn
	}{Applied: f.AppliedIndex()}
	var err error
	if out.Txns, err = f.Txns(); err != nil {
		t.Fatal(err)
	}
	names := f.GroupNames()
	slices.Sort(names)
	for _, name := range names {
		g, _ := f.Group(name)
		offs, err := f.Offsets(name, "t")
		if err != nil {
			t.Fatal(err)
		}
		out.Groups = append(out.Groups, group{Name: name, State: g, Offsets: offs})
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
