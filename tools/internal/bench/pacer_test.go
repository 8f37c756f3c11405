package bench

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestPacerSpacesRecords(t *testing.T) {
	p := NewPacer(1000, t0) // one record a millisecond
	for i, want := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond} {
		if got := p.Reserve(t0, 1); got != want {
			t.Fatalf("record %d: wait %v, want %v", i, got, want)
		}
	}
	// Later on, the schedule is absolute: record 4 was due at 4ms.
	if got := p.Reserve(t0.Add(3500*time.Microsecond), 1); got != 500*time.Microsecond {
		t.Fatalf("record 4 at 3.5ms: wait %v, want 0.5ms", got)
	}
	// A batch takes its records at once: the next record waits for all of them.
	if got := p.Reserve(t0.Add(5*time.Millisecond), 100); got != 0 {
		t.Fatalf("batch due now: wait %v", got)
	}
	if got := p.Reserve(t0.Add(5*time.Millisecond), 1); got != 100*time.Millisecond {
		t.Fatalf("after a batch of 100: wait %v, want 100ms", got)
	}
}

func TestPacerCatchesUpAtMostMaxLag(t *testing.T) {
	p := NewPacer(1000, t0)
	p.Reserve(t0, 1)
	// A stall of a second: only maxPacerLag worth of records (100, plus the
	// one due now) go at once, then the rate holds again.
	now := t0.Add(time.Second)
	burst := 0
	for p.Reserve(now, 1) == 0 {
		burst++
		if burst > 10_000 {
			t.Fatal("no pacing after a stall")
		}
	}
	if want := int(maxPacerLag/time.Millisecond) + 1; burst != want {
		t.Fatalf("burst of %d records after a stall, want %d", burst, want)
	}
}

func TestPaceWithoutPacerAndCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if _, ok := pace(ctx, nil, 1); !ok {
		t.Fatal("unthrottled pace refused")
	}
	cancel()
	if _, ok := pace(ctx, nil, 1); ok {
		t.Fatal("pace went on after ctx ended")
	}
	if _, ok := pace(ctx, NewPacer(0.001, time.Now().Add(time.Hour)), 1); ok {
		t.Fatal("a long wait did not end with ctx")
	}
}

func TestPlan(t *testing.T) {
	warm := t0.Add(time.Second)
	p := &plan{warmupEnd: warm, limit: 5}
	if n, counted := p.take(t0, 3); n != 3 || counted {
		t.Fatalf("warm-up: %d %v", n, counted)
	}
	for _, want := range []int{3, 2, 0} {
		if n, counted := p.take(warm, 3); n != want || (n > 0) != counted {
			t.Fatalf("limit 5: took %d (counted %v), want %d", n, counted, want)
		}
	}
	d := &plan{warmupEnd: t0, end: t0.Add(time.Second)}
	if n, counted := d.take(t0.Add(999*time.Millisecond), 10); n != 10 || !counted {
		t.Fatalf("within the duration: %d %v", n, counted)
	}
	if n, _ := d.take(t0.Add(time.Second), 10); n != 0 {
		t.Fatalf("after the duration: %d", n)
	}
}
