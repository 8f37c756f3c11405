package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/cluster"
)

// FuzzApply feeds the FSM a log of arbitrary entries, one per line, as raft
// would: whatever the bytes, Apply answers with a *Result (never panics), a
// rejected entry changes nothing, and the model stays consistent.
func FuzzApply(f *testing.F) {
	seed := func(cmds ...Command) []byte {
		var b bytes.Buffer
		for _, c := range cmds {
			line, err := json.Marshal(c)
			if err != nil {
				f.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		return b.Bytes()
	}
	f.Add(seed(reg(1, "a"), reg(2, "b"), reg(3, ""), create("t", 2, []int32{1, 2}, []int32{2, 3}), update("t", 0, 0, 0, 2, 2),
		alter(2, 2, 1, 1, 2, 1), fence(3, 3), shutdown(1, 1)))
	f.Add(seed(reg(1, ""), reg(2, ""), reg(3, ""), reg(4, ""), create("t", 3, []int32{1, 2, 3}), reassign("t", 0, 4, 2, 3),
		update("t", 0, 0, 1, 1, 1, 2, 3, 4), endReassign("t", 0, true), reassign("t", 0, 1, 2, 3), endReassign("t", 0, false),
		Command{Type: TypeDecommissionNode, DecommissionNode: &DecommissionNode{ID: 2, Decommissioned: true}}))
	f.Add(seed(Command{Type: TypeInitCluster, InitCluster: &InitCluster{ClusterID: "c"}}, allocIDs(5),
		Command{Type: TypeAlterTopicConfig, AlterTopicConfig: &AlterTopicConfig{Name: "t", Set: map[string]string{"retention.ms": "-1"}}},
		Command{Type: TypeAddPartitions, AddPartitions: &AddPartitions{Name: "t", From: 1, Replicas: [][]int32{{1}}}},
		Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "t"}},
		setQuota(cluster.Quota{ClientID: "etl", ProduceBytesPerSec: 10}), setQuota(cluster.Quota{FetchBytesPerSec: -3})))
	f.Add(seed(principal("alice", strings.Repeat("a", 64), false), acl("alice", "t", cluster.OpProduce, false), acl("bob", "*", cluster.OpConsume, false),
		principal("root", strings.Repeat("a", 64), true), Command{Type: TypeSetPrincipal, SetPrincipal: &SetPrincipal{Principal: cluster.Principal{Name: "alice"}, Delete: true}}))
	// Tiered storage: t-0 led by node 1 at node epoch 1, t-1 by node 2.
	l0, l1 := by("t", 0, 1, 1, 0), by("t", 1, 2, 2, 0)
	f.Add(seed(reg(1, ""), reg(2, ""), create("t", 2, []int32{1, 2}, []int32{2, 1}),
		addSeg(l0, seg("a", 0, 10)), addSeg(l0, seg("b", 10, 20)), addSeg(l0, seg("b", 10, 20)), addSeg(l0, seg("c", 21, 30)),
		addSeg(l1, seg("x", 5, 6)), dropBelow(l0, 10), dropBelow(l1, 3), update("t", 0, 0, 0, 2, 2, 1), addSeg(l0, seg("c", 20, 30)),
		addSeg(by("t", 0, 2, 2, 1), seg("c", 20, 30)), Command{Type: TypeDeleteTopic, DeleteTopic: &DeleteTopic{Name: "t"}},
		clearGarbage("t", 0, "b"), clearGarbage("t", 1, "x", "y")))
	f.Add([]byte("{\"type\":\"create_topic\",\"create_topic\":{\"name\":\"x\",\"replicas\":[[1,1]]}}\n{\"type\":\"nope\"}\n\xff"))
	f.Fuzz(func(t *testing.T, log []byte) {
		fsm := New()
		for i, entry := range bytes.Split(log, []byte("\n")) {
			before, beforeRemote := fsm.View(), remoteState(fsm)
			r, ok := fsm.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: entry}).(*Result)
			if !ok {
				t.Fatalf("entry %d: Apply did not return a *Result", i)
			}
			after := fsm.View()
			if r.Err != nil && (!sameModel(before, after) || remoteState(fsm) != beforeRemote) {
				t.Fatalf("entry %d (%q) was rejected (%v) but changed the state", i, entry, r.Err)
			}
			if err := consistent(after); err != nil {
				t.Fatalf("entry %d (%q): %v", i, entry, err)
			}
			if err := consistentRemote(fsm, after); err != nil {
				t.Fatalf("entry %d (%q): %v", i, entry, err)
			}
		}
	})
}

