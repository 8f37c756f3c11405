package produce

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/libs/partitioner"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

func keyed(k string) Input { return Input{Record: record.Record{Key: []byte(k), Value: []byte("v")}} }
func keyless() Input       { return Input{Record: record.Record{Value: []byte("v")}} }
func explicit(p int32) Input {
	return Input{Record: record.Record{Value: []byte("v")}, Partition: p, Explicit: true}
}
func partitionsOf(pl plan, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = -1
	}
	for _, g := range pl.groups {
		for _, i := range g.index {
			out[i] = g.partition
		}
	}
	return out
}

func TestAssignKeyedIsKafkaMurmur2(t *testing.T) {
	const n = 7
	var recs []Input
	for i := 0; i < 200; i++ {
		recs = append(recs, keyed(fmt.Sprintf("key-%d", i)))
	}
	recs = append(recs, Input{Record: record.Record{Key: []byte{}, Value: []byte("v")}}) // empty key is a key
	pl := assign(recs, n, func() int32 { t.Fatal("keyless asked for keyed records"); return 0 })
	got := partitionsOf(pl, len(recs))
	for i, r := range recs {
		if want := int32(partitioner.ForKey(r.Key, n)); got[i] != want {
			t.Fatalf("record %d (key %q): partition %d, want %d", i, r.Key, got[i], want)
		}
	}
}

func TestAssignExplicit(t *testing.T) {
	recs := []Input{explicit(2), explicit(0), explicit(3), explicit(-1), explicit(2)}
	pl := assign(recs, 3, func() int32 { return 0 })
	got := partitionsOf(pl, len(recs))
	want := []int32{2, 0, -1, -1, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("partitions %v, want %v", got, want)
		}
	}
	for _, i := range []int{2, 3} {
		if protocol.CodeOf(pl.rejected[i]) != protocol.UnknownTopicOrPartition {
			t.Errorf("record %d: rejected with %v", i, pl.rejected[i])
		}
	}
	if len(pl.rejected) != 2 {
		t.Errorf("rejected %v", pl.rejected)
	}
}

func TestAssignKeylessStickyPerRequest(t *testing.T) {
	calls := 0
	pick := func() int32 { calls++; return int32(calls) } // a new partition on each call
	recs := []Input{keyless(), keyed("a"), keyless(), explicit(0), keyless()}
	pl := assign(recs, 8, pick)
	if calls != 1 {
		t.Fatalf("keyless choice asked %d times in one request, want 1", calls)
	}
	got := partitionsOf(pl, len(recs))
	if got[0] != 1 || got[2] != 1 || got[4] != 1 {
		t.Fatalf("keyless records spread over %v", got)
	}
	// No keyless record: no choice made (the topic's sticky partition stays).
	assign([]Input{keyed("x")}, 8, pick)
	if calls != 1 {
		t.Fatalf("keyless choice made for a request without keyless records")
	}
}

func TestAssignGroupsKeepRequestOrder(t *testing.T) {
	recs := []Input{explicit(1), explicit(0), explicit(1), explicit(0), explicit(1)}
	pl := assign(recs, 2, func() int32 { return 0 })
	if len(pl.groups) != 2 || pl.groups[0].partition != 1 || pl.groups[1].partition != 0 {
		t.Fatalf("groups %+v", pl.groups)
	}
	if fmt.Sprint(pl.groups[0].index) != "[0 2 4]" || fmt.Sprint(pl.groups[1].index) != "[1 3]" {
		t.Fatalf("order within groups: %+v", pl.groups)
	}
}

func TestStickyTableMovesOnPerRequest(t *testing.T) {
	var st stickyTable
	const n = 4
	prev := st.pick("t", n)
	for i := 0; i < 50; i++ {
		p := st.pick("t", n)
		if p < 0 || p >= n {
			t.Fatalf("partition %d out of range", p)
		}
		if p == prev {
			t.Fatalf("request %d stayed on partition %d", i, p)
		}
		prev = p
	}
	if p := st.pick("t", 1); p != 0 {
		t.Fatalf("after shrink to 1 partition: %d", p)
	}
}
