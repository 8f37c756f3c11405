package fsm

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/cluster"
)

func reg(id int32, rack string) Command {
	return Command{Type: TypeRegisterNode, RegisterNode: &RegisterNode{ID: id, Addr: "n:1", Rack: rack}}
}

func create(name string, rf int, replicas ...[]int32) Command {
	return Command{Type: TypeCreateTopic, CreateTopic: &CreateTopic{Name: name, ReplicationFactor: rf, Replicas: replicas}}
}

func fence(id int32, epoch int64) Command {
	return Command{Type: TypeFenceNode, FenceNode: &FenceNode{ID: id, Epoch: epoch}}
}

func shutdown(id int32, epoch int64) Command {
	return Command{Type: TypeShutdownNode, ShutdownNode: &ShutdownNode{ID: id, Epoch: epoch}}
}

// alter is an AlterPartition of orders-0 (replicas 1, 2; leader 1 at epoch 1
// in TestApply's base state).
func alter(leader int32, nodeEpoch int64, le, pe int32, isr ...int32) Command {
	return Command{Type: TypeAlterPartition, AlterPartition: &AlterPartition{
		Topic: "orders", Partition: 0, LeaderID: leader, NodeEpoch: nodeEpoch, LeaderEpoch: le, PartitionEpoch: pe, ISR: isr}}
}

func update(topic string, part, le, pe, leader int32, isr ...int32) Command {
	return Command{Type: TypeUpdatePartition, UpdatePartition: &UpdatePartition{
		Topic: topic, Partition: part, LeaderEpoch: le, PartitionEpoch: pe, Leader: leader, ISR: isr}}
}

// harness feeds commands to an FSM as raft would, at indexes 1, 2, ...
type harness struct {
	*FSM
	idx uint64 // index of the last entry fed
}

func newHarness() *harness { return &harness{FSM: New()} }

// applyAll applies commands and fails the test on any rejection; it returns
// the last index.
func (h *harness) applyAll(t *testing.T, cmds ...Command) uint64 {
	t.Helper()
	for _, c := range cmds {
		if r := h.apply(t, c); r.Err != nil {
			t.Fatalf("setup command %s at %d: %v", c.Type, r.Index, r.Err)
		}
	}
	return h.idx
}

// apply encodes c as JSON (not with Encode: tests send invalid commands too)
// and applies it at the next index.
func (h *harness) apply(t *testing.T, c Command) *Result {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	h.idx++
	r, ok := h.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: b}).(*Result)
	if !ok {
		t.Fatalf("Apply returned %T", r)
	}
	return r
}

