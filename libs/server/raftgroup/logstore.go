package raftgroup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/metrics"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/sluicemq/sluice/libs/server/durable"
	"github.com/sluicemq/sluice/libs/server/raftgroup/raftstore"
)

// The log store's files in the data directory.
const (
	// walDir holds the write-ahead log: segment files and wal-meta.db, the
	// small bbolt file of the segment list and the stable store.
	walDir = "wal"
	// legacyStore is the bbolt log and stable store of earlier releases,
	// converted into walDir on the first start that finds it and then kept
	// as legacyStore+convertedSuffix (a downgrade's way back; delete it once
	// the new release is trusted).
	legacyStore     = "raft.db"
	convertedSuffix = ".converted"
	// walSegmentSize is the size of a segment file (preallocated). Snapshots
	// truncate the log every SnapshotThreshold entries, so a few segments
	// hold all of it.
	walSegmentSize = 16 << 20
)

// logStore is what raft needs of the log and stable store, and Close.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// openLogStore opens the member's Raft log and stable store in dir/wal,
// first converting a raft.db of an earlier release found in dir. The log is
// a write-ahead log of segment files (hashicorp/raft-wal): each StoreLogs is
// one append and one fdatasync, however many entries raft hands it, and
// truncation drops whole segment files or rewinds the tail one, never
// rewriting a tree. noSync (tests only) skips every fsync of the segments.
func openLogStore(dir string, noSync bool, hlog hclog.Logger, m metrics.Collector, log *slog.Logger) (logStore, error) {
	if err := convertLegacyStore(dir, hlog, log); err != nil {
		return nil, err
	}
	var vfs types.VFS = walfs.New()
	if noSync {
		vfs = noSyncFS{vfs}
	}
	return openWAL(filepath.Join(dir, walDir), vfs, walSegmentSize, hlog, m)
}

// walStore is the write-ahead log with the meta store it keeps its segment
// list and the stable store in, which Close closes too (the log's own Close
// leaves it open, and its file lock with it).
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

func (w *walStore) Close() error {
	return errors.Join(w.WAL.Close(), w.meta.Close())
}

// openWAL opens (creating) a write-ahead log in dir whose segment files of
// segmentSize bytes go through vfs.
func openWAL(dir string, vfs types.VFS, segmentSize int, hlog hclog.Logger, m metrics.Collector) (*walStore, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	if m == nil {
		m = &metrics.NoOpCollector{}
	}
	meta := &metadb.BoltMetaDB{}
	vfs = tailRepairFS{vfs} // a tail left sealed by a crash (walrepair.go)
	w, err := wal.Open(dir, wal.WithSegmentFiler(segment.NewFiler(dir, vfs)), wal.WithSegmentSize(segmentSize),
		wal.WithMetaStore(meta), wal.WithLogger(hlog.Named("wal")), wal.WithMetricsCollector(m))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("raft log %s: %w", dir, err), meta.Close())
	}
	return &walStore{WAL: w, meta: meta}, nil
}

// convertLegacyStore copies the log entries and the stable keys of
// dir/raft.db into a new write-ahead log, which takes the place of dir/wal
// by a rename once complete (a crash midway leaves raft.db in charge and
// the next start converts again), then renames raft.db to raft.db.converted.
func convertLegacyStore(dir string, hlog hclog.Logger, log *slog.Logger) error {
	legacy := filepath.Join(dir, legacyStore)
	if _, err := os.Stat(legacy); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	target := filepath.Join(dir, walDir)
	if _, err := os.Stat(target); err == nil {
		// Converted; the crash came before raft.db was set aside.
		return retireLegacyStore(dir)
	}
	tmp := target + ".converting"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("raft log conversion: %w", err)
	}
	src, err := raftstore.Open(raftstore.DefaultConfig(legacy))
	if err != nil {
		return fmt.Errorf("raft log conversion: %w", err)
	}
	defer src.Close()
	dst, err := openWAL(tmp, walfs.New(), walSegmentSize, hlog, nil)
	if err != nil {
		return fmt.Errorf("raft log conversion: %w", err)
	}
	entries, err := copyLogStore(dst, src)
	if err == nil {
		err = copyStableStore(dst, src)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raft log conversion of %s (it is left as it was; start again to retry): %w", legacy, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("raft log conversion: %w", err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("raft log conversion: %w", err)
	}
	log.Info("raft log converted to the write-ahead log", "from", legacy, "to", target, "entries", entries,
		"kept", legacy+convertedSuffix)
	return retireLegacyStore(dir)
}

