package fsm

import (
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// The share groups' rules are package sharefsm's, tested there; these
// tests are of the FSM that applies them: share commands in entries and
// batches, beside consumer groups, through restarts and snapshots.

// shareEntry is the entry at index holding share operation op of group q.
func shareEntry(t *testing.T, index uint64, op sharefsm.Command) *raft.Log {
	t.Helper()
	op.Group = "q"
	return entry(t, index, Command{Type: TypeShare, Share: &op})
}

// storedShare is group q's partition t-0 as the state file stores it.
func storedShare(t *testing.T, f *FSM) string {
	t.Helper()
	g, ok := f.Share("q")
	if !ok {
		t.Fatal("no share group q")
	}
	b, err := sharefsm.EncodePartition(g.Partitions["t/0"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestShareStateSurvivesRestartAndSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f := open(t, path)
	cfg := shares.DefaultConfig()
	cfg.AutoOffsetReset, cfg.LockDurationMs, cfg.DeliveryLimit, cfg.MaxRecordLocks, cfg.MaxFetchRecords = "earliest", 1000, 3, 100, 100
	ack := func(first, last int64, typ shares.AckType) sharefsm.Command {
		return sharefsm.Command{NowMs: 1, Ack: &shares.AckRequest{MemberID: "a", Acks: []shares.Ack{{Topic: "t", FirstOffset: first, LastOffset: last, Type: typ}}}}
	}
	for i, op := range []sharefsm.Command{{Config: &cfg},
		{Acquire: &sharefsm.Acquire{MemberID: "a", Topic: "t", Max: 10, Partitions: []sharefsm.Bounds{{HighWatermark: 10}}}},
		ack(2, 3, shares.AckAccept), ack(5, 5, shares.AckReject)} {
		if res := apply(t, f, shareEntry(t, uint64(i+1), op))[0]; res.Err != nil || op.Ack != nil && res.Share.Acks[0].ErrorCode != 0 {
			t.Fatalf("operation %d: %v %+v", i, res.Err, res.Share)
		}
	}
	want := storedShare(t, f)
	f.Close()
	f = open(t, path)
	if got := storedShare(t, f); got != want {
		t.Fatalf("after a restart:\n%s\nwant\n%s", got, want)
	}
	g, _ := f.Share("q")
	if g.Config != cfg {
		t.Fatalf("configuration after a restart: %+v", g.Config)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	other := open(t, filepath.Join(t.TempDir(), "other.db"))
	if err := other.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	if got := storedShare(t, other); got != want {
		t.Fatalf("after a restore:\n%s\nwant\n%s", got, want)
	}
}

func TestShareGroupNameOfAConsumerGroup(t *testing.T) {
	f := open(t, filepath.Join(t.TempDir(), "state.db"))
	g := memberGroup()
	g.Name = "q"
	if res := apply(t, f, entry(t, 1, Command{Type: TypePutGroup, PutGroup: &PutGroup{Group: g}}))[0]; res.Err != nil {
		t.Fatal(res.Err)
	}
	res := apply(t, f, shareEntry(t, 2, sharefsm.Command{Acquire: &sharefsm.Acquire{MemberID: "a", Topic: "t", Partitions: []sharefsm.Bounds{{HighWatermark: 1}}}}))[0]
	if protocol.CodeOf(res.Err) != protocol.InconsistentGroupProtocol {
		t.Fatalf("a share acquisition in a consumer group: %v", res.Err)
	}
}

// shareOps returns n random share commands of group q on a topic of two
// partitions of 20 records: acquisitions of four members and
// acknowledgements of random ranges by random members (refused where the
// member does not hold them), with the clock moving so that locks expire.
func shareOps(n int, seed uint64) []Command {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := shares.DefaultConfig()
	cfg.AutoOffsetReset, cfg.LockDurationMs, cfg.MaxRecordLocks, cfg.MaxFetchRecords = "earliest", 1000, 100, 8
	out := []Command{{Type: TypeShare, Share: &sharefsm.Command{Group: "q", Config: &cfg, NowMs: 1}}}
	now := int64(1000)
	for range n {
		now += int64(rng.IntN(200))
		member := "m" + string(rune('0'+rng.IntN(4)))
		op := sharefsm.Command{Group: "q", NowMs: now}
		if rng.IntN(2) == 0 {
			var acks []shares.Ack
			for range 1 + rng.IntN(2) {
				first := int64(rng.IntN(20))
				acks = append(acks, shares.Ack{Topic: "t", Partition: int32(rng.IntN(2)), FirstOffset: first, LastOffset: first + int64(rng.IntN(4)),
					Type: []shares.AckType{shares.AckAccept, shares.AckRelease, shares.AckReject}[rng.IntN(3)]})
			}
			op.Ack = &shares.AckRequest{MemberID: member, Acks: acks}
		}
		if op.Ack == nil || rng.IntN(2) == 0 {
			op.Acquire = &sharefsm.Acquire{MemberID: member, Topic: "t", Max: int32(1 + rng.IntN(8)),
				Partitions: []sharefsm.Bounds{{Partition: 0, HighWatermark: 20}, {Partition: 1, HighWatermark: 20}}}
		}
		out = append(out, Command{Type: TypeShare, Share: &op})
	}
	return out
}

// TestShareBatchesApplyAsSingleEntries: share commands applied in entries
// of several commands (where a command changes in place the copies an
// earlier command of its entry made) answer and end in the same state as
// the same commands applied one an entry.
func TestShareBatchesApplyAsSingleEntries(t *testing.T) {
	var accepted int64
	for seed := range uint64(20) {
		ops := shareOps(300, seed)
		single := open(t, filepath.Join(t.TempDir(), "state.db"))
		var want []string
		for i, c := range ops {
			b, err := json.Marshal(apply(t, single, entry(t, uint64(i+1), c))[0].Share)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, string(b))
		}
		batched := open(t, filepath.Join(t.TempDir(), "state.db"))
		rng := rand.New(rand.NewPCG(seed, 9))
		var got []string
		for i, index := 0, uint64(1); i < len(ops); index++ {
			n := min(1+rng.IntN(8), len(ops)-i)
			for _, r := range applyEntry(t, batched, index, ops[i:i+n]...) {
				b, err := json.Marshal(r.Share)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(b))
			}
			i += n
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("seed %d, command %d: batched answer %s, one an entry %s", seed, i, got[i], want[i])
			}
		}
		a, _ := single.Share("q")
		b, _ := batched.Share("q")
		if !reflect.DeepEqual(a.Partitions, b.Partitions) {
			t.Fatalf("seed %d: the states differ:\none an entry %+v\nbatched      %+v", seed, a.Partitions, b.Partitions)
		}
		accepted += a.Partitions[fsmKeyOf("t", 0)].Accepted + a.Partitions[fsmKeyOf("t", 1)].Accepted
	}
	if accepted < 20 {
		t.Fatalf("%d records accepted in all: the commands hardly test acknowledgements", accepted)
	}
	t.Logf("%d records accepted over the seeds", accepted)
}

// applyEntry applies cmds as the entry at index, a batch of them (the
// command itself when there is one, as the coordinator proposes it), and
// returns their answers.
func applyEntry(tb testing.TB, f *FSM, index uint64, cmds ...Command) []*Result {
	tb.Helper()
	var enc [][]byte
	for _, c := range cmds {
		e, err := c.Encode()
		if err != nil {
			tb.Fatal(err)
		}
		enc = append(enc, e)
	}
	data, err := EncodeBatch(enc)
	if err != nil {
		tb.Fatal(err)
	}
	res := f.ApplyBatch([]*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: data}})[0].(*Result)
	if len(cmds) == 1 {
		return []*Result{res}
	}
	return res.Batch
}