func TestApply(t *testing.T) {
	base := []Command{reg(1, "a"), reg(2, "b"), reg(3, "c"), create("orders", 2, []int32{1, 2}, []int32{2, 3})}
	tests := []struct {
		name    string
		setup   []Command // applied after base
		cmd     Command
		wantErr error
		check   func(t *testing.T, f *FSM, r *Result)
	}{
		{name: "register new node gets epoch = index", cmd: reg(4, "d"), check: func(t *testing.T, f *FSM, r *Result) {
			n, ok := f.Node(4)
			if !ok || n.Epoch != int64(r.Index) || r.Epoch != n.Epoch || !n.Alive || n.Rack != "d" {
				t.Fatalf("node = %+v, result epoch %d, index %d", n, r.Epoch, r.Index)
			}
		}},
		{name: "re-register bumps epoch", cmd: reg(1, "a"), check: func(t *testing.T, f *FSM, r *Result) {
			if n, _ := f.Node(1); n.Epoch != int64(r.Index) || n.Epoch <= 1 {
				t.Fatalf("epoch = %d; want %d", n.Epoch, r.Index)
			}
		}},
		{name: "register negative id", cmd: Command{Type: TypeRegisterNode, RegisterNode: &RegisterNode{ID: -1, Addr: "x:1"}}, wantErr: ErrMalformedCommand},
		{name: "set dead with current epoch", cmd: Command{Type: TypeSetNodeAlive, SetNodeAlive: &SetNodeAlive{ID: 2, Epoch: 2, Alive: false}},
			check: func(t *testing.T, f *FSM, r *Result) {
				if n, _ := f.Node(2); n.Alive {
					t.Fatal("node 2 still alive")
				}
				if f.Version() != r.Index {
					t.Fatalf("version = %d; want %d", f.Version(), r.Index)
				}
			}},
		{name: "set dead with stale epoch", cmd: Command{Type: TypeSetNodeAlive, SetNodeAlive: &SetNodeAlive{ID: 2, Epoch: 1, Alive: false}}, wantErr: ErrStaleNodeEpoch},
		{name: "set alive on unknown node", cmd: Command{Type: TypeSetNodeAlive, SetNodeAlive: &SetNodeAlive{ID: 9, Epoch: 1, Alive: true}}, wantErr: ErrUnknownNode},
		{name: "set alive when alive is a no-op", cmd: Command{Type: TypeSetNodeAlive, SetNodeAlive: &SetNodeAlive{ID: 2, Epoch: 2, Alive: true}},
			check: func(t *testing.T, f *FSM, r *Result) {
				if f.Version() == r.Index {
					t.Fatal("a no-op changed the version")
				}
			}},
		{name: "create topic", cmd: create("logs", 3, []int32{3, 1, 2}), check: func(t *testing.T, f *FSM, r *Result) {
			want := cluster.Topic{Name: "logs", ReplicationFactor: 3, Config: map[string]string{},
				Partitions: []cluster.Partition{{ID: 0, Replicas: []int32{3, 1, 2}, Leader: 3, ISR: []int32{3, 1, 2}}}}
			got, _ := f.Topic("logs")
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(*r.Topic, want) {
				t.Fatalf("topic = %+v, result %+v; want %+v", got, *r.Topic, want)
			}
		}},
		{name: "create existing topic", cmd: create("orders", 1, []int32{1}), wantErr: ErrTopicExists},
		{name: "create with bad name", cmd: create("a/b", 1, []int32{1}), wantErr: ErrInvalidTopic},
		{name: "create with no partitions", cmd: create("t", 1), wantErr: ErrInvalidTopic},
		{name: "create with wrong replica count", cmd: create("t", 2, []int32{1}), wantErr: ErrInvalidTopic},
		{name: "create with duplicate replica", cmd: create("t", 2, []int32{1, 1}), wantErr: ErrInvalidTopic},
		{name: "create on unregistered node", cmd: create("t", 1, []int32{7}), wantErr: ErrInvalidTopic},
		{name: "create with bad config", cmd: Command{Type: TypeCreateTopic, CreateTopic: &CreateTopic{
			Name: "t", ReplicationFactor: 1, Replicas: [][]int32{{1}}, Config: map[string]string{"retention.ms": "soon"}}}, wantErr: ErrInvalidTopic},
		{name: "delete topic", cmd: Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "orders"}}, check: func(t *testing.T, f *FSM, r *Result) {
			if _, ok := f.Topic("orders"); ok {
				t.Fatal("topic still there")
			}
		}},
		{name: "delete unknown topic", cmd: Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "nope"}}, wantErr: ErrUnknownTopic},
		// Topic configuration changes.
		{name: "alter config sets and deletes keys and bumps the version",
			setup: []Command{{Type: TypeAlterTopicConfig, AlterTopicConfig: &AlterTopicConfig{Name: "orders", Set: map[string]string{"retention.ms": "1000", "segment.bytes": "4096"}}}},
			cmd:   Command{Type: TypeAlterTopicConfig, AlterTopicConfig: &AlterTopicConfig{Name: "orders", Set: map[string]string{"retention.bytes": "8192"}, Delete: []string{"segment.bytes"}}},
			check: func(t *testing.T, f *FSM, r *Result) {
				want := map[string]string{"retention.ms": "1000", "retention.bytes": "8192"}
				if tp, _ := f.Topic("orders"); !reflect.DeepEqual(tp.Config, want) || !reflect.DeepEqual(r.Topic.Config, want) {
					t.Fatalf("config = %v, result %v; want %v", tp.Config, r.Topic.Config, want)
				}
				if f.View().Version != r.Index {
					t.Fatalf("version %d, want the entry's index %d (storage nodes watch it)", f.View().Version, r.Index)
				}
			}},
		{name: "alter config to an invalid value", cmd: Command{Type: TypeAlterTopicConfig, AlterTopicConfig: &AlterTopicConfig{Name: "orders", Set: map[string]string{"retention.ms": "soon"}}}, wantErr: ErrInvalidConfig},
		{name: "alter config past the replication factor", cmd: Command{Type: TypeAlterTopicConfig, AlterTopicConfig: &AlterTopicConfig{Name: "orders", Set: map[string]string{"min.insync.replicas": "3"}}}, wantErr: ErrInvalidConfig},
		{name: "alter config of an unknown key", cmd: Command{Type: TypeAlterTopicConfig, AlterTopicConfig: &AlterTopicConfig{Name: "orders", Set: map[string]string{"colour": "blue"}}}, wantErr: ErrInvalidConfig},
		{name: "add partitions appends them, led by their first replica",
			cmd: Command{Type: TypeAddPartitions, AddPartitions: &AddPartitions{Name: "orders", From: 2, Replicas: [][]int32{{3, 1}, {1, 3}}}},
			check: func(t *testing.T, f *FSM, r *Result) {
				tp, _ := f.Topic("orders")
				want := cluster.Partition{ID: 3, Replicas: []int32{1, 3}, Leader: 1, ISR: []int32{1, 3}}
				if len(tp.Partitions) != 4 || !reflect.DeepEqual(tp.Partitions[3], want) || len(r.Topic.Partitions) != 4 {
					t.Fatalf("partitions = %+v", tp.Partitions)
				}
				if f.View().Version != r.Index {
					t.Fatalf("version %d, want %d", f.View().Version, r.Index)
				}
			}},
		{name: "add partitions from a stale count", cmd: Command{Type: TypeAddPartitions, AddPartitions: &AddPartitions{Name: "orders", From: 1, Replicas: [][]int32{{3, 1}}}}, wantErr: ErrStalePartitionCount},
		{name: "add partitions with the wrong replica count", cmd: Command{Type: TypeAddPartitions, AddPartitions: &AddPartitions{Name: "orders", From: 2, Replicas: [][]int32{{3}}}}, wantErr: ErrInvalidTopic},
		{name: "add partitions on an unregistered node", cmd: Command{Type: TypeAddPartitions, AddPartitions: &AddPartitions{Name: "orders", From: 2, Replicas: [][]int32{{3, 9}}}}, wantErr: ErrInvalidTopic},
		{name: "add no partitions", cmd: Command{Type: TypeAddPartitions, AddPartitions: &AddPartitions{Name: "orders", From: 2}}, wantErr: ErrInvalidTopic},
		{name: "add partitions to an unknown topic", cmd: Command{Type: TypeAddPartitions, AddPartitions: &AddPartitions{Name: "nope", From: 0, Replicas: [][]int32{{1, 2}}}}, wantErr: ErrUnknownTopic},
		{name: "alter config of an unknown topic", cmd: Command{Type: TypeAlterTopicConfig, AlterTopicConfig: &AlterTopicConfig{Name: "nope", Set: map[string]string{"retention.ms": "1"}}}, wantErr: ErrUnknownTopic},
		{name: "shrink ISR", cmd: update("orders", 0, 0, 0, 1, 1), check: func(t *testing.T, f *FSM, r *Result) {
			want := cluster.Partition{ID: 0, Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 0, ISR: []int32{1}, PartitionEpoch: 1}
			if !reflect.DeepEqual(*r.Partition, want) {
				t.Fatalf("partition = %+v; want %+v", *r.Partition, want)
			}
		}},
		{name: "new leader bumps leader epoch", cmd: update("orders", 1, 0, 0, 3, 3), check: func(t *testing.T, f *FSM, r *Result) {
			if r.Partition.Leader != 3 || r.Partition.LeaderEpoch != 1 || r.Partition.PartitionEpoch != 1 {
				t.Fatalf("partition = %+v", *r.Partition)
			}
		}},
		{name: "offline partition", cmd: update("orders", 1, 0, 0, -1, 2), check: func(t *testing.T, f *FSM, r *Result) {
			if r.Partition.Leader != -1 || r.Partition.LeaderEpoch != 1 {
				t.Fatalf("partition = %+v", *r.Partition)
			}
		}},
		{name: "update with stale leader epoch", cmd: update("orders", 0, 5, 0, 1, 1), wantErr: ErrFencedLeaderEpoch},
		{name: "update with stale partition epoch", cmd: update("orders", 0, 0, 3, 1, 1), wantErr: ErrStalePartitionEpoch},
		{name: "update leader outside ISR", cmd: update("orders", 0, 0, 0, 2, 1), wantErr: ErrInvalidPartitionState},
		{name: "update ISR outside replicas", cmd: update("orders", 0, 0, 0, 1, 1, 3), wantErr: ErrInvalidPartitionState},
		{name: "update unknown partition", cmd: update("orders", 9, 0, 0, 1, 1), wantErr: ErrUnknownPartition},
		{name: "update unknown topic", cmd: update("nope", 0, 0, 0, 1, 1), wantErr: ErrUnknownTopic},
		// Fencing and controlled shutdown.
		{name: "fence bumps the epoch and marks dead", cmd: fence(2, 2), check: func(t *testing.T, f *FSM, r *Result) {
			n, _ := f.Node(2)
			if n.Alive || n.Epoch != int64(r.Index) || r.Epoch != n.Epoch || f.Version() != r.Index {
				t.Fatalf("node = %+v, result %+v, version %d", n, r, f.Version())
			}
		}},
		{name: "fence with a stale epoch", cmd: fence(2, 1), wantErr: ErrStaleNodeEpoch},
		{name: "fence twice", setup: []Command{fence(2, 2)}, cmd: fence(2, 2), wantErr: ErrStaleNodeEpoch},
		{name: "fence unknown node", cmd: fence(9, 1), wantErr: ErrUnknownNode},
		{name: "fence ends a shutdown", setup: []Command{shutdown(1, 1)}, cmd: fence(1, 1), check: func(t *testing.T, f *FSM, r *Result) {
			if len(f.View().ShuttingDown) != 0 {
				t.Fatal("still shutting down")
			}
		}},
		{name: "shutdown marks the node", cmd: shutdown(1, 1), check: func(t *testing.T, f *FSM, r *Result) {
			if !f.View().ShuttingDown[1] || f.Version() != r.Index {
				t.Fatalf("view %+v, version %d", f.View().ShuttingDown, f.Version())
			}
		}},
		{name: "shutdown twice is a no-op", setup: []Command{shutdown(1, 1)}, cmd: shutdown(1, 1), check: func(t *testing.T, f *FSM, r *Result) {
			if f.Version() == r.Index {
				t.Fatal("a no-op changed the version")
			}
		}},
		{name: "shutdown with a stale epoch", cmd: shutdown(1, 7), wantErr: ErrStaleNodeEpoch},
		{name: "shutdown of a dead node", setup: []Command{{Type: TypeSetNodeAlive, SetNodeAlive: &SetNodeAlive{ID: 2, Epoch: 2}}},
			cmd: shutdown(2, 2), wantErr: ErrStaleNodeEpoch},
		{name: "shutdown of an unknown node", cmd: shutdown(9, 1), wantErr: ErrUnknownNode},
		{name: "registration ends a shutdown", setup: []Command{shutdown(1, 1)}, cmd: reg(1, "a"), check: func(t *testing.T, f *FSM, r *Result) {
			if len(f.View().ShuttingDown) != 0 {
				t.Fatal("still shutting down")
			}
		}},
		// AlterPartition, in the order of its checks.
		{name: "alter shrinks the ISR", cmd: alter(1, 1, 0, 0, 1), check: func(t *testing.T, f *FSM, r *Result) {
			want := cluster.Partition{ID: 0, Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 0, ISR: []int32{1}, PartitionEpoch: 1}
			if got, _ := f.Topic("orders"); !reflect.DeepEqual(*r.Partition, want) || !reflect.DeepEqual(got.Partitions[0], want) {
				t.Fatalf("partition = %+v; want %+v", *r.Partition, want)
			}
		}},
		{name: "alter adds an alive node", setup: []Command{alter(1, 1, 0, 0, 1)}, cmd: alter(1, 1, 0, 1, 1, 2), check: func(t *testing.T, f *FSM, r *Result) {
			if p := r.Partition; p.PartitionEpoch != 2 || p.LeaderEpoch != 0 || len(p.ISR) != 2 {
				t.Fatalf("partition = %+v", *p)
			}
		}},
		{name: "alter from an unknown node", cmd: alter(9, 1, 0, 0, 9), wantErr: ErrUnknownNode},
		{name: "alter with a stale node epoch", cmd: alter(1, 0, 0, 0, 1), wantErr: ErrStaleNodeEpoch},
		{name: "alter from a fenced leader", setup: []Command{fence(1, 1)}, cmd: alter(1, 1, 0, 0, 1), wantErr: ErrStaleNodeEpoch},
		{name: "alter of an unknown topic", cmd: Command{Type: TypeAlterPartition, AlterPartition: &AlterPartition{Topic: "nope", LeaderID: 1, NodeEpoch: 1, ISR: []int32{1}}}, wantErr: ErrUnknownTopic},
		{name: "alter of an unknown partition", cmd: Command{Type: TypeAlterPartition, AlterPartition: &AlterPartition{Topic: "orders", Partition: 5, LeaderID: 1, NodeEpoch: 1, ISR: []int32{1}}}, wantErr: ErrUnknownPartition},
		{name: "alter with a stale leader epoch", setup: []Command{update("orders", 0, 0, 0, 2, 1, 2)}, cmd: alter(2, 2, 0, 1, 2), wantErr: ErrFencedLeaderEpoch},
		{name: "alter from a node that is not the leader", cmd: alter(2, 2, 0, 0, 2), wantErr: ErrNotPartitionLeader},
		{name: "alter with a stale partition epoch", setup: []Command{alter(1, 1, 0, 0, 1)}, cmd: alter(1, 1, 0, 0, 1, 2), wantErr: ErrStalePartitionEpoch},
		{name: "alter to an ISR without the leader", cmd: alter(1, 1, 0, 0, 2), wantErr: ErrInvalidPartitionState},
		{name: "alter to an empty ISR", cmd: alter(1, 1, 0, 0), wantErr: ErrInvalidPartitionState},
		{name: "alter to an ISR outside the replicas", cmd: alter(1, 1, 0, 0, 1, 3), wantErr: ErrInvalidPartitionState},
		{name: "alter to an ISR with a duplicate", cmd: alter(1, 1, 0, 0, 1, 1), wantErr: ErrInvalidPartitionState},
		{name: "alter adds a dead node", setup: []Command{alter(1, 1, 0, 0, 1), fence(2, 2)}, cmd: alter(1, 1, 0, 1, 1, 2), wantErr: ErrIneligibleReplica},
		{name: "alter adds a shutting-down node", setup: []Command{alter(1, 1, 0, 0, 1), shutdown(2, 2)}, cmd: alter(1, 1, 0, 1, 1, 2), wantErr: ErrIneligibleReplica},
		{name: "alter may keep a dead member", setup: []Command{fence(2, 2)}, cmd: alter(1, 1, 0, 0, 2, 1), check: func(t *testing.T, f *FSM, r *Result) {
			if r.Partition.PartitionEpoch != 1 {
				t.Fatalf("partition = %+v", *r.Partition)
			}
		}},
		{name: "init cluster", cmd: Command{Type: TypeInitCluster, InitCluster: &InitCluster{ClusterID: "c1"}}, check: func(t *testing.T, f *FSM, r *Result) {
			if f.ClusterID() != "c1" {
				t.Fatalf("cluster id = %q", f.ClusterID())
			}
		}},
		{name: "unknown type", cmd: Command{Type: "explode"}, wantErr: ErrMalformedCommand},
		{name: "type without body", cmd: Command{Type: TypeDeleteTopic}, wantErr: ErrMalformedCommand},
		{name: "two bodies", cmd: Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "orders"}, InitCluster: &InitCluster{ClusterID: "x"}}, wantErr: ErrMalformedCommand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			h.applyAll(t, base...)
			h.applyAll(t, tc.setup...)
			f := h.FSM
			before := f.View()
			r := h.apply(t, tc.cmd)
			if tc.wantErr != nil {
				if !errors.Is(r.Err, tc.wantErr) {
					t.Fatalf("err = %v; want %v", r.Err, tc.wantErr)
				}
				if after := f.View(); !reflect.DeepEqual(before, after) {
					t.Fatalf("a rejected command changed the state:\n%+v\n%+v", before, after)
				}
				return
			}
			if r.Err != nil {
				t.Fatalf("err = %v", r.Err)
			}
			if tc.check != nil {
				tc.check(t, f, r)
			}
		})
	}
}

