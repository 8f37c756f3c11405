package fsm

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// TestOffsetsLog: committed offsets and group states get change-log
// positions from their entry's index and place in it (a batch's commands
// share the index), a partition holds only its groups, a newer commit
// replaces the older one's record, paging by from and limit works, the end
// follows the applied index, and a commit stored without a position (an
// earlier release's) comes first, at position 0.
func TestOffsetsLog(t *testing.T) {
	f := open(t, filepath.Join(t.TempDir(), "state.db"))
	var same, other string // two groups in the partition of "watched", one elsewhere
	p := groups.OffsetsLogPartition("watched")
	for i := 0; same == "" || other == ""; i++ {
		name := fmt.Sprint("g", i)
		if groups.OffsetsLogPartition(name) == p {
			same = name
		} else {
			other = name
		}
	}
	two := Command{Type: TypeCommit, Commit: &Commit{Group: "watched", TimeMs: 5, Offsets: []groups.Offset{{Topic: "t", Partition: 0, Offset: 10}, {Topic: "t", Partition: 1, Offset: 20}}}}
	apply(t, f, entry(t, 1, two), entry(t, 2, commit(other, "", 0, "t", 0, 7)))
	var batch []json.RawMessage
	for _, c := range []Command{
		commit("watched", "", 0, "t", 0, 11),
		{Type: TypePutGroup, PutGroup: &PutGroup{Group: &Group{Name: "watched", Members: map[string]*Member{"m": {ID: "m", Topics: []string{"t"}, Assigned: []groups.TP{{Topic: "t", Partition: 0}}}}}}},
	} {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, b)
	}
	for _, r := range apply(t, f, entry(t, 3, Command{Type: TypeBatch, Batch: batch})) {
		for _, sub := range r.Batch {
			if sub.Err != nil {
				t.Fatal(sub.Err)
			}
		}
	}
	pos := func(index uint64, seq int64) int64 { return int64(index)<<groups.OffsetsLogIndexShift | seq }
	page, err := f.OffsetsLog(p, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		pos    int64
		offset int64 // -1: the group state
	}
	check := func(page *groups.OffsetsLogPage, ws ...want) {
		t.Helper()
		if len(page.Records) != len(ws) || page.End != pos(4, 0) {
			t.Fatalf("page %+v, want %d records ending at %d", page, len(ws), pos(4, 0))
		}
		for i, w := range ws {
			r := page.Records[i]
			switch {
			case r.Position != w.pos:
				t.Fatalf("record %d at %d, want %d: %+v", i, r.Position, w.pos, r)
			case w.offset < 0 && (r.State == nil || len(r.State.Members) != 1 || r.State.Members[0].MemberID != "m"):
				t.Fatalf("record %d: %+v, want the group's state", i, r)
			case w.offset >= 0 && (r.Offset == nil || r.Offset.Offset != w.offset):
				t.Fatalf("record %d: %+v, want offset %d", i, r, w.offset)
			}
		}
	}
	check(page, want{pos(1, 2), 20}, want{pos(3, 1), 11}, want{pos(3, 2), -1})
	page, _ = f.OffsetsLog(p, pos(3, 2), 0)
	check(page, want{pos(3, 2), -1})
	page, _ = f.OffsetsLog(p, 0, 1)
	check(page, want{pos(1, 2), 20})
	page, _ = f.OffsetsLog(groups.OffsetsLogPartition(other), 0, 0)
	if len(page.Records) != 1 || page.Records[0].Group != other || page.Records[0].Position != pos(2, 1) {
		t.Fatalf("the other group's partition: %+v", page)
	}

	// A commit of an earlier release, without a position.
	err = f.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(bucketOffsets).CreateBucketIfNotExists([]byte(same))
		if err != nil {
			return err
		}
		v, _ := json.Marshal(groups.Committed{Topic: "t", Partition: 0, Offset: 3})
		return b.Put(partkey.Bytes("t", 0), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = f.OffsetsLog(p, 0, 0)
	if len(page.Records) != 4 || page.Records[0].Group != same || page.Records[0].Position != 0 {
		t.Fatalf("with an earlier release's commit: %+v", page)
	}
}
