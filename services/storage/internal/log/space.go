package log

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Full disks. A node keeps a reserve of free space under its data directory:
// an append that would eat into it is refused with ErrDiskFull before
// anything is written, so the file system never runs out in the middle of a
// segment or an index, and appends work again as soon as space returns (no
// restart). Should the file system still refuse a write for lack of space,
// the partial write is cut back and the append refused the same way; the log
// stays usable.

// spaceRecheck bounds how stale the free-space figure may be.
const spaceRecheck = 100 * time.Millisecond

// SpaceGuard refuses writes that would leave less than a reserve free on the
// file system holding a directory. The logs of one data directory share one.
type SpaceGuard struct {
	dir    string
	min    int64
	statfs func(dir string) (int64, error) // free bytes for unprivileged writers

	mu   sync.Mutex
	free int64     // guarded by mu: free bytes as of at, minus what was reserved since
	at   time.Time // guarded by mu: zero before the first look

	refused atomic.Int64
}

// NewSpaceGuard watches the file system holding dir and keeps min bytes free
// (0: only real ENOSPC refuses).
func NewSpaceGuard(dir string, min int64) *SpaceGuard {
	return &SpaceGuard{dir: dir, min: min, statfs: statfsFree}
}

func statfsFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Reserve accounts for n bytes about to be written, refusing them with
// ErrDiskFull when they would leave less than the reserve free.
func (g *SpaceGuard) Reserve(n int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.at) > spaceRecheck || g.free-n < g.min {
		free, err := g.statfs(g.dir)
		if err != nil {
			return nil // no figure: the write itself will tell
		}
		g.free, g.at = free, time.Now()
	}
	if g.free-n < g.min {
		g.refused.Add(1)
		return fmt.Errorf("%w: %d bytes free under %s, an append of %d would leave less than the %d kept in reserve (-min-free-bytes)",
			ErrDiskFull, g.free, g.dir, n, g.min)
	}
	g.free -= n
	return nil
}

// Free returns the free bytes last seen (-1 before the first look).
func (g *SpaceGuard) Free() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() {
		if free, err := g.statfs(g.dir); err == nil {
			g.free, g.at = free, time.Now()
		} else {
			return -1
		}
	}
	return g.free
}

// Refused returns how many appends the guard refused.
func (g *SpaceGuard) Refused() int64 { return g.refused.Load() }

// SetSpaceGuard makes the log refuse appends that would eat into g's reserve;
// call it before the log is shared.
func (l *Log) SetSpaceGuard(g *SpaceGuard) {
	l.appendMu.Lock()
	l.space = g
	l.appendMu.Unlock()
}

// isNoSpace reports whether err is the file system running out of space.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