func TestApplyGarbageBytes(t *testing.T) {
	f := New()
	for _, b := range [][]byte{nil, []byte("{"), []byte(`{"type":"create_topic","create_topic":{"replicas":"x"}}`), []byte("[]")} {
		r := f.Apply(&raft.Log{Index: 1, Data: b}).(*Result)
		if !errors.Is(r.Err, ErrMalformedCommand) {
			t.Errorf("Apply(%q) err = %v; want ErrMalformedCommand", b, r.Err)
		}
	}
	if f.Version() != 0 {
		t.Fatalf("version = %d after garbage", f.Version())
	}
}

func TestReadersGetCopies(t *testing.T) {
	h := newHarness()
	h.applyAll(t, reg(1, ""), reg(2, ""), create("t", 2, []int32{1, 2}))
	f := h.FSM
	tp, _ := f.Topic("t")
	tp.Partitions[0].ISR[0] = 99
	tp.Config["x"] = "y"
	snap := f.Cluster()
	snap.Topics[0].Partitions[0].Replicas[0] = 99
	again, _ := f.Topic("t")
	if again.Partitions[0].ISR[0] != 1 || again.Partitions[0].Replicas[0] != 1 || len(again.Config) != 0 {
		t.Fatalf("state changed through a copy: %+v", again)
	}
}