// remoteState is the FSM's remote logs and garbage as JSON, every field
// included (the model's summaries are in View).
func remoteState(f *FSM) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, _ := json.Marshal([][]cluster.RemoteLog{remoteLogs(f.st.remote, f.st.remoteStart), remoteLogs(f.st.remoteGarbage, nil)})
	return string(b)
}

// consistentRemote checks the remote logs' invariants against the model:
// each is a partition's, not empty, well formed and without gaps, and the
// partition's summary is its.
func consistentRemote(f *FSM, v View) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for k, log := range f.st.remote {
		t, ok := v.Topic(k.topic)
		if !ok || k.partition < 0 || int(k.partition) >= len(t.Partitions) {
			return fmt.Errorf("remote log of %s-%d, which does not exist", k.topic, k.partition)
		}
		if len(log) == 0 {
			return fmt.Errorf("empty remote log of %s-%d kept", k.topic, k.partition)
		}
		for i := range log {
			if err := checkRemoteSegment(&log[i], math.MaxInt32); err != nil {
				return err
			}
			if i > 0 && log[i].BaseOffset != log[i-1].EndOffset {
				return fmt.Errorf("remote log of %s-%d has a gap: %+v", k.topic, k.partition, log)
			}
		}
		if start, ok := f.st.remoteStart[k]; ok && (start <= log[0].BaseOffset || start >= log[0].EndOffset) {
			return fmt.Errorf("remote log of %s-%d starts at %d, outside its first segment %+v", k.topic, k.partition, start, log[0])
		}
	}
	for k := range f.st.remoteStart {
		if len(f.st.remote[k]) == 0 {
			return fmt.Errorf("start of %s-%d kept without a remote log", k.topic, k.partition)
		}
	}
	for _, t := range v.Topics {
		for i, p := range t.Partitions {
			k := partitionKey{t.Name, int32(i)}
			if want := summarize(f.st.remote[k], f.st.remoteStart[k]); !reflect.DeepEqual(p.Remote, want) {
				return fmt.Errorf("%s-%d: summary %+v; its remote log's is %+v", t.Name, i, p.Remote, want)
			}
		}
	}
	return nil
}

// sameModel compares two views by their JSON, which covers every field.
func sameModel(a, b View) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// consistent checks the invariants every state must keep.
func consistent(v View) error {
	nodes := map[int32]bool{}
	for _, n := range v.Nodes {
		nodes[n.ID] = true
	}
	for _, t := range v.Topics {
		for i, p := range t.Partitions {
			name := fmt.Sprintf("%s-%d", t.Name, i)
			if p.ID != int32(i) {
				return fmt.Errorf("%s has id %d", name, p.ID)
			}
			for j, id := range p.Replicas {
				if !nodes[id] || slices.Contains(p.Replicas[:j], id) {
					return fmt.Errorf("%s: replicas %v name an unknown node or one twice", name, p.Replicas)
				}
			}
			if err := validPartitionState(p.Replicas, p.Leader, p.ISR); err != nil {
				return fmt.Errorf("%s: %w (%+v)", name, err, p)
			}
			if p.Reassigning() {
				if len(p.TargetReplicas) != t.ReplicationFactor || len(p.AddingReplicas) == 0 {
					return fmt.Errorf("%s: reassignment %+v", name, p)
				}
				for _, id := range append(slices.Clone(p.TargetReplicas), p.AddingReplicas...) {
					if !slices.Contains(p.Replicas, id) {
						return fmt.Errorf("%s: reassignment names %d outside the replicas %v", name, id, p.Replicas)
					}
				}
			} else if len(p.Replicas) != t.ReplicationFactor || len(p.AddingReplicas) > 0 {
				return fmt.Errorf("%s: %d replicas, replication factor %d", name, len(p.Replicas), t.ReplicationFactor)
			}
		}
	}
	return nil
}
