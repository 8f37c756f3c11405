package fsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/durable"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// Bucket and key names in the bbolt file.
var (
	bucketMeta    = []byte("meta")
	bucketGroups  = []byte("groups")
	bucketOffsets = []byte("offsets") // one sub-bucket per group
	keyApplied    = []byte("applied")
)

// ErrBroken is returned for commands arriving after a write to the bbolt
// file failed: the member stops applying until it is restarted, which replays
// the entries from the last applied index.
var ErrBroken = errors.New("offsets state: a write to the state file failed; restart this replica")

// FSM is the offsets state machine. It is safe for concurrent use: raft calls
// ApplyBatch, Snapshot and Restore; the coordinator and the API read.
type FSM struct {
	path string
	log  *slog.Logger

	mu     sync.RWMutex               // guards db (replaced by Restore), groups, shares, txns and broken
	db     *bolt.DB                   //
	groups map[string]*Group          // membership state by group, as stored
	shares map[string]*sharefsm.Group // share groups' state, as stored
	txns   map[string]*Txn            // transactional ids' state, as stored
	broken error                      // set when a write failed
}

// stage holds the states a batch of entries changed, applied to the FSM's
// maps once the batch's transaction committed; a nil value deletes.
type stage struct {
	groups map[string]*Group
	txns   map[string]*Txn
	// shares stages the share groups' changes (package sharefsm).
	shares *sharefsm.Stage
	// at and seq give the records of the groups' change log their
	// positions: seq counts the records of entry at.
	at  uint64
	seq int64
}

// position returns the next change-log position of entry index.
func (st *stage) position(index uint64) int64 {
	if st.at != index {
		st.at, st.seq = index, 0
	}
	st.seq++
	return int64(index)<<groups.OffsetsLogIndexShift | min(st.seq, 1<<groups.OffsetsLogIndexShift-1)
}

// Open opens (creating) the state file at path.
func Open(path string, log *slog.Logger) (*FSM, error) {
	f := &FSM{path: path, log: log}
	if err := f.open(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) open() error {
	// Leftovers of a crash during Snapshot or Restore.
	if old, _ := filepath.Glob(filepath.Join(filepath.Dir(f.path), snapshotPattern)); len(old) > 0 {
		for _, o := range old {
			os.Remove(o)
		}
	}
	os.Remove(f.path + ".restore")
	// Unsynced commits only where a machine crash can be told apart from a
	// process crash (durability.go); the sidecar says so before the first.
	boot := bootID()
	why, err := setAsideIfUntrusted(f.path, boot)
	if err != nil {
		return err
	}
	if why != "" {
		f.log.Warn("offsets state file set aside; raft rebuilds the state from its snapshot and log",
			"file", f.path+untrustedSuffix, "why", why)
	}
	if boot != "" {
		if err := writeSidecar(f.path, boot, sidecarOpen); err != nil {
			return fmt.Errorf("offsets state %s: %w", f.path, err)
		}
	}
	db, err := bolt.Open(f.path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: boot != ""})
	if err != nil {
		return fmt.Errorf("open offsets state %s: %w", f.path, err)
	}
	loaded := map[string]*Group{}
	var loadedShares map[string]*sharefsm.Group
	var loadedTxns map[string]*Txn
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketGroups, bucketOffsets, bucketTxns} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		var err error
		if loadedShares, err = sharefsm.Load(tx); err != nil {
			return err
		}
		if loadedTxns, err = loadTxns(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketGroups).ForEach(func(k, v []byte) error {
			var g Group
			if err := json.Unmarshal(v, &g); err != nil {
				return fmt.Errorf("group %q: corrupt state record: %w", k, err)
			}
			loaded[string(k)] = &g
			return nil
		})
	})
	if err != nil {
		db.Close()
		return fmt.Errorf("offsets state %s: %w", f.path, err)
	}
	f.db, f.groups, f.shares, f.txns = db, loaded, loadedShares, loadedTxns
	return nil
}

// Close syncs and closes the state file and records that it was closed
// cleanly (durability.go).
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.db.Sync()
	if cerr := f.db.Close(); err == nil {
		err = cerr
	}
	if boot := bootID(); err == nil && boot != "" && f.broken == nil {
		err = writeSidecar(f.path, boot, sidecarClosed)
	}
	return err
}

// AppliedIndex returns the Raft index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var idx uint64
	_ = f.db.View(func(tx *bolt.Tx) error { idx = readApplied(tx); return nil })
	return idx
}

