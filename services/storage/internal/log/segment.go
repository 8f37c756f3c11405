package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// File name suffixes in a partition directory.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	tmpSuffix       = ".tmp"
	deletedSuffix   = ".deleted"
)

func segmentFile(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// segment is one .log file and its indexes.
type segment struct {
	base int64
	dir  string
	fs   FileSystem // the log's: every change to the segment's files
	log  *os.File   // closed when refs reaches zero

	// refs: the Log holds one while the segment is listed; every Slice, flush
	// pass and look-up in flight holds another. The files close at zero, so a
	// deleted segment stays readable until the last Slice is released.
	refs atomic.Int32

	// Guarded by Log.mu, and written only with Log.appendMu also held, so the
	// appender (and TruncateTo) may read them holding appendMu alone.
	size  int64        // bytes of whole batches; readers never look past it
	next  int64        // offset after the last batch; the log end offset for the active segment
	index []indexEntry // append-only; see index.go
	times []timeEntry  // append-only
	modMs int64        // wall-clock ms of the last append (file mtime after Open)

	// verified is the file position below which every batch passed its
	// checks (length, magic, CRC-32C) in this process: during recovery, when
	// appended, or when first read or scrubbed. Reads check the bytes past
	// it before serving them, so nothing corrupt leaves the node.
	verified atomic.Int64

	// Guarded by Log.appendMu.
	firstAppend time.Time // zero until the segment's first append (roll by age)

	// idxMu guards the fields below. It is held across the fsync of a rolled
	// segment's index files, which the appender never touches.
	idxMu     sync.Mutex
	idxFile   *os.File // open while active, or rolled and not yet synced
	timeFile  *os.File
	writable  bool // active: the index files must stay open
	idxSynced bool // index files synced since their last write
}

// createSegment creates the files of a new, empty active segment.
func createSegment(fsys FileSystem, dir string, base int64) (*segment, error) {
	f, err := fsys.OpenFile(segmentFile(dir, base, logSuffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	s := &segment{base: base, dir: dir, fs: fsys, log: f, next: base, writable: true}
	s.refs.Store(1)
	if err := s.openIndexFilesLocked(0, 0); err != nil {
		_ = f.Close()
		_ = s.removeFiles()
		return nil, err
	}
	return s, nil
}

// openSegment opens an existing .log file; the caller recovers or checks it.
func openSegment(fsys FileSystem, dir string, base int64) (*segment, error) {
	f, err := fsys.OpenFile(segmentFile(dir, base, logSuffix), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat segment: %w", err)
	}
	s := &segment{base: base, dir: dir, fs: fsys, log: f, size: st.Size(), next: base, modMs: st.ModTime().UnixMilli()}
	s.refs.Store(1)
	return s, nil
}

func (s *segment) path(suffix string) string { return segmentFile(s.dir, s.base, suffix) }

func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference and closes the files with the last one.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.log.Close()
		s.idxMu.Lock()
		s.closeIndexFilesLocked()
		s.idxMu.Unlock()
	}
}

// largestTimestamp is retention's age of the segment: its largest batch
// timestamp, or the time of its last write when batches carry none (-1).
// Log.mu must be held.
func (s *segment) largestTimestamp() int64 {
	if n := len(s.times); n > 0 && s.times[n-1].ts >= 0 {
		return s.times[n-1].ts
	}
	return s.modMs
}

// removeFiles unlinks the segment's files; open descriptors stay usable.
func (s *segment) removeFiles() error {
	var errs []error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := s.fs.Remove(s.path(suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// openIndexFilesLocked opens (creating) the index files for appending and cuts
// them to idxLen and timeLen bytes. idxMu must be held, or the segment unshared.
func (s *segment) openIndexFilesLocked(idxLen, timeLen int64) error {
	var err error
	if s.idxFile == nil {
		if s.idxFile, err = s.fs.OpenFile(s.path(indexSuffix), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			return fmt.Errorf("open index: %w", err)
		}
	}
	if s.timeFile == nil {
		if s.timeFile, err = s.fs.OpenFile(s.path(timeIndexSuffix), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			return fmt.Errorf("open time index: %w", err)
		}
	}
	if err := s.fs.Truncate(s.idxFile, idxLen); err != nil {
		return fmt.Errorf("truncate index: %w", err)
	}
	if err := s.fs.Truncate(s.timeFile, timeLen); err != nil {
		return fmt.Errorf("truncate time index: %w", err)
	}
	s.writable, s.idxSynced = true, false
	return nil
}

func (s *segment) closeIndexFilesLocked() {
	if s.idxFile != nil {
		_ = s.idxFile.Close()
		s.idxFile = nil
	}
	if s.timeFile != nil {
		_ = s.timeFile.Close()
		s.timeFile = nil
	}
}

// reopenForAppend makes a (possibly rolled) segment active again after
// TruncateTo cut its indexes to nIdx and nTimes entries. The caller holds
// Log.appendMu.
func (s *segment) reopenForAppend(nIdx, nTimes int) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	return s.openIndexFilesLocked(int64(nIdx)*indexEntrySize, int64(nTimes)*timeEntrySize)
}

// retire marks a rolled segment: its index files close after their final sync.
func (s *segment) retire() {
	s.idxMu.Lock()
	s.writable = false
	s.idxMu.Unlock()
}

// writeIndexEntries writes new entries through to the index files (page cache
// only). nIdx and nTimes are the entry counts already in the files.
func (s *segment) writeIndexEntries(idxBytes, timeBytes []byte, nIdx, nTimes int) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.idxFile == nil || s.timeFile == nil {
		return errors.New("index files are closed")
	}
	if len(idxBytes) > 0 {
		if _, err := s.fs.WriteAt(s.idxFile, idxBytes, int64(nIdx)*indexEntrySize); err != nil {
			return fmt.Errorf("write index: %w", err)
		}
		s.idxSynced = false
	}
	if len(timeBytes) > 0 {
		if _, err := s.fs.WriteAt(s.timeFile, timeBytes, int64(nTimes)*timeEntrySize); err != nil {
			return fmt.Errorf("write time index: %w", err)
		}
		s.idxSynced = false
	}
	return nil
}

// syncIndexes fsyncs the index files if they changed, and closes them when
// the segment is no longer active. It returns the number of fsyncs done.
func (s *segment) syncIndexes() (int, error) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	n := 0
	if !s.idxSynced {
		for _, f := range []*os.File{s.idxFile, s.timeFile} {
			if f == nil {
				continue
			}
			n++
			if err := s.fs.Sync(f); err != nil {
				return n, fmt.Errorf("fsync %s: %w", filepath.Base(f.Name()), err)
			}
		}
		s.idxSynced = true
	}
	if !s.writable {
		s.closeIndexFilesLocked()
	}
	return n, nil
}