func TestWaitNewer(t *testing.T) {
	h := newHarness()
	f := h.FSM
	v := h.applyAll(t, reg(1, ""))
	// Already newer: returns at once.
	if got, err := f.WaitNewer(context.Background(), v-1); err != nil || got != v {
		t.Fatalf("WaitNewer(v-1) = %d, %v", got, err)
	}
	// Not newer: times out.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.WaitNewer(ctx, v); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitNewer(v) without change = %v; want deadline", err)
	}
	// A change wakes a waiter.
	done := make(chan uint64)
	go func() {
		got, _ := f.WaitNewer(context.Background(), v)
		done <- got
	}()
	v2 := h.applyAll(t, reg(2, ""))
	select {
	case got := <-done:
		if got != v2 {
			t.Fatalf("woke at %d; want %d", got, v2)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watcher not woken by a change")
	}
}

func TestReRegistrationBouncesLeaderEpochs(t *testing.T) {
	h := newHarness()
	h.applyAll(t, reg(1, ""), reg(2, ""), create("orders", 2, []int32{1, 2}, []int32{2, 1}))
	before, _ := h.Topic("orders")
	// Node 1 restarts (registers again) before its session expired.
	h.applyAll(t, reg(1, ""))
	after, _ := h.Topic("orders")
	p0, q0 := before.Partitions[0], after.Partitions[0]
	if q0.Leader != 1 || q0.LeaderEpoch != p0.LeaderEpoch+1 || q0.PartitionEpoch != p0.PartitionEpoch+1 {
		t.Fatalf("partition led by the restarted node: %+v -> %+v", p0, q0)
	}
	if p1, q1 := before.Partitions[1], after.Partitions[1]; !reflect.DeepEqual(p1, q1) {
		t.Fatalf("partition led by another node changed: %+v -> %+v", p1, q1)
	}
}