func readApplied(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keyApplied)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// Apply applies one entry (raft uses ApplyBatch; this is for completeness).
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in one bbolt transaction, which
// stores the last applied index with them; it is not synced (the Raft log
// is the record, see durability.go). Entries at or below the stored applied
// index were applied before a restart and are skipped, so the file is the
// state and raft need not restore a snapshot on start. Each command's
// answer is a *Result.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken != nil {
		for i, l := range logs {
			out[i] = &Result{Index: l.Index, Err: protocol.StorageError.Err("%v", ErrBroken)}
		}
		return out
	}
	st := &stage{groups: map[string]*Group{}, txns: map[string]*Txn{}}
	st.shares = sharefsm.NewStage(f.shares, func(name string) bool { return f.groupLocked(st.groups, name) != nil })
	err := f.db.Update(func(tx *bolt.Tx) error {
		applied := readApplied(tx)
		last := applied
		for i, l := range logs {
			if l.Index <= applied {
				out[i] = &Result{Index: l.Index}
				continue
			}
			last = l.Index
			if l.Type != raft.LogCommand {
				continue
			}
			cmd, err := DecodeCommand(l.Data)
			if err != nil {
				out[i] = &Result{Index: l.Index, Err: protocol.InvalidRequest.Err("%v", err)}
				continue
			}
			res, err := f.applyTx(tx, st, l.Index, cmd)
			if err != nil {
				return err
			}
			out[i] = res
		}
		if err := st.shares.Flush(tx); err != nil {
			return err
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], last)
		return tx.Bucket(bucketMeta).Put(keyApplied, b[:])
	})
	if err != nil {
		f.broken = err
		f.log.Error("applying offsets commands failed; this replica stops applying until restarted", "err", err)
		for i, l := range logs {
			out[i] = &Result{Index: l.Index, Err: protocol.StorageError.Err("%v: %v", ErrBroken, err)}
		}
		return out
	}
	for name, g := range st.groups {
		if g == nil {
			delete(f.groups, name)
		} else {
			f.groups[name] = g
		}
	}
	st.shares.Commit()
	maps.Copy(f.txns, st.txns)
	return out
}

// groupLocked returns a group's state as of the transaction in progress.
func (f *FSM) groupLocked(staged map[string]*Group, name string) *Group {
	if g, ok := staged[name]; ok {
		return g
	}
	return f.groups[name]
}

// Ready reports a failed state write.
func (f *FSM) Ready() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.broken
}

// Group returns a copy of a group's membership state.
func (f *FSM) Group(name string) (*Group, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g, ok := f.groups[name]
	if !ok {
		return nil, false
	}
	return g.Clone(), true
}

// GroupsWithMembers returns copies of every group that has members.
func (f *FSM) GroupsWithMembers() []*Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Group
	for _, g := range f.groups {
		if len(g.Members) > 0 {
			out = append(out, g.Clone())
		}
	}
	return out
}

// GroupNames lists every group with membership state or committed offsets.
func (f *FSM) GroupNames() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	seen := map[string]bool{}
	for name := range f.groups {
		seen[name] = true
	}
	_ = f.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOffsets).ForEachBucket(func(k []byte) error {
			seen[string(k)] = true
			return nil
		})
	})
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Offsets returns a group's committed offsets of one topic or ("") all,
// ordered by topic and partition.
func (f *FSM) Offsets(group, topic string) ([]groups.Committed, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []groups.Committed{}
	err := f.db.View(func(tx *bolt.Tx) error {
		return forEachCommitted(tx, group, func(k []byte, c groups.Committed) {
			if t, _, ok := partkey.Parse(k); ok && (topic == "" || t == topic) {
				out = append(out, c)
			}
		})
	})
	sort.Slice(out, func(i, j int) bool {
		return groups.TP{Topic: out[i].Topic, Partition: out[i].Partition}.Less(groups.TP{Topic: out[j].Topic, Partition: out[j].Partition})
	})
	return out, err
}

// IdleSince returns when a group without members was last active, in Unix
// milliseconds: the later of when it lost its last member and its newest
// commit. It returns 0 for a group with members, and for one whose activity
// is unknown (a state written before EmptySinceMs was recorded, and no
// commit).
func (f *FSM) IdleSince(name string) (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var ms int64
	err := f.db.View(func(tx *bolt.Tx) error {
		var err error
		ms, err = idleSinceTx(tx, f.groups[name], name)
		return err
	})
	return ms, err
}

// forEachCommitted calls fn with each committed offset of group (none when
// it has no offsets), with its key.
func forEachCommitted(tx *bolt.Tx, group string, fn func(k []byte, c groups.Committed)) error {
	b := tx.Bucket(bucketOffsets).Bucket([]byte(group))
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		var c groups.Committed
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("group %s: corrupt offset record: %w", group, err)
		}
		fn(k, c)
		return nil
	})
}

// Snapshot copies the state file into a temporary file that Persist streams
// and Release removes, so no bbolt transaction stays open while raft writes
// the snapshot (Restore closes the file, which waits for open transactions).
// It refuses while the state is broken: a snapshot must hold every entry up
// to the index raft labels it with.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.broken != nil {
		return nil, f.broken
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), snapshotPattern)
	if err != nil {
		return nil, fmt.Errorf("offsets snapshot: %w", err)
	}
	err = f.db.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(tmp); return err })
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("offsets snapshot: %w", err)
	}
	return &snapshot{file: tmp}, nil
}

// snapshotPattern names the temporary copies Snapshot makes.
const snapshotPattern = "snapshot-*.db.tmp"

type snapshot struct{ file *os.File }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := io.Copy(sink, s.file); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("offsets snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {
	s.file.Close()
	os.Remove(s.file.Name())
}

// Restore replaces the state with a snapshot's bbolt file.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := f.path + ".restore"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("offsets restore: %w", err)
	}
	_, err = io.Copy(out, rc)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("offsets restore: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.db.Close(); err != nil {
		f.broken = fmt.Errorf("offsets restore: closing the state file: %w", err)
		return f.broken
	}
	if err := os.Rename(tmp, f.path); err != nil {
		f.broken = fmt.Errorf("offsets restore: %w", err)
		return f.broken
	}
	if err := durable.SyncDir(filepath.Dir(f.path)); err != nil {
		f.broken = fmt.Errorf("offsets restore: %w", err)
		return f.broken
	}
	if err := f.open(); err != nil {
		f.broken = err
		return err
	}
	f.broken = nil
	return nil
}
