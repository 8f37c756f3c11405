package log

import "os"

// FileSystem is the seam through which a log changes its files: every file
// it creates, writes, fsyncs, truncates, renames or removes inside its
// directory goes through one of these calls. Reads do not: they use the
// *os.File directly (positioned reads, and sendfile needs the real
// descriptor), and so do Open's creation of the directory and Delete's
// removal of it.
//
// Config.FS nil is the operating system, which is what every log uses in
// production. Tests put a faultfs.FS there to make a chosen call fail and
// check the fail-stop contract (package doc, "Durability").
//
// Each method behaves as the os function or *os.File method of the same
// name, and the log relies on nothing more: a nil error from Sync means what
// it means from (*os.File).Sync. The appender, the flusher and the checkpoint
// writers call them from their own goroutines, with the log's locks held as
// the call sites say, so implementations must be safe for concurrent use. The
// append path makes one WriteAt call per file it writes; an implementation
// must not allocate there.
type FileSystem interface {
	// OpenFile opens or creates a file, as os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
	// WriteAt writes b at off, as f.WriteAt: the bytes are in the page
	// cache when it returns nil, not yet on disk.
	WriteAt(f *os.File, b []byte, off int64) (int, error)
	// Sync makes f (a file or the log's directory) durable, as f.Sync.
	Sync(f *os.File) error
	// Truncate cuts or extends f to size bytes, as f.Truncate.
	Truncate(f *os.File, size int64) error
	// Rename replaces newpath with oldpath, as os.Rename.
	Rename(oldpath, newpath string) error
	// Remove deletes a file, as os.Remove.
	Remove(name string) error
}

// osFS is the operating system's file system: calls go straight to the os
// package. It has no state, so holding it in an interface costs nothing.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

func (osFS) WriteAt(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }
func (osFS) Sync(f *os.File) error                                { return f.Sync() }
func (osFS) Truncate(f *os.File, size int64) error                { return f.Truncate(size) }
func (osFS) Rename(oldpath, newpath string) error                 { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                             { return os.Remove(name) }
