package client

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// These tests drive the Consumer's shared state and its Poll-side steps
// directly, on a Consumer with no goroutines and no sockets.

func newBareConsumer(maxPoll int) *Consumer {
	return &Consumer{
		cfg:     ConsumerConfig{Group: "g", MaxPollRecords: maxPoll},
		log:     slog.New(slog.DiscardHandler),
		parts:   map[groups.TP]*partition{},
		wake:    make(chan struct{}, 1),
		ready:   make(chan struct{}, 1),
		hbNow:   make(chan struct{}, 1),
		lostAck: make(chan struct{}, 1),
		closing: make(chan struct{}),
	}
}

// buffered returns a fetcher that is not running, holding results.
func buffered(results ...fetchResult) *fetcher {
	f := &fetcher{ch: make(chan fetchResult, len(results)+1), done: make(chan struct{})}
	f.hw.Store(-1)
	for _, r := range results {
		f.ch <- r
	}
	return f
}

func recs(from, to int64) fetchResult {
	var r fetchResult
	for o := from; o < to; o++ {
		r.recs = append(r.recs, record.Record{Offset: o})
	}
	return r
}

func own(c *Consumer, tp groups.TP, position int64, f *fetcher) *partition {
	p := &partition{position: position, committed: -1, f: f}
	c.parts[tp] = p
	return p
}

