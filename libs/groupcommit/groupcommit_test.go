package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// heldBatcher returns a Batcher of ints answering each input negated whose
// first round waits until release; started is closed when it began.
func heldBatcher(maxItems, maxSize int) (b *Batcher[int, int], rounds func() [][]int, started, release chan struct{}) {
	var mu sync.Mutex
	var seen [][]int
	started, release = make(chan struct{}), make(chan struct{})
	b = New(func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		first := len(seen) == 0
		seen = append(seen, in)
		mu.Unlock()
		if first {
			close(started)
			<-release
		}
		out := make([]int, len(in))
		for i, v := range in {
			if v < 0 {
				return nil, errors.New("negative input")
			}
			out[i] = -v
		}
		return out, nil
	}, maxItems, maxSize, func(i int) int { return max(i, 0) })
	rounds = func() [][]int {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	return b, rounds, started, release
}

// queue submits each input on its own goroutine, in order, waiting until
// each is queued, and checks each answer.
func queue(t *testing.T, b *Batcher[int, int], wg *sync.WaitGroup, ins ...int) {
	for _, v := range ins {
		n := b.Queued()
		wg.Go(func() {
			if out, err := b.Do(context.Background(), v); err != nil || out != -v {
				t.Errorf("Do(%d) = %d, %v", v, out, err)
			}
		})
		testkit.WaitFor(t, 10*time.Second, "the request to queue", func() bool { return b.Queued() != n })
	}
}

// TestRoundsGatherWhatWaits: what is submitted while a round runs goes
// into the next round, bounded by maxItems and maxSize (but always one
// input, however large); each caller gets its own answer.
func TestRoundsGatherWhatWaits(t *testing.T) {
	b, rounds, started, release := heldBatcher(3, 10)
	var observed []int // each round's size, as Observe reports it
	b.Observe(func(items int, d time.Duration) {
		if d <= 0 {
			t.Errorf("a round of %d took %v", items, d)
		}
		observed = append(observed, items) // rounds run one at a time
	})
	var wg sync.WaitGroup
	wg.Go(func() { b.Do(context.Background(), 1) })
	<-started
	queue(t, b, &wg, 1, 1, 1, 1, 20, 4, 4, 4)
	close(release)
	wg.Wait()
	b.Wait()
	if got, want := fmt.Sprint(rounds()), "[[1] [1 1 1] [1] [20] [4 4] [4]]"; got != want {
		t.Fatalf("rounds %s, want %s", got, want)
	}
	if r, items := b.Counts(); r != 6 || items != 9 {
		t.Fatalf("counts: %d rounds, %d items; want 6, 9", r, items)
	}
	if got := fmt.Sprint(observed); got != "[1 3 1 1 2 1]" {
		t.Fatalf("observed rounds of %s, want [1 3 1 1 2 1]", got)
	}
}

// TestGivenUpCallsAreLeftOut: a caller whose context ends while it waits
// gets the context's error and its input is not in the next round; a
// round's error answers every input of that round.
func TestGivenUpCallsAreLeftOut(t *testing.T) {
	b, rounds, started, release := heldBatcher(10, 100)
	var wg sync.WaitGroup
	wg.Go(func() { b.Do(context.Background(), 1) })
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := b.Do(ctx, 7)
		gaveUp <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "a request to queue", func() bool { return b.Queued() > 0 })
	failed := make(chan []error, 1)
	go func() {
		_, errs := b.DoAll(context.Background(), []int{2, -1})
		failed <- errs
	}()
	testkit.WaitFor(t, 10*time.Second, "3 requests to queue", func() bool { return b.Queued() >= 3 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v", err)
	}
	close(release)
	errs := <-failed
	wg.Wait()
	b.Wait()
	if got, want := fmt.Sprint(rounds()), "[[1] [2 -1]]"; got != want {
		t.Fatalf("rounds %s, want %s (7 left out)", got, want)
	}
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("a failed round's inputs: %v", errs)
	}
}