// TestRestartedNodeLeavesISRs: a node that registers again (LeavesISRs)
// leaves the ISRs where another alive member remains and hands its
// leaderships to them; where it is the last one it stays and its leadership
// gets a new epoch; partitions it is not in are untouched.
func TestRestartedNodeLeavesISRs(t *testing.T) {
	h := newHarness()
	h.applyAll(t, reg(1, ""), reg(2, ""), reg(3, ""),
		create("orders", 2, []int32{1, 2}, []int32{2, 1}, []int32{1, 3}, []int32{2, 3}))
	// Partition 2's other member is dead: node 1 is its only alive one.
	n3, _ := h.Node(3)
	h.applyAll(t, fence(3, n3.Epoch))
	before, _ := h.Topic("orders")
	again := reg(1, "")
	again.RegisterNode.LeavesISRs, again.RegisterNode.Fresh = true, []int32{2, 3}
	h.applyAll(t, again)
	after, _ := h.Topic("orders")
	want := []struct {
		leader   int32
		isr      []int32
		epochs   int32 // leader epoch added
		versions int32 // partition epoch added
	}{
		{2, []int32{2}, 1, 1}, // led: node 2 takes over
		{2, []int32{2}, 0, 1}, // followed: node 1 leaves the ISR
		{1, []int32{1, 3}, 1, 1},
		{2, []int32{2, 3}, 0, 0}, // not a replica
	}
	for i, w := range want {
		p, q := before.Partitions[i], after.Partitions[i]
		if q.Leader != w.leader || !slices.Equal(q.ISR, w.isr) || q.LeaderEpoch != p.LeaderEpoch+w.epochs || q.PartitionEpoch != p.PartitionEpoch+w.versions {
			t.Errorf("partition %d: %+v -> %+v; want leader %d, ISR %v, leader epoch +%d, partition epoch +%d", i, p, q, w.leader, w.isr, w.epochs, w.versions)
		}
	}
	// Node 2 registers again while the controller heard from no one else
	// lately (the whole cluster restarting): it stays in its ISRs, and what it
	// leads gets a new leader epoch, as without LeavesISRs.
	before = after
	again = reg(2, "")
	again.RegisterNode.LeavesISRs = true
	h.applyAll(t, again)
	after, _ = h.Topic("orders")
	for i, p := range before.Partitions {
		q := after.Partitions[i]
		bump := int32(0)
		if p.Leader == 2 {
			bump = 1
		}
		if q.Leader != p.Leader || !slices.Equal(q.ISR, p.ISR) || q.LeaderEpoch != p.LeaderEpoch+bump {
			t.Errorf("partition %d with no fresh member: %+v -> %+v; want the ISR kept", i, p, q)
		}
	}
}
