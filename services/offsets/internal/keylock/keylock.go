// Package keylock serializes work per key: the offsets service's
// coordinators change one group, or one transactional id, at a time. A
// key's entry lives only while someone holds or waits for it, so names that
// clients make up do not pile up in memory.
package keylock

import "sync"

// Locks is a lock per key; the zero value is ready to use.
type Locks struct {
	mu sync.Mutex // guards m and the entries' refs; held only briefly
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by Locks.mu
}

// Lock takes key's lock, waiting while another holds it, and returns its
// release.
func (k *Locks) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// Held is how many keys are held or waited for.
func (k *Locks) Held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
