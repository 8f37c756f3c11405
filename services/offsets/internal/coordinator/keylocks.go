package coordinator

import "sync"

// keyLocks serializes work per key (a group's membership changes, a
// transactional id's state changes). A key's entry lives only while someone
// holds or waits for it, so names that clients make up do not pile up in
// memory.
type keyLocks struct {
	mu sync.Mutex // guards m and the entries' refs; held only briefly
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by keyLocks.mu
}

// lock takes key's lock and returns its release.
func (k *keyLocks) lock(key string) (unlock func()) {
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

// held is how many keys are held or waited for.
func (k *keyLocks) held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
