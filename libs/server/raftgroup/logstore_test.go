package raftgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/server/raftgroup/raftstore"
)

// legacyDir writes a raft.db as earlier releases did: entries 1..n and the
// stable keys raft keeps (LastVoteTerm never written, as on a member that
// never voted).
func legacyDir(t *testing.T, n int) (string, []*raft.Log) {
	t.Helper()
	dir := t.TempDir()
	st, err := raftstore.Open(raftstore.DefaultConfig(filepath.Join(dir, legacyStore)))
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := 1; i <= n; i++ {
		logs = append(logs, &raft.Log{Index: uint64(i), Term: uint64(1 + i/100), Type: raft.LogCommand,
			Data: bytes.Repeat([]byte{byte(i)}, 1+i%3000), Extensions: []byte(fmt.Sprint(i)), AppendedAt: time.Unix(0, int64(i))})
	}
	if err := st.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := st.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := st.Set([]byte("LastVoteCand"), []byte("member-2")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, logs
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// checkLogs fails unless store holds exactly want, and the stable keys
// legacyDir wrote.
func checkLogs(t *testing.T, store logStore, want []*raft.Log) {
	t.Helper()
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	if first != want[0].Index || last != want[len(want)-1].Index {
		t.Fatalf("log holds %d..%d, want %d..%d", first, last, want[0].Index, want[len(want)-1].Index)
	}
	for _, w := range want {
		var got raft.Log
		if err := store.GetLog(w.Index, &got); err != nil {
			t.Fatalf("entry %d: %v", w.Index, err)
		}
		if got.Term != w.Term || got.Type != w.Type || !bytes.Equal(got.Data, w.Data) || !bytes.Equal(got.Extensions, w.Extensions) ||
			!got.AppendedAt.Equal(w.AppendedAt) {
			t.Fatalf("entry %d: %+v, want %+v", w.Index, got, w)
		}
	}
	if term, err := store.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("CurrentTerm %d, %v", term, err)
	}
	if cand, err := store.Get([]byte("LastVoteCand")); err != nil || string(cand) != "member-2" {
		t.Fatalf("LastVoteCand %q, %v", cand, err)
	}
}

// openAndCheck opens the log store in dir, checks it holds logs, and
// closes it.
func openAndCheck(t *testing.T, dir string, logs []*raft.Log) {
	t.Helper()
	store, err := openLogStore(dir, false, hclog.NewNullLogger(), nil, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	checkLogs(t, store, logs)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestConvertLegacyStore: a data directory written by the bbolt store of
// earlier releases starts under the write-ahead log with every entry and
// stable key; raft.db is kept aside, and later starts do not convert again.
func TestConvertLegacyStore(t *testing.T) {
	dir, logs := legacyDir(t, 3000)
	for range 2 {
		openAndCheck(t, dir, logs)
		if exists(t, filepath.Join(dir, legacyStore)) || !exists(t, filepath.Join(dir, legacyStore+convertedSuffix)) ||
			exists(t, filepath.Join(dir, walDir+".converting")) {
			t.Fatal("after the conversion raft.db should be raft.db.converted, with no work directory left")
		}
	}
}

// TestConvertAfterACrash: a conversion cut short (its work directory left
// behind) is done again from raft.db; one that finished but crashed before
// setting raft.db aside only sets it aside.
func TestConvertAfterACrash(t *testing.T) {
	dir, logs := legacyDir(t, 100)
	junk := filepath.Join(dir, walDir+".converting")
	if err := os.MkdirAll(junk, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(junk, "00000000000000000001-0000000000000001.wal"), []byte("half a segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	openAndCheck(t, dir, logs)
	// Put a raft.db back beside the finished log, as a crash between the
	// two renames leaves it: the log is kept as it is.
	if err := os.Rename(filepath.Join(dir, legacyStore+convertedSuffix), filepath.Join(dir, legacyStore)); err != nil {
		t.Fatal(err)
	}
	openAndCheck(t, dir, logs)
	if exists(t, filepath.Join(dir, legacyStore)) {
		t.Fatal("raft.db was not set aside")
	}
}

// TestUpgradeKeepsTheGroupsState: a member whose raft.db an earlier release
// wrote (a real raft group on the bbolt store, with a snapshot and entries
// after it) restarts under the write-ahead log with the same state.
func TestUpgradeKeepsTheGroupsState(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	// The earlier release: raft on the bbolt store in dir/raft.db.
	old, err := raftstore.Open(raftstore.DefaultConfig(filepath.Join(dir, legacyStore)))
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	addr, trans := raft.NewInmemTransport("")
	rc := raft.DefaultConfig()
	rc.LocalID, rc.Logger = raft.ServerID(cfg.ID), hclog.NewNullLogger()
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	f := newMemFSM()
	r, err := raft.NewRaft(rc, f, old, old, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the earlier release's raft to lead", func() bool { return r.State() == raft.Leader })
	for i := range 50 {
		if err := r.Apply(fmt.Appendf(nil, "k%d=v%d", i, i), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		if i == 20 {
			if err := r.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	// This release: the same member, the same data directory. Its address
	// changes (the earlier one was in memory), which a single voter takes.
	cfg.Bootstrap = false
	cfg.Peers = nil
	mem := newMemFSM()
	n, err := New(cfg, mem, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if !exists(t, filepath.Join(dir, walDir)) || !exists(t, filepath.Join(dir, legacyStore+convertedSuffix)) {
		t.Fatal("the store was not converted")
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	// The configuration names the in-memory address, so this member is
	// told about no one else and replays what it has: the snapshot, then
	// the entries after it.
	testkit.Eventually(t, 10*time.Second, func() error {
		mem.mu.Lock()
		defer mem.mu.Unlock()
		if got := len(mem.kv); got != 50 {
			return fmt.Errorf("the restarted member holds %d keys, want 50", got)
		}
		return nil
	})
	for i := range 50 {
		if v := mem.kv[fmt.Sprintf("k%d", i)]; v != fmt.Sprintf("v%d", i) {
			t.Fatalf("k%d = %q after the upgrade", i, v)
		}
	}
}

// lossyFS is an in-memory VFS that forgets what was not synced when it
// crashes, as a power loss does: each file keeps the content it had at its
// last Sync plus, on a crash, a random prefix of the writes after it (some
// of a page cache may have reached the disk), and a file never synced
// disappears (its directory entry was never synced).
type lossyFS struct {
	mu    sync.Mutex
	rng   *rand.Rand
	files map[string]*lossyFile // by name; guarded by mu
	// dead is set between the crash and revive: the power is off, and
	// whatever the old process still does changes nothing. Guarded by mu.
	dead bool
}

type lossyFile struct {
	fs     *lossyFS
	data   []byte      // what readers see
	synced []byte      // the content at the last Sync, nil if never synced
	writes []lossWrite // writes since the last Sync, in order (data = synced + writes)
}

type lossWrite struct {
	off int64
	p   []byte
}

func newLossyFS(seed uint64) *lossyFS {
	return &lossyFS{rng: rand.New(rand.NewPCG(seed, seed)), files: map[string]*lossyFile{}}
}

func (f *lossyFS) ListDir(string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (f *lossyFS) Create(_, name string, size uint64) (types.WritableFile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[name]; ok {
		return nil, fs.ErrExist
	}
	lf := &lossyFile{fs: f, data: make([]byte, size)}
	if !f.dead {
		f.files[name] = lf
	}
	return lf, nil
}

func (f *lossyFS) Delete(_, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dead {
		delete(f.files, name)
	}
	return nil
}

func (f *lossyFS) OpenReader(_, name string) (types.ReadableFile, error) {
	return f.open(name)
}

func (f *lossyFS) OpenWriter(_, name string) (types.WritableFile, error) {
	return f.open(name)
}

func (f *lossyFS) open(name string) (*lossyFile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lf, ok := f.files[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return lf, nil
}

// crash drops what the files did not sync, but a random prefix of it, and
// ignores every change until revive.
func (f *lossyFS) crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = true
	for name, lf := range f.files {
		if lf.synced == nil {
			delete(f.files, name)
			continue
		}
		kept := f.rng.IntN(len(lf.writes) + 1)
		for _, w := range lf.writes[:kept] {
			lf.synced = applyWrite(lf.synced, w)
		}
		lf.data, lf.writes = slices.Clone(lf.synced), nil
	}
}

// revive turns the power back on.
func (f *lossyFS) revive() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = false
}

// applyWrite writes w into b, growing it as a file grows.
func applyWrite(b []byte, w lossWrite) []byte {
	if end := int(w.off) + len(w.p); end > len(b) {
		b = append(b, make([]byte, end-len(b))...)
	}
	copy(b[w.off:], w.p)
	return b
}

func (lf *lossyFile) WriteAt(p []byte, off int64) (int, error) {
	lf.fs.mu.Lock()
	defer lf.fs.mu.Unlock()
	if lf.fs.dead {
		return len(p), nil
	}
	w := lossWrite{off: off, p: slices.Clone(p)}
	lf.data = applyWrite(lf.data, w)
	lf.writes = append(lf.writes, w)
	return len(p), nil
}

func (lf *lossyFile) ReadAt(p []byte, off int64) (int, error) {
	lf.fs.mu.Lock()
	defer lf.fs.mu.Unlock()
	if off >= int64(len(lf.data)) {
		return 0, io.EOF
	}
	n := copy(p, lf.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (lf *lossyFile) Sync() error {
	lf.fs.mu.Lock()
	defer lf.fs.mu.Unlock()
	if lf.fs.dead {
		return nil
	}
	if lf.synced == nil {
		lf.synced = slices.Clone(lf.data)
	} else {
		for _, w := range lf.writes {
			lf.synced = applyWrite(lf.synced, w)
		}
	}
	lf.writes = nil
	return nil
}

func (lf *lossyFile) Close() error { return nil }

// TestLogSurvivesPowerLoss: entries the log acknowledged (StoreLogs
// returned) are all there after a power loss that drops unsynced writes,
// over many crashes at random points, with truncations of both ends and
// segment rotations in between; the log then appends on from where it is.
func TestLogSurvivesPowerLoss(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			vfs := newLossyFS(seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			dir := t.TempDir() // wal-meta.db, on the real disk, synced
			acked := map[uint64][]byte{}
			var first, next uint64 = 1, 1
			for round := range 8 {
				// Small segments: appends roll them over now and then.
				w, err := openWAL(dir, vfs, 256<<10, hclog.NewNullLogger(), nil)
				if err != nil {
					t.Fatalf("round %d: open after a crash: %v", round, err)
				}
				// Every acknowledged entry is there and nothing after
				// them: an append or a truncation of the tail that
				// returned holds. A head truncation may be undone (raft
				// truncates again after its next snapshot).
				lo, _ := w.FirstIndex()
				hi, _ := w.LastIndex()
				if len(acked) > 0 && (lo > first || hi != next-1) {
					t.Fatalf("round %d: the log holds %d..%d; %d..%d were acknowledged", round, lo, hi, first, next-1)
				}
				for i := first; i < next; i++ {
					var l raft.Log
					if err := w.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, acked[i]) {
						t.Fatalf("round %d: acknowledged entry %d: %v (%d bytes, want %d)", round, i, err, len(l.Data), len(acked[i]))
					}
				}
				if len(acked) == 0 {
					first, next = hi+1, hi+1
				}
				for range 1 + rng.IntN(40) {
					switch op := rng.IntN(20); {
					case op == 0 && next-first > 10:
						// A snapshot: drop the head.
						upto := first + uint64(rng.IntN(int(next-first)/2))
						if err := w.DeleteRange(first, upto); err != nil {
							t.Fatal(err)
						}
						for i := first; i <= upto; i++ {
							delete(acked, i)
						}
						first = upto + 1
					case op == 1 && next-first > 10:
						// A new leader without the tail.
						from := next - uint64(1+rng.IntN(5))
						if err := w.DeleteRange(from, next-1); err != nil {
							t.Fatal(err)
						}
						for i := from; i < next; i++ {
							delete(acked, i)
						}
						next = from
					default:
						var batch []*raft.Log
						for range 1 + rng.IntN(64) {
							// Contents that name their entry, so that one read
							// from the wrong place shows.
							idx := next + uint64(len(batch))
							data := bytes.Repeat(fmt.Appendf(nil, "%d.", idx), 1+rng.IntN(1<<10))
							batch = append(batch, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
						}
						if err := w.StoreLogs(batch); err != nil {
							t.Fatalf("round %d: append: %v", round, err)
						}
						for _, l := range batch {
							acked[l.Index] = l.Data
						}
						next += uint64(len(batch))
					}
				}
				// The log seals a full segment in the append that fills
				// it and rotates to the next in the background, recording
				// both in its meta store, which is on the real disk here
				// and cannot lose writes: a crash while the rotation runs
				// would keep its meta store's half and lose the files'.
				// So the crash comes once no rotation is pending (a
				// deletion past the end waits for it and changes nothing);
				// TestTailSealedByACrashTakesAppends covers a crash
				// between the seal and the rotation.
				if err := w.DeleteRange(next+1<<20, next+1<<20); err != nil {
					t.Fatal(err)
				}
				// The power goes; the old process's last acts (closing)
				// reach no disk.
				vfs.crash()
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				vfs.revive()
			}
		})
	}
}

// BenchmarkLogAppend compares the write-ahead log with the bbolt store of
// earlier releases: appends of 1 and 16 entries of 256 bytes, each append
// durable (one fdatasync for the log, a bbolt commit for the other) before
// the next, as raft's leader loop does.
func BenchmarkLogAppend(b *testing.B) {
	open := map[string]func(dir string) (logStore, error){
		"wal": func(dir string) (logStore, error) {
			return openLogStore(dir, false, hclog.NewNullLogger(), nil, discardLogger())
		},
		"bbolt": func(dir string) (logStore, error) {
			return raftstore.Open(raftstore.DefaultConfig(filepath.Join(dir, legacyStore)))
		},
	}
	for _, store := range []string{"bbolt", "wal"} {
		for _, per := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/%d-per-append", store, per), func(b *testing.B) {
				s, err := open[store](b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				data := bytes.Repeat([]byte("x"), 256)
				batch := make([]*raft.Log, per)
				next := uint64(1)
				b.SetBytes(int64(per * len(data)))
				b.ResetTimer()
				for range b.N {
					for i := range batch {
						batch[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data}
						next++
					}
					if err := s.StoreLogs(batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

// TestTailSealedByACrashTakesAppends: the append that fills a segment
// seals it in its file, and the log records the seal in its meta store
// only when it rotates, in the background. After a crash between the two,
// the meta store names the sealed file as the unsealed tail: the
// write-ahead log recovers it as sealed and refuses every append ("segment
// is sealed"), so the member could take no entry again; the same when the
// crash tore the sealing append (its index frame written, its commit not).
// The log store repairs such a tail when it opens (tailRepairFS): every
// acknowledged entry is there, and appends go on.
func TestTailSealedByACrashTakesAppends(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(map[bool]string{false: "sealed", true: "torn"}[torn], func(t *testing.T) { testSealedTail(t, torn) })
	}
}

func testSealedTail(t *testing.T, torn bool) {
	dir := t.TempDir()
	vfs := newLossyFS(1)
	w, err := openWAL(dir, vfs, 64<<10, hclog.NewNullLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	segments := func() []types.SegmentInfo {
		t.Helper()
		st, err := w.meta.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return st.Segments
	}
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat(fmt.Appendf(nil, "%d.", i), 100)}
	}
	next := uint64(1)
	for len(segments()) < 2 { // until an append sealed the first segment and the log rotated
		if err := w.StoreLogs([]*raft.Log{entry(next), entry(next + 1)}); err != nil {
			t.Fatal(err)
		}
		next += 2
		if err := w.DeleteRange(next+1<<20, next+1<<20); err != nil { // waits for the rotation
			t.Fatal(err)
		}
	}
	sealed := segments()[0]
	if sealed.SealTime.IsZero() || segments()[1].BaseIndex != next {
		t.Fatalf("segments after the rotation: %+v", segments())
	}
	// The crash came before the rotation: the meta store still names the
	// first segment as the unsealed tail, and the next file never was.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	unsealed := sealed
	unsealed.SealTime, unsealed.IndexStart, unsealed.MaxIndex = time.Time{}, 0, 0
	meta := &metadb.BoltMetaDB{}
	if _, err := meta.Load(dir); err != nil {
		t.Fatal(err)
	}
	if err := meta.CommitState(types.PersistentState{NextSegmentID: unsealed.ID + 1, Segments: []types.SegmentInfo{unsealed}}); err != nil {
		t.Fatal(err)
	}
	if err := meta.Close(); err != nil {
		t.Fatal(err)
	}
	var tail *lossyFile
	vfs.mu.Lock()
	for name, f := range vfs.files {
		if strings.HasPrefix(name, fmt.Sprintf("%020d-%016x", sealed.BaseIndex, sealed.ID)) {
			tail = f
		} else {
			delete(vfs.files, name)
		}
	}
	vfs.mu.Unlock()
	if torn { // the sealing append's commit frame never reached the disk
		frames, err := segFrames(tail)
		if err != nil || len(frames) < 2 || frames[len(frames)-1].typ != segFrameCommit || frames[len(frames)-2].typ != segFrameIndex {
			t.Fatalf("the sealed segment ends with %+v (%v), not an index and a commit frame", frames[max(0, len(frames)-2):], err)
		}
		last := frames[len(frames)-1]
		vfs.mu.Lock()
		clear(tail.data[last.off : last.off+last.size])
		tail.synced = slices.Clone(tail.data)
		vfs.mu.Unlock()
	}
	if torn {
		next -= 2 // the sealing append held two entries, never acknowledged
	}

	w, err = openWAL(dir, vfs, 64<<10, hclog.NewNullLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if last, _ := w.LastIndex(); last != next-1 {
		t.Fatalf("after the crash the log ends at %d, want %d", last, next-1)
	}
	for i := uint64(1); i < next; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entry(i).Data) {
			t.Fatalf("acknowledged entry %d: %v", i, err)
		}
	}
	for range 200 { // past the next seal and rotation too
		if err := w.StoreLogs([]*raft.Log{entry(next)}); err != nil {
			t.Fatalf("append of %d after the crash: %v", next, err)
		}
		next++
	}
	var l raft.Log
	if err := w.GetLog(next-1, &l); err != nil || !bytes.Equal(l.Data, entry(next-1).Data) {
		t.Fatalf("entry %d after the crash: %v", next-1, err)
	}
}
