// Package faultfs is a log.FileSystem for tests that fails chosen calls: a
// Rule picks them by operation, by file name and by how many matching calls
// go through first. Calls no rule fails go to the operating system, so a log
// on it writes real files that a later Open on the default file system
// reads back; that is how a test checks what recovery makes of a failure.
//
// A rule can also hold matching calls until a channel closes instead of
// failing them: a test keeps the flusher inside an fsync while it fails
// something else.
package faultfs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
)

// Op names a FileSystem call.
type Op string

// The operations, named as the os package names them in its errors.
const (
	Open     Op = "open"
	Write    Op = "write"
	Sync     Op = "sync"
	Truncate Op = "truncate"
	Rename   Op = "rename"
	Remove   Op = "remove"
)

// Rule picks the calls to fail or hold.
type Rule struct {
	// Op is the operation; "" matches every one.
	Op Op
	// Name is a path.Match pattern for the file's base name: the old name
	// for Rename, the directory's own name for a directory's Sync; ""
	// matches every file.
	Name string
	// After is how many matching calls go through before the rule acts;
	// it acts on every matching call after them.
	After int
	// Err is what matching calls fail with, wrapped in an *fs.PathError
	// (*os.LinkError for Rename) as the os package reports errors; nil
	// means syscall.EIO.
	Err error
	// Torn makes a failing Write write the first half of its bytes before
	// it fails, as a device failing in the middle of a write leaves a torn
	// tail.
	Torn bool
	// Hold, when not nil, makes matching calls wait until it is closed
	// and then go through unharmed, instead of failing.
	Hold <-chan struct{}
}

// FS is a file system with fault rules; New makes one. It is safe for
// concurrent use.
type FS struct {
	mu       sync.Mutex
	rules    []*rule // guarded by mu
	injected int     // guarded by mu: calls failed so far
	holding  int     // guarded by mu: calls waiting on a Hold now
}

type rule struct {
	Rule
	seen int // matching calls so far
}

// New returns a file system that fails or holds what rules pick.
func New(rules ...Rule) *FS {
	f := &FS{}
	for _, r := range rules {
		f.Add(r)
	}
	return f
}

// Add adds a rule. Rules count the calls they match from the moment they are
// added; when several act on one call, the first added decides.
func (f *FS) Add(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{Rule: r})
}

// Clear removes every rule: the file system is healthy again. Calls already
// held stay held until their channel closes.
func (f *FS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Injected returns how many calls have failed because of a rule.
func (f *FS) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// Holding returns how many calls are waiting on a rule's Hold now.
func (f *FS) Holding() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holding
}

// check applies the rules to a call: it returns the rule that acts on it,
// if any, after waiting for a Hold to close.
func (f *FS) check(op Op, name string) *Rule {
	base := filepath.Base(name)
	f.mu.Lock()
	var act *Rule
	for _, r := range f.rules {
		if r.Op != "" && r.Op != op {
			continue
		}
		if ok, _ := path.Match(r.Name, base); r.Name != "" && !ok {
			continue
		}
		r.seen++
		if act == nil && r.seen > r.After {
			act = &r.Rule
		}
	}
	if act == nil {
		f.mu.Unlock()
		return nil
	}
	if act.Hold != nil {
		f.holding++
		f.mu.Unlock()
		<-act.Hold
		f.mu.Lock()
		f.holding--
		f.mu.Unlock()
		return nil
	}
	f.injected++
	f.mu.Unlock()
	return act
}

func (r *Rule) cause() error {
	if r.Err != nil {
		return r.Err
	}
	return syscall.EIO
}

// OpenFile opens name as os.OpenFile does, unless a rule fails it.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if r := f.check(Open, name); r != nil {
		return nil, &fs.PathError{Op: string(Open), Path: name, Err: r.cause()}
	}
	return os.OpenFile(name, flag, perm)
}

// WriteAt writes b at off as file.WriteAt does, unless a rule fails it (after
// writing half of b when the rule is Torn).
func (f *FS) WriteAt(file *os.File, b []byte, off int64) (int, error) {
	if r := f.check(Write, file.Name()); r != nil {
		n := 0
		if r.Torn {
			n, _ = file.WriteAt(b[:len(b)/2], off)
		}
		return n, &fs.PathError{Op: string(Write), Path: file.Name(), Err: r.cause()}
	}
	return file.WriteAt(b, off)
}

// Sync fsyncs file as file.Sync does, unless a rule fails it.
func (f *FS) Sync(file *os.File) error {
	if r := f.check(Sync, file.Name()); r != nil {
		return &fs.PathError{Op: string(Sync), Path: file.Name(), Err: r.cause()}
	}
	return file.Sync()
}

// Truncate cuts file as file.Truncate does, unless a rule fails it.
func (f *FS) Truncate(file *os.File, size int64) error {
	if r := f.check(Truncate, file.Name()); r != nil {
		return &fs.PathError{Op: string(Truncate), Path: file.Name(), Err: r.cause()}
	}
	return file.Truncate(size)
}

// Rename renames as os.Rename does, unless a rule fails it.
func (f *FS) Rename(oldpath, newpath string) error {
	if r := f.check(Rename, oldpath); r != nil {
		return &os.LinkError{Op: string(Rename), Old: oldpath, New: newpath, Err: r.cause()}
	}
	return os.Rename(oldpath, newpath)
}

// Remove removes name as os.Remove does, unless a rule fails it.
func (f *FS) Remove(name string) error {
	if r := f.check(Remove, name); r != nil {
		return &fs.PathError{Op: string(Remove), Path: name, Err: r.cause()}
	}
	return os.Remove(name)
}
