package testkit

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf keeps the message and ends the
// goroutine, as the testing package's does, without failing the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine and returns the failure.
func run(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	return r.failed
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	WaitFor(t, 5*time.Second, "three polls", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("polled %d times", n.Load())
	}
}

func TestWaitForFailsNamingWhatItWaitedFor(t *testing.T) {
	failed := run(t, func(tb testing.TB) { WaitFor(tb, 20*time.Millisecond, "the moon", func() bool { return false }) })
	if !strings.Contains(failed, "still waiting for the moon") {
		t.Fatalf("failure %q", failed)
	}
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	n := 0
	failed := run(t, func(tb testing.TB) {
		Eventually(tb, 20*time.Millisecond, func() error { n++; return errors.New("attempt failed") })
	})
	if !strings.Contains(failed, "attempt failed") || n < 2 {
		t.Fatalf("failure %q after %d checks", failed, n)
	}
}

func TestBatchAndValuesRoundTrip(t *testing.T) {
	b := append(Batch(t, "a", "b"), Batch(t, "c")...)
	if got := Values(t, b); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("values of two batches: %v", got)
	}
}
