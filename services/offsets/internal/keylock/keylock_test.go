package keylock

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// TestOneHolderPerKey: a key's lock is held by one caller at a time, and
// another key's lock is taken meanwhile without waiting.
func TestOneHolderPerKey(t *testing.T) {
	var k Locks
	unlock := k.Lock("a")
	got := make(chan struct{})
	go func() {
		defer k.Lock("a")()
		close(got)
	}()
	testkit.WaitFor(t, 5*time.Second, "the second caller to wait for a", func() bool { return k.Held() == 1 && k.refs("a") == 2 })
	select {
	case <-got:
		t.Fatal("a second caller took a held key's lock")
	default:
	}
	k.Lock("b")() // another key: not held, not waited for
	unlock()
	<-got
	testkit.WaitFor(t, 5*time.Second, "a's lock to be released", func() bool { return k.Held() == 0 })
}

// TestKeysDoNotPileUp: every key gets an entry only while it is held or
// waited for, so made-up names cost no memory afterwards.
func TestKeysDoNotPileUp(t *testing.T) {
	var k Locks
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside := map[string]int{}
	for i := range 50 {
		wg.Go(func() {
			key := fmt.Sprintf("key-%d", i%5)
			defer k.Lock(key)()
			mu.Lock()
			inside[key]++
			n := inside[key]
			mu.Unlock()
			if n != 1 {
				t.Errorf("%d callers inside %s's lock", n, key)
			}
			mu.Lock()
			inside[key]--
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := k.Held(); n != 0 {
		t.Fatalf("%d keys left after every holder released its lock", n)
	}
}

// refs is how many callers hold or wait for key's lock.
func (k *Locks) refs(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.m[key]; l != nil {
		return l.refs
	}
	return 0
}
