package tier

import (
	"container/list"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// cache keeps remote blocks in files on local disk, at most limit bytes,
// dropping the least recently used. A block handed to a reader stays open
// (its file already unlinked if evicted) until the reader releases it, so
// eviction never cuts a fetch short. The cache is derived data: it starts
// empty, and its directory is emptied at start.
type cache struct {
	dir   string
	limit int64

	mu      sync.Mutex
	entries map[blockKey]*cacheEntry
	lru     list.List // *cacheEntry, most recent at the front
	bytes   int64
	seq     int64
}

type blockKey struct {
	object string
	block  int
}

type cacheEntry struct {
	key     blockKey
	f       *os.File
	size    int64
	refs    int // the cache's own (while listed) and each reader's
	elem    *list.Element
	evicted bool
}

func newCache(dir string, limit int64) (*cache, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("remote read cache: empty %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("remote read cache: %w", err)
	}
	return &cache{dir: dir, limit: limit, entries: map[blockKey]*cacheEntry{}}, nil
}

// get returns the cached block with a reference the caller releases
// (unref), or nil.
func (c *cache) get(k blockKey) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	if e == nil {
		return nil
	}
	c.lru.MoveToFront(e.elem)
	e.refs++
	return e
}

// has reports whether the block is cached.
func (c *cache) has(k blockKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[k] != nil
}

// put stores a checked block and evicts older ones past the limit.
func (c *cache) put(k blockKey, b []byte) error {
	c.mu.Lock()
	c.seq++
	name := filepath.Join(c.dir, strconv.FormatInt(c.seq, 10)+"-"+strconv.Itoa(k.block)+"-"+sanitize(k.object))
	c.mu.Unlock()
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("remote read cache: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		return fmt.Errorf("remote read cache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[k]; old != nil { // fetched twice: keep the first
		_ = os.Remove(name)
		_ = f.Close()
		return nil
	}
	e := &cacheEntry{key: k, f: f, size: int64(len(b)), refs: 1}
	e.elem = c.lru.PushFront(e)
	c.entries[k] = e
	c.bytes += e.size
	for c.bytes > c.limit && c.lru.Len() > 1 {
		c.evictLocked(c.lru.Back().Value.(*cacheEntry))
	}
	return nil
}

// drop evicts every block of object (its segment left the remote log).
func (c *cache) drop(object string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if k.object == object {
			c.evictLocked(e)
		}
	}
}

func (c *cache) evictLocked(e *cacheEntry) {
	c.lru.Remove(e.elem)
	delete(c.entries, e.key)
	c.bytes -= e.size
	e.evicted = true
	_ = os.Remove(e.f.Name())
	c.unrefLocked(e)
}

func (c *cache) unref(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unrefLocked(e)
}

func (c *cache) unrefLocked(e *cacheEntry) {
	if e.refs--; e.refs == 0 {
		_ = e.f.Close()
	}
}

// size returns the cached bytes.
func (c *cache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// close evicts everything; blocks held by readers close when released.
func (c *cache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		c.evictLocked(e)
	}
}

// sanitize makes an object key usable in a file name.
func sanitize(key string) string {
	return strings.NewReplacer("/", "_", "\\", "_").Replace(key)
}
