package sharefsm

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// TestWouldAcquireTellsWhatAcquireChanges: on random partitions (records in
// every state, live and expired locks, deferred records, log starts and
// high watermarks before, at and past the window), wouldAcquire is true
// exactly when skipTo and acquire change the partition, so an acquisition
// copies no partition it leaves alone and misses none it changes.
func TestWouldAcquireTellsWhatAcquireChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := shares.DefaultConfig()
	cfg.MaxRecordLocks = 100
	const now = int64(1_000_000)
	for i := range 20_000 {
		p := &Partition{Topic: "t", Start: 1000}
		for range rng.IntN(int(cfg.MaxRecordLocks) + 1) {
			r := Record{State: RecordState(rng.IntN(int(Archiving) + 1)), Count: int16(1 + rng.IntN(int(cfg.DeliveryLimit)))}
			switch r.State {
			case Acquired:
				r.member, r.LockUntilMs = p.memberRef("m"), now+int64(rng.IntN(3)-1)*1000
			case Available:
				r.NotBeforeMs = now + int64(rng.IntN(3)-1)*1000
			}
			p.Records = append(p.Records, r)
		}
		p.compact()
		logStart := p.Start + int64(rng.IntN(3)-1)
		hw := p.End() + int64(rng.IntN(3)-1)
		max := int32(rng.IntN(3))
		before := p.Clone()
		q := p.Clone()
		q.skipTo(logStart)
		_, took := q.acquire("n", max, hw, now, cfg)
		changed := took || q.Start != before.Start
		if got := p.wouldAcquire(max, logStart, hw, now, cfg); got != changed {
			t.Fatalf("case %d (start %d, %d records, log start %d, hw %d, max %d): wouldAcquire %v, acquire changed it: %v",
				i, p.Start, len(p.Records), logStart, hw, max, got, changed)
		}
		if !reflect.DeepEqual(p, before) {
			t.Fatalf("case %d: wouldAcquire changed the partition", i)
		}
	}
}

// BenchmarkAcquireFullWindow is one acquisition of a consumer over four
// partitions whose windows are full (2,000 records each, every one under
// another consumer's lock) but one, which has records to take: the shape
// of many consumers sharing a topic's windows.
func BenchmarkAcquireFullWindow(b *testing.B) {
	cfg := shares.DefaultConfig()
	g := &Group{Name: "g", Config: cfg, Partitions: map[string]*Partition{}}
	const now = int64(1_000_000)
	var parts []Bounds
	for p := range int32(4) {
		sp := &Partition{Topic: "t", Partition: p}
		for range cfg.MaxRecordLocks {
			sp.Records = append(sp.Records, Record{State: Acquired, member: sp.memberRef("other"), LockUntilMs: now + 30_000, Count: 1})
		}
		hw := sp.End()
		if p == 3 {
			hw += 10_000
			sp.Records = sp.Records[:0]
		}
		g.Partitions[partkey.String(groups.TP{Topic: "t", Partition: p})] = sp
		parts = append(parts, Bounds{Partition: p, LogStart: 0, HighWatermark: hw})
	}
	b.ReportAllocs()
	for b.Loop() {
		gg := g.clone()
		resp, _ := acquireShare(gg, &Acquire{MemberID: "m", Topic: "t", Partitions: parts}, now, map[*Partition]bool{}, nil)
		if len(resp.Acquired) == 0 {
			b.Fatal("nothing acquired")
		}
	}
}
