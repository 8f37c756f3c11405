package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

func TestElect(t *testing.T) {
	part := func(leader int32, isr ...int32) cluster.Partition {
		return cluster.Partition{Replicas: []int32{1, 2, 3}, Leader: leader, ISR: isr}
	}
	tests := []struct {
		name       string
		p          cluster.Partition
		dead       []int32
		unclean    bool
		wantLeader int32
		wantISR    []int32
		changed    bool
	}{
		{"all alive: nothing to do", part(1, 1, 2, 3), nil, false, 1, []int32{1, 2, 3}, false},
		{"dead follower leaves the ISR", part(1, 1, 2, 3), []int32{3}, false, 1, []int32{1, 2}, true},
		{"dead leader: next replica in ISR", part(1, 1, 2, 3), []int32{1}, false, 2, []int32{2, 3}, true},
		{"dead leader: replica order, not ISR order", part(1, 1, 3, 2), []int32{1}, false, 2, []int32{3, 2}, true},
		{"dead leader: skips replicas out of the ISR", part(1, 1, 3), []int32{1}, false, 3, []int32{3}, true},
		{"all ISR dead: offline, last ISR member kept", part(1, 1, 2), []int32{1, 2}, false, -1, []int32{2}, true},
		{"all ISR dead, unclean: any live replica", part(1, 1, 2), []int32{1, 2}, true, 3, []int32{3}, true},
		{"offline partition: ISR member back", part(-1, 2), nil, false, 2, []int32{2}, true},
		{"offline, still dead: nothing to do", part(-1, 2), []int32{2}, false, -1, []int32{2}, false},
		{"everything dead, unclean: offline", part(1, 1), []int32{1, 2, 3}, true, -1, []int32{1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alive := func(id int32) bool { return !slices.Contains(tc.dead, id) }
			leader, isr, changed := elect(tc.p, alive, tc.unclean)
			if leader != tc.wantLeader || !slices.Equal(isr, tc.wantISR) || changed != tc.changed {
				t.Fatalf("elect = leader %d, ISR %v, changed %v; want %d, %v, %v", leader, isr, changed, tc.wantLeader, tc.wantISR, tc.changed)
			}
		})
	}
}

func TestFailoverOnSessionExpiry(t *testing.T) {
	c, r, clk := newTest(t, nil)
	lead(t, c)
	ctx := context.Background()
	var epochs []int64
	for id := int32(1); id <= 3; id++ {
		e, err := c.Register(ctx, cluster.RegisterRequest{ID: id, Addr: "n:1"})
		if err != nil {
			t.Fatal(err)
		}
		epochs = append(epochs, e)
	}
	if _, err := r.Propose(ctx, createCmd("orders", []int32{1, 2, 3}, []int32{2, 3, 1})); err != nil {
		t.Fatal(err)
	}
	// Node 1 goes silent; 2 and 3 keep heartbeating.
	clk.advance(4 * time.Second)
	for _, id := range []int32{2, 3} {
		if err := c.Heartbeat(cluster.HeartbeatRequest{ID: id, Epoch: epochs[id-1]}); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(3 * time.Second)
	c.checkSessions()

	tp, _ := r.f.Topic("orders")
	p0, p1 := tp.Partitions[0], tp.Partitions[1]
	if p0.Leader != 2 || p0.LeaderEpoch != 1 || !slices.Equal(p0.ISR, []int32{2, 3}) || p0.PartitionEpoch != 1 {
		t.Fatalf("partition led by the dead node = %+v; want leader 2, epoch 1, ISR [2 3]", p0)
	}
	if p1.Leader != 2 || p1.LeaderEpoch != 0 || !slices.Equal(p1.ISR, []int32{2, 3}) {
		t.Fatalf("partition with the dead node as follower = %+v; want leader 2 kept, ISR [2 3]", p1)
	}
	// Another check changes nothing: reconciliation is idempotent.
	v := r.f.Version()
	c.checkSessions()
	if r.f.Version() != v {
		t.Fatalf("a second check changed the state (version %d -> %d)", v, r.f.Version())
	}
}

func createCmd(name string, replicas ...[]int32) fsm.Command {
	return fsm.Command{Type: fsm.TypeCreateTopic, CreateTopic: &fsm.CreateTopic{Name: name, ReplicationFactor: len(replicas[0]), Replicas: replicas}}
}