func fsmKeyOf(topic string, p int32) string {
	return partkey.String(groups.TP{Topic: topic, Partition: p})
}

// BenchmarkShareEntry applies entries of 8 share commands of one group on
// one partition, 1,600 records in flight: each member acknowledges the 200
// records it holds and acquires the next 200.
func BenchmarkShareEntry(b *testing.B) {
	f, err := Open(filepath.Join(b.TempDir(), "state.db"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	index := uint64(0)
	run := func(cmds ...Command) []*Result {
		index++
		return applyEntry(b, f, index, cmds...)
	}
	cfg := shares.DefaultConfig()
	cfg.AutoOffsetReset = "earliest"
	run(Command{Type: TypeShare, Share: &sharefsm.Command{Group: "q", Config: &cfg, NowMs: 1}})
	hw := int64(1 << 40)
	bounds := []sharefsm.Bounds{{Partition: 0, HighWatermark: hw}}
	held := make([]shares.Acquired, 8) // what each member holds
	now := int64(1000)
	// Fill the window: the members hold 1,600 records, 200 each.
	var cmds []Command
	for m := range 8 {
		cmds = append(cmds, Command{Type: TypeShare, Share: &sharefsm.Command{Group: "q", NowMs: now,
			Acquire: &sharefsm.Acquire{MemberID: strconv.Itoa(m), Topic: "t", Max: 200, Partitions: bounds}}})
	}
	for m, r := range run(cmds...) {
		held[m] = r.Share.Acquire.Acquired[0]
	}
	b.ReportAllocs()
	for b.Loop() {
		now++
		var cmds []Command
		for m := range 8 {
			a := held[m]
			cmds = append(cmds, Command{Type: TypeShare, Share: &sharefsm.Command{Group: "q", NowMs: now,
				Ack:     &shares.AckRequest{MemberID: strconv.Itoa(m), Acks: []shares.Ack{{Topic: "t", FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, Type: shares.AckAccept}}},
				Acquire: &sharefsm.Acquire{MemberID: strconv.Itoa(m), Topic: "t", Max: 200, Partitions: bounds}}})
		}
		for m, r := range run(cmds...) {
			if r.Err != nil || len(r.Share.Acquire.Acquired) == 0 {
				b.Fatalf("member %d: %+v", m, r)
			}
			held[m] = r.Share.Acquire.Acquired[0]
		}
	}
}
