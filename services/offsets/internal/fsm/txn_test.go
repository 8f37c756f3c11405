package fsm

import (
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

func putTxn(expect uint64, tx *Txn, commit bool) Command {
	return Command{Type: TypePutTxn, PutTxn: &PutTxn{ExpectVersion: expect, Txn: tx, Commit: commit}}
}

// TestPutTxn: a transaction's state is stored by compare-and-set on its
// version; its pending offsets stay out of the groups' committed offsets
// until the entry that completes its commit, which stores them in the same
// write; invalid states are refused; the state survives a reopen.
func TestPutTxn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	f := open(t, path)
	ongoing := &Txn{ID: "tx", ProducerID: 7, Epoch: 2, State: TxnOngoing, TimeoutMs: 60000,
		Partitions: []groups.TP{{Topic: "out", Partition: 1}}, Groups: []string{"g"},
		Offsets: map[string][]groups.Offset{"g": {{Topic: "t", Partition: 0, Offset: 42}}}, UpdateMs: 5}
	res := apply(t, f, entry(t, 1, putTxn(0, ongoing, false)))
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	got, ok, err := f.Txn("tx")
	if err != nil || !ok || got.Version != 1 || got.State != TxnOngoing || len(got.Offsets["g"]) != 1 {
		t.Fatalf("stored %+v, %v, %v", got, ok, err)
	}
	if off := offsetOf(t, f, "g", 0); off != -1 {
		t.Fatalf("pending offset visible before the commit: %d", off)
	}
	if pending, err := f.PendingTxnOffsets("g"); err != nil || len(pending) != 1 || pending[0] != (groups.TP{Topic: "t", Partition: 0}) {
		t.Fatalf("pending offsets: %v, %v", pending, err)
	}
	// A stale version is refused and changes nothing.
	stale := ongoing.Clone()
	stale.State = TxnPrepareAbort
	if res := apply(t, f, entry(t, 2, putTxn(0, stale, false))); protocol.CodeOf(res[0].Err) != protocol.ConcurrentTransactions {
		t.Fatalf("stale put: %v", res[0].Err)
	}
	index := uint64(2)
	for name, bad := range map[string]*Txn{
		"no id":       {ProducerID: 1, State: TxnEmpty},
		"bad state":   {ID: "tx", ProducerID: 1, State: "Dead"},
		"negative":    {ID: "tx", ProducerID: -1, State: TxnEmpty},
		"bad offsets": {ID: "tx", ProducerID: 1, State: TxnOngoing, Offsets: map[string][]groups.Offset{"g": {{Topic: "t", Offset: -3}}}},
	} {
		index++
		if res := apply(t, f, entry(t, index, putTxn(1, bad, false))); protocol.CodeOf(res[0].Err) != protocol.InvalidRequest {
			t.Errorf("%s: %v", name, res[0].Err)
		}
	}
	done := got.Clone()
	done.State = TxnCompleteCommit
	index++
	if res := apply(t, f, entry(t, index, putTxn(1, done, true))); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if off := offsetOf(t, f, "g", 0); off != 42 {
		t.Fatalf("committed offset %d after the commit, want 42", off)
	}
	if pending, err := f.PendingTxnOffsets("g"); err != nil || len(pending) != 0 {
		t.Fatalf("pending offsets after the commit: %v, %v", pending, err)
	}
	f.Close()
	f = open(t, path)
	got, ok, err = f.Txn("tx")
	if err != nil || !ok || got.Version != index || got.State != TxnCompleteCommit || got.Offsets != nil {
		t.Fatalf("after reopen %+v, %v, %v", got, ok, err)
	}
	all, err := f.Txns()
	if err != nil || len(all) != 1 {
		t.Fatalf("Txns: %v, %v", all, err)
	}
}
