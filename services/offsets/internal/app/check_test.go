package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/sluicemq/sluice/libs/server/raftgroup"
)

// TestCheckStateComparesTheFileWithItsLog: check-state rebuilds a stopped
// replica's state from its whole log (which still holds its first entry,
// though a snapshot was taken), up to the file's applied index, and finds
// it equal; a file with an entry's
// effect changed (as a command applied twice, or one lost, would leave it)
// differs, with the differing record named; a file that claims entries the
// log does not hold cannot be checked.
func TestCheckStateComparesTheFileWithItsLog(t *testing.T) {
	dir := t.TempDir()
	runReplica(t, dir, []int64{10, 20, 30, 40, 50, 60}, 4).Close()
	var out, errOut bytes.Buffer
	if code := CheckState([]string{"-data-dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("check-state = %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "matches its Raft log") || !strings.Contains(out.String(), "no snapshot, 8 log entries replayed") {
		t.Fatalf("check-state said %q", out.String())
	}

	// t-1's committed offset is 60 in the log; make the file say 61.
	statePath := filepath.Join(dir, "state.db")
	db, err := bolt.Open(statePath, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("offsets")).Bucket([]byte("g"))
		var key, val []byte
		b.ForEach(func(k, v []byte) error {
			if bytes.Contains(v, []byte(`60`)) {
				key, val = bytes.Clone(k), bytes.Replace(v, []byte(`60`), []byte(`61`), 1)
			}
			return nil
		})
		return b.Put(key, val)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := CheckState([]string{"-data-dir", dir}, &out, &errOut); code != 1 || !strings.Contains(out.String(), "61") || !strings.Contains(out.String(), "60") {
		t.Fatalf("check-state of a changed file = %d: %s", code, out.String())
	}

	// A log that lost its last entries (the file applied what the log
	// no longer holds).
	dir2 := t.TempDir()
	runReplica(t, dir2, []int64{1, 2, 3}, 0).Close()
	_, last, err := raftgroup.ReadLog(dir2, 1, func(*raft.Log) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir2, "wal")); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := CheckState([]string{"-data-dir", dir2}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "not in the log") {
		t.Fatalf("check-state with the log gone (it held up to %d) = %d: %s", last, code, errOut.String())
	}
}