func signalled(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestGatherIsFairAndBounded(t *testing.T) {
	c := newBareConsumer(4)
	a, b := tp("t", 0), tp("t", 1)
	own(c, a, 0, buffered(recs(0, 10)))
	own(c, b, 0, buffered(recs(0, 3), recs(3, 6)))
	first := c.gather()
	if o0, o1 := offsetsOf(first, 0), offsetsOf(first, 1); !slices.Equal(o0, seq(0, 2)) || !slices.Equal(o1, seq(0, 2)) {
		t.Errorf("first poll t-0 %v t-1 %v, want two of each", o0, o1)
	}
	if len(first) != 4 || first[0].Topic != "t" {
		t.Errorf("first poll %v", first)
	}
	var rest []ConsumerRecord
	for range 10 {
		rest = append(rest, c.gather()...)
	}
	if o0, o1 := offsetsOf(rest, 0), offsetsOf(rest, 1); !slices.Equal(o0, seq(2, 10)) || !slices.Equal(o1, seq(2, 6)) {
		t.Errorf("later polls t-0 %v t-1 %v", o0, o1)
	}
	if c.parts[a].position != 10 || c.parts[b].position != 6 {
		t.Errorf("positions %d %d, want 10 6", c.parts[a].position, c.parts[b].position)
	}
	// A partition with little data leaves its share to the others.
	c = newBareConsumer(10)
	own(c, a, 0, buffered(recs(0, 20)))
	own(c, b, 0, buffered(recs(0, 2)))
	if got := c.gather(); len(got) != 10 || len(offsetsOf(got, 1)) != 2 {
		t.Errorf("poll of 10 from 20+2 buffered: t-0 %v t-1 %v", offsetsOf(got, 0), offsetsOf(got, 1))
	}
}

func TestGatherAppliesResetsAndSkipsSeekingPartitions(t *testing.T) {
	c := newBareConsumer(100)
	a, b := tp("t", 0), tp("t", 1)
	own(c, a, 100, buffered(fetchResult{reset: true, resetTo: 5}, recs(5, 7)))
	p := own(c, b, 0, buffered(recs(0, 3)))
	p.seekPending = true
	got := c.gather()
	if o := offsetsOf(got, 0); !slices.Equal(o, seq(5, 7)) || c.parts[a].position != 7 {
		t.Errorf("after a reset: %v position %d", o, c.parts[a].position)
	}
	if o := offsetsOf(got, 1); len(o) != 0 {
		t.Errorf("records of a partition with a pending seek: %v", o)
	}
	// Records below the position (already returned) are never returned again.
	c = newBareConsumer(100)
	own(c, a, 3, buffered(recs(1, 5)))
	if o := offsetsOf(c.gather(), 0); !slices.Equal(o, seq(3, 5)) {
		t.Errorf("from position 3 over records 1..4: %v", o)
	}
}

func TestLossPendingGatesEverything(t *testing.T) {
	c := newBareConsumer(100)
	a0, a1 := tp("t", 0), tp("t", 1)
	own(c, a0, 0, buffered(recs(0, 3)))
	c.target = []groups.TP{a0, a1}
	c.lostGen = 1
	if got := c.gather(); len(got) != 0 {
		t.Errorf("records returned while a loss is pending: %v", got)
	}
	if got := c.takeAssignment(); got != nil {
		t.Errorf("assignment taken while a loss is pending: %v", got)
	}
	if got := c.toRevoke(); got != nil {
		t.Errorf("revocation planned while a loss is pending: %v", got)
	}
	c.lostHandled = 1
	if got := c.takeAssignment(); !slices.Equal(got, []groups.TP{a1}) || !signalled(c.hbNow) {
		t.Errorf("takeAssignment %v (and a heartbeat at once)", got)
	}
	if p := c.parts[a1]; p == nil || p.position != -1 || p.f != nil {
		t.Errorf("a new partition starts without a position or fetcher: %+v", p)
	}
	c.target = []groups.TP{a1}
	if got := c.toRevoke(); !slices.Equal(got, []groups.TP{a0}) {
		t.Errorf("toRevoke %v", got)
	}
}

func TestDeclareLost(t *testing.T) {
	c := newBareConsumer(1)
	m := newMembership(3e9, 30e9)
	m.memberID, m.epoch = "m1", 5
	c.memberID, c.epoch, c.target = "m1", 5, []groups.TP{tp("t", 0)}
	c.declareLost(m, "test")
	if c.lostGen != 1 || c.lostHandled != 1 {
		t.Errorf("with nothing owned the loss is released at once: gen %d handled %d", c.lostGen, c.lostHandled)
	}
	if m.joined() || c.memberID != "" || c.epoch != 0 || c.target != nil || !signalled(c.wake) {
		t.Errorf("after a loss: membership %+v consumer %q %d %v", m, c.memberID, c.epoch, c.target)
	}
	own(c, tp("t", 0), 3, nil)
	c.declareLost(m, "test")
	if c.lostGen != 2 || c.lostHandled != 1 {
		t.Errorf("with partitions owned the loss waits for Poll: gen %d handled %d", c.lostGen, c.lostHandled)
	}
}

func TestReleaseLostCallsOnLostWithoutCommitting(t *testing.T) {
	c := newBareConsumer(1)
	var lost [][]groups.TP
	var ownedDuring []groups.TP
	c.cfg.AutoCommit = true
	c.cfg.OnLost = func(tps []groups.TP) { lost = append(lost, tps); ownedDuring = c.Assignment() }
	own(c, tp("t", 1), 3, nil)
	own(c, tp("t", 0), 3, nil)
	c.lostGen = 1
	c.releaseLost() // c.coord is nil: a commit attempt would panic
	want := []groups.TP{tp("t", 0), tp("t", 1)}
	if len(lost) != 1 || !slices.Equal(lost[0], want) || !slices.Equal(ownedDuring, want) {
		t.Errorf("OnLost calls %v, owned during the callback %v", lost, ownedDuring)
	}
	if len(c.parts) != 0 || c.lostHandled != 1 || !signalled(c.lostAck) {
		t.Errorf("after release: parts %v handled %d", c.parts, c.lostHandled)
	}
	c.releaseLost()
	if len(lost) != 1 {
		t.Error("OnLost called twice for one loss")
	}
}

func TestPositionsCommitAndSeekRules(t *testing.T) {
	c := newBareConsumer(1)
	a, b, d := tp("t", 0), tp("t", 1), tp("t", 2)
	own(c, a, 5, nil)
	own(c, b, 7, nil).committed = 7
	own(c, d, -1, nil)
	if got := c.positions(nil, false); len(got) != 2 || got[0].Offset != 5 || got[1].Offset != 7 {
		t.Errorf("all known positions %v", got)
	}
	if got := c.positions(nil, true); len(got) != 1 || got[0].Partition != 0 {
		t.Errorf("changed positions %v", got)
	}
	if got := c.positions([]groups.TP{b, tp("x", 0)}, false); len(got) != 1 || got[0].Partition != 1 {
		t.Errorf("positions of b and a partition not owned: %v", got)
	}
	if p, ok := c.Position(d); ok || p != -1 {
		t.Errorf("position of a partition not started: %d %v", p, ok)
	}
	err := c.CommitOffsets(context.Background(), c.positions(nil, false))
	if protocol.CodeOf(err) != protocol.UnknownMemberID {
		t.Errorf("commit while not a member: %v", err)
	}
	if err := c.Seek(tp("x", 0), 1); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Seek of a partition not owned: %v", err)
	}
	if err := c.Seek(a, -1); err == nil {
		t.Error("Seek to a negative offset accepted")
	}
	if err := c.Seek(d, 42); err != nil || !signalled(c.wake) {
		t.Fatalf("Seek: %v", err)
	}
	if p, ok := c.Position(d); !ok || p != 42 || !c.parts[d].seekPending {
		t.Errorf("after Seek: %d %v", p, ok)
	}
	if hw := c.HighWatermark(d); hw != -1 {
		t.Errorf("high watermark without a fetcher: %d", hw)
	}
}
