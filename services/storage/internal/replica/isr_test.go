package replica

import (
	"slices"
	"testing"
	"time"
)

func TestHighWatermarkRule(t *testing.T) {
	f := func(leo, flushed int64) FollowerState { return FollowerState{LEO: leo, Flushed: flushed} }
	cases := []struct {
		name      string
		current   int64
		leader    FollowerState
		isr       []int32
		followers map[int32]FollowerState
		durable   bool
		want      int64
	}{
		{"alone", 0, f(10, 10), []int32{1}, nil, false, 10},
		{"min over isr", 0, f(10, 10), []int32{1, 2, 3}, map[int32]FollowerState{2: f(7, 7), 3: f(9, 9)}, false, 7},
		{"followers outside the isr do not count", 0, f(10, 10), []int32{1, 3}, map[int32]FollowerState{2: f(1, 1), 3: f(9, 9)}, false, 9},
		{"durable counts flushed offsets", 0, f(10, 8), []int32{1, 2}, map[int32]FollowerState{2: f(10, 6)}, true, 6},
		{"page cache counts log ends", 0, f(10, 8), []int32{1, 2}, map[int32]FollowerState{2: f(10, 6)}, false, 10},
		{"never moves back", 9, f(10, 10), []int32{1, 2}, map[int32]FollowerState{2: f(4, 4)}, false, 9},
		{"unknown isr member holds it", 5, f(10, 10), []int32{1, 2}, map[int32]FollowerState{}, false, 5},
		{"leader flush lags", 0, f(10, 3), []int32{1, 2}, map[int32]FollowerState{2: f(10, 10)}, true, 3},
	}
	for _, c := range cases {
		if got := HighWatermark(c.current, 1, c.leader, c.isr, c.followers, c.durable); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestShrinkAndExpandISR(t *testing.T) {
	now := time.Unix(1000, 0)
	lag := 10 * time.Second
	followers := map[int32]FollowerState{
		2: {LEO: 100, CaughtUpAt: now.Add(-time.Second)},
		3: {LEO: 40, CaughtUpAt: now.Add(-30 * time.Second)},
	}
	isr, changed := ShrinkISR([]int32{1, 2, 3}, 1, followers, now, lag)
	if !changed || !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("shrink: %v %v", isr, changed)
	}
	if isr, changed := ShrinkISR([]int32{1}, 1, nil, now, lag); changed || !slices.Equal(isr, []int32{1}) {
		t.Fatalf("leader alone: %v %v", isr, changed)
	}
	// Follower 3 catches up: log end at the high watermark, fetching currently.
	followers[3] = CaughtUp(followers[3], 100, 100, 100, now)
	isr, changed = ExpandISR([]int32{1, 2}, []int32{1, 2, 3}, followers, 100, now, lag)
	if !changed || !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("expand: %v %v", isr, changed)
	}
	// Behind the high watermark: stays out.
	followers[3] = FollowerState{LEO: 90, CaughtUpAt: now}
	if _, changed := ExpandISR([]int32{1, 2}, []int32{1, 2, 3}, followers, 100, now, lag); changed {
		t.Fatal("a lagging follower joined the ISR")
	}
}

func TestCaughtUp(t *testing.T) {
	t0 := time.Unix(5, 0)
	f := CaughtUp(FollowerState{}, 50, 40, 60, t0)
	if !f.CaughtUpAt.IsZero() || f.LEO != 50 || f.Flushed != 40 {
		t.Fatalf("behind: %+v", f)
	}
	f = CaughtUp(f, 60, -1, 60, t0)
	if !f.CaughtUpAt.Equal(t0) || f.Flushed != 40 {
		t.Fatalf("caught up: %+v", f)
	}
}

func TestCaughtUpUnderContinuousAppends(t *testing.T) {
	// The leader's end moves on between every fetch; the follower always
	// fetches from where the leader's end was at its previous fetch.
	t0 := time.Unix(100, 0)
	var f FollowerState
	leaderEnd := int64(10)
	for i := 0; i < 10; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		fetchAt := leaderEnd - 5 // half way between the previous end and now
		if i > 0 {
			fetchAt = f.prevLeaderEnd
		}
		f = CaughtUp(f, fetchAt, -1, leaderEnd, now)
		leaderEnd += 10
	}
	if lag := t0.Add(9 * time.Second).Sub(f.CaughtUpAt); lag > time.Second {
		t.Fatalf("a follower keeping pace lags by %v", lag)
	}
}
