// Package testkit is what the tests of every module share: waiting for a
// condition (WaitFor, Eventually) and, in fakecluster, fakes of the metadata,
// storage and offsets services for unit tests that cannot run the real ones.
package testkit

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds. The test fails, naming what it waited
// for, when within passes first.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, within, func() error {
		if cond() {
			return nil
		}
		return waitingFor(what)
	})
}

type waitingFor string

func (w waitingFor) Error() string { return "still waiting for " + string(w) }

// Eventually polls check until it returns nil. The test fails with check's
// last error when within passes first. The polls start 1 ms apart and slow
// down to a hundredth of within (at most 200 ms), so that short waits end
// quickly and long ones do not spin.
func Eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause, most := time.Millisecond, min(max(within/100, time.Millisecond), 200*time.Millisecond)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v: %v", within, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, most)
	}
}