// retireLegacyStore renames a converted raft.db out of the way.
func retireLegacyStore(dir string) error {
	legacy := filepath.Join(dir, legacyStore)
	if err := os.Rename(legacy, legacy+convertedSuffix); err != nil {
		return fmt.Errorf("raft log conversion: %w", err)
	}
	return durable.SyncDir(dir)
}

// copyBatchBytes bounds the entry bytes of one append while converting.
const copyBatchBytes = 1 << 20

// copyLogStore appends every entry of src to the empty dst, in batches, and
// returns how many there were.
func copyLogStore(dst, src raft.LogStore) (uint64, error) {
	first, err := src.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := src.LastIndex()
	if err != nil {
		return 0, err
	}
	if last == 0 {
		return 0, nil
	}
	var batch []*raft.Log
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := dst.StoreLogs(batch)
		batch, size = batch[:0], 0
		return err
	}
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := src.GetLog(i, l); err != nil {
			return 0, fmt.Errorf("entry %d: %w", i, err)
		}
		batch = append(batch, l)
		if size += len(l.Data) + len(l.Extensions); size >= copyBatchBytes {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	return last - first + 1, flush()
}

// The stable store's keys, as hashicorp/raft writes them.
var (
	stableUint64Keys = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm")}
	stableBytesKeys  = [][]byte{[]byte("LastVoteCand")}
)

// copyStableStore copies the keys raft keeps in its stable store; a key
// src never had is left out, as raft reads a missing key as zero.
func copyStableStore(dst, src raft.StableStore) error {
	for _, k := range stableUint64Keys {
		v, err := src.GetUint64(k)
		if errors.Is(err, raftstore.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stable key %s: %w", k, err)
		}
		if err := dst.SetUint64(k, v); err != nil {
			return fmt.Errorf("stable key %s: %w", k, err)
		}
	}
	for _, k := range stableBytesKeys {
		v, err := src.Get(k)
		if errors.Is(err, raftstore.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stable key %s: %w", k, err)
		}
		if err := dst.Set(k, v); err != nil {
			return fmt.Errorf("stable key %s: %w", k, err)
		}
	}
	return nil
}

// noSyncFS is a VFS whose files never sync: tests only (Config.NoSync).
type noSyncFS struct{ types.VFS }

func (f noSyncFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	w, err := f.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return noSyncFile{w}, nil
}

func (f noSyncFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	w, err := f.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{w}, nil
}

type noSyncFile struct{ types.WritableFile }

func (noSyncFile) Sync() error { return nil }

// ReadLog calls fn with each entry of the Raft log in dataDir, a stopped
// member's, from index from (at least the log's first) to its last, in
// order, and returns the log's first and last index (0, 0 when empty). It
// is for offline checks of a member's state against its log.
func ReadLog(dataDir string, from uint64, fn func(*raft.Log) error) (first, last uint64, err error) {
	hlog := hclog.NewNullLogger()
	store, err := openLogStore(dataDir, true, hlog, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		return 0, 0, err
	}
	defer store.Close()
	if first, err = store.FirstIndex(); err != nil {
		return 0, 0, err
	}
	if last, err = store.LastIndex(); err != nil || last == 0 {
		return first, last, err
	}
	for i := max(from, first); i <= last; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			return first, last, fmt.Errorf("raft log entry %d: %w", i, err)
		}
		if err := fn(&l); err != nil {
			return first, last, err
		}
	}
	return first, last, nil
}
