package api

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// beats heartbeats storage nodes every 100ms through a client, as storage
// nodes would, until the test ends. Nodes not in it go silent.
type beats struct {
	c      *cluster.Client
	mu     sync.Mutex
	epochs map[int32]int64 // nodes kept alive and their epochs; guarded by mu
	stop   chan struct{}
	done   chan struct{}
}

func startBeats(t *testing.T, c *cluster.Client) *beats {
	t.Helper()
	b := &beats{c: c, epochs: map[int32]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	t.Cleanup(func() { close(b.stop); <-b.done })
	return b
}

func (b *beats) run() {
	defer close(b.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		b.mu.Lock()
		epochs := make(map[int32]int64, len(b.epochs))
		for id, e := range b.epochs {
			epochs[id] = e
		}
		b.mu.Unlock()
		for id, e := range epochs {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = b.c.Heartbeat(ctx, cluster.HeartbeatRequest{ID: id, Epoch: e})
			cancel()
		}
	}
}

func (b *beats) set(id int32, epoch int64) {
	b.mu.Lock()
	b.epochs[id] = epoch
	b.mu.Unlock()
}

func (b *beats) drop(id int32) {
	b.mu.Lock()
	delete(b.epochs, id)
	b.mu.Unlock()
}

// registerAll registers storage nodes and keeps them heartbeating; it
// returns their epochs by id.
func registerAll(t *testing.T, c *cluster.Client, b *beats, ids ...int32) map[int32]int64 {
	t.Helper()
	epochs := map[int32]int64{}
	for _, id := range ids {
		epochs[id] = registerOne(t, c, b, id)
	}
	return epochs
}

func registerOne(t *testing.T, c *cluster.Client, b *beats, id int32) int64 {
	t.Helper()
	e, err := c.Register(context.Background(), cluster.RegisterRequest{ID: id, Addr: "127.0.0.1:" + string(rune('0'+id%10)) + "900"})
	if err != nil {
		t.Fatalf("register node %d: %v", id, err)
	}
	b.set(id, e)
	return e
}

// partitionOf reads one partition with a linearizable describe.
func partitionOf(t *testing.T, c *cluster.Client, topic string, id int32) cluster.Partition {
	t.Helper()
	tp, err := c.DescribeTopic(context.Background(), topic)
	if err != nil {
		t.Fatalf("describe %s: %v", topic, err)
	}
	return tp.Partitions[id]
}

// nodeOf reads one storage node from a linearizable snapshot.
func nodeOf(t *testing.T, c *cluster.Client, id int32) cluster.Node {
	t.Helper()
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n, ok := s.Node(id)
	if !ok {
		t.Fatalf("node %d not registered", id)
	}
	return *n
}

// waitDead waits until the controller fenced node id.
func waitDead(t *testing.T, c *cluster.Client, id int32) cluster.Node {
	t.Helper()
	var n cluster.Node
	testkit.WaitFor(t, 15*time.Second, "node to be fenced", func() bool {
		n = nodeOf(t, c, id)
		return !n.Alive
	})
	return n
}

// shrink has the leader of topic-id shrink its ISR to isr.
func shrink(t *testing.T, c *cluster.Client, epochs map[int32]int64, topic string, id int32, isr ...int32) cluster.Partition {
	t.Helper()
	p := partitionOf(t, c, topic, id)
	np, err := c.AlterPartition(context.Background(), cluster.AlterPartitionRequest{Topic: topic, Partition: id, LeaderID: p.Leader,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NodeEpoch: epochs[p.Leader], ISR: isr})
	if err != nil {
		t.Fatalf("shrink %s-%d to %v: %v", topic, id, isr, err)
	}
	return *np
}

func without(ids []int32, drop ...int32) []int32 {
	var out []int32
	for _, id := range ids {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

func TestAlterPartitionThroughTheAPI(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{sessionTimeout: time.Second})[0]
	c := client(m)
	ctx := context.Background()
	b := startBeats(t, c)
	epochs := registerAll(t, c, b, 1, 2, 3)
	tp, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	leader, f1, f2 := p.Replicas[0], p.Replicas[1], p.Replicas[2]

	// Accepted with the current epochs: partition epoch +1, leader epoch kept.
	np, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", LeaderID: leader, NodeEpoch: epochs[leader],
		LeaderEpoch: 0, PartitionEpoch: 0, ISR: []int32{leader, f1}})
	if err != nil {
		t.Fatal(err)
	}
	if np.Leader != leader || np.LeaderEpoch != 0 || np.PartitionEpoch != 1 || !slices.Equal(np.ISR, []int32{leader, f1}) {
		t.Fatalf("altered partition = %+v", np)
	}
	if got := partitionOf(t, c, "orders", 0); !slices.Equal(got.ISR, np.ISR) || got.PartitionEpoch != 1 {
		t.Fatalf("described partition = %+v; want %+v", got, np)
	}

	// Rejections, each with its wire code; the state is now at leader epoch
	// 0, partition epoch 1.
	cur := cluster.AlterPartitionRequest{Topic: "orders", LeaderID: leader, NodeEpoch: epochs[leader], LeaderEpoch: 0, PartitionEpoch: 1, ISR: []int32{leader}}
	rejects := []struct {
		name   string
		edit   func(r *cluster.AlterPartitionRequest)
		code   protocol.Code
		reason string
	}{
		{"stale node epoch", func(r *cluster.AlterPartitionRequest) { r.NodeEpoch-- }, protocol.StaleBrokerEpoch, "epoch"},
		{"stale leader epoch", func(r *cluster.AlterPartitionRequest) { r.LeaderEpoch = 7 }, protocol.FencedLeaderEpoch, "leader epoch"},
		{"stale partition epoch", func(r *cluster.AlterPartitionRequest) { r.PartitionEpoch = 0 }, protocol.InvalidUpdateVersion, "partition epoch"},
		{"not the leader", func(r *cluster.AlterPartitionRequest) { r.LeaderID, r.NodeEpoch, r.ISR = f1, epochs[f1], []int32{f1} },
			protocol.InvalidRequest, "does not lead"},
		{"ISR without the leader", func(r *cluster.AlterPartitionRequest) { r.ISR = []int32{f1} }, protocol.InvalidRequest, "not in the ISR"},
		{"empty ISR", func(r *cluster.AlterPartitionRequest) { r.ISR = nil }, protocol.InvalidRequest, "not in the ISR"},
		{"ISR outside the replicas", func(r *cluster.AlterPartitionRequest) { r.ISR = []int32{leader, 9} }, protocol.InvalidRequest, "not a replica"},
		{"unknown topic", func(r *cluster.AlterPartitionRequest) { r.Topic = "nope" }, protocol.UnknownTopicOrPartition, "nope"},
		{"unknown partition", func(r *cluster.AlterPartitionRequest) { r.Partition = 3 }, protocol.UnknownTopicOrPartition, "orders-3"},
		{"unknown node", func(r *cluster.AlterPartitionRequest) { r.LeaderID = 42 }, protocol.UnknownNode, "42"},
	}
	for _, rj := range rejects {
		t.Run(rj.name, func(t *testing.T) {
			req := cur
			rj.edit(&req)
			_, err := c.AlterPartition(ctx, req)
			wantCode(t, err, rj.code)
			if !strings.Contains(err.Error(), rj.reason) {
				t.Fatalf("error %q does not say %q", err, rj.reason)
			}
		})
	}
	if got := partitionOf(t, c, "orders", 0); got.PartitionEpoch != 1 {
		t.Fatalf("a rejected request changed the partition: %+v", got)
	}

	checkAlterStatuses(t, "http://"+m.http+"/v1/partitions/alter", cur, f1)

	// Adding a dead node is refused with the reason; once it registered
	// again it may join.
	b.drop(f2)
	waitDead(t, c, f2)
	add := cur
	add.ISR = []int32{leader, f1, f2}
	_, err = c.AlterPartition(ctx, add)
	wantCode(t, err, protocol.InvalidRequest)
	if !strings.Contains(err.Error(), "not alive") {
		t.Fatalf("error %q does not say the node is not alive", err)
	}
	epochs[f2] = registerOne(t, c, b, f2)
	np, err = c.AlterPartition(ctx, add)
	if err != nil || np.PartitionEpoch != 2 || !slices.Equal(np.ISR, add.ISR) {
		t.Fatalf("adding the returned node = %+v, %v", np, err)
	}
}

// checkAlterStatuses checks the HTTP status and code of rejected alters:
// stale registrations and partition epochs are conflicts (409), a fenced
// leader epoch is retriable (503, as everywhere), bad requests 400, unknown
// topics 404. cur is a request that would apply; f1 a follower.
func checkAlterStatuses(t *testing.T, base string, cur cluster.AlterPartitionRequest, f1 int32) {
	t.Helper()
	for _, s := range []struct {
		edit   func(r *cluster.AlterPartitionRequest)
		status int
		code   protocol.Code
	}{
		{func(r *cluster.AlterPartitionRequest) { r.NodeEpoch-- }, 409, protocol.StaleBrokerEpoch},
		{func(r *cluster.AlterPartitionRequest) { r.LeaderEpoch = 7 }, 503, protocol.FencedLeaderEpoch},
		{func(r *cluster.AlterPartitionRequest) { r.PartitionEpoch = 0 }, 409, protocol.InvalidUpdateVersion},
		{func(r *cluster.AlterPartitionRequest) { r.ISR = []int32{f1} }, 400, protocol.InvalidRequest},
		{func(r *cluster.AlterPartitionRequest) { r.Topic = "nope" }, 404, protocol.UnknownTopicOrPartition},
	} {
		req := cur
		s.edit(&req)
		body, _ := json.Marshal(req)
		if status, eb := rawDo(t, "POST", base, body); status != s.status || protocol.Code(eb.ErrorCode) != s.code {
			t.Errorf("POST %s: HTTP %d code %d (%s); want %d code %d", body, status, eb.ErrorCode, eb.Error, s.status, s.code)
		}
	}
	if status, eb := rawDo(t, "POST", base, []byte("{")); status != 400 || protocol.Code(eb.ErrorCode) != protocol.InvalidRequest {
		t.Errorf("bad JSON: HTTP %d %+v", status, eb)
	}
}

func TestNodeExpiryFencesAndElects(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{sessionTimeout: time.Second})[0]
	c := client(m)
	ctx := context.Background()
	b := startBeats(t, c)
	epochs := registerAll(t, c, b, 1, 2, 3)
	orders, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "clean", Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "dirty", Partitions: 1, ReplicationFactor: 3,
		Config: map[string]string{cluster.ConfigUncleanElection: "true"}}); err != nil {
		t.Fatal(err)
	}
	// "clean" and "dirty" keep only their leader in the ISR, the same node
	// (moved there with a raw UpdatePartition, as a controller would), and
	// that node dies.
	clean := shrink(t, c, epochs, "clean", 0, partitionOf(t, c, "clean", 0).Leader)
	victim := clean.Leader
	d := partitionOf(t, c, "dirty", 0)
	res, err := m.node.Apply(ctx, fsm.Command{Type: fsm.TypeUpdatePartition, UpdatePartition: &fsm.UpdatePartition{
		Topic: "dirty", LeaderEpoch: d.LeaderEpoch, PartitionEpoch: d.PartitionEpoch, Leader: victim, ISR: []int32{victim}}})
	if err != nil || res.Err != nil {
		t.Fatalf("moving dirty-0 to node %d: %v %v", victim, err, res.Err)
	}
	dirty := *res.Partition
	victims := []int32{victim}
	for _, v := range victims {
		b.drop(v)
	}
	for _, v := range victims {
		n := waitDead(t, c, v)
		if n.Epoch <= epochs[v] {
			t.Fatalf("dead node %d kept epoch %d (registered at %d): not fenced", v, n.Epoch, epochs[v])
		}
		// Fenced: the old epoch is refused everywhere.
		wantCode(t, c.Heartbeat(ctx, cluster.HeartbeatRequest{ID: v, Epoch: epochs[v]}), protocol.StaleBrokerEpoch)
		_, err := c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: v, Epoch: epochs[v]})
		wantCode(t, err, protocol.StaleBrokerEpoch)
	}
	_, err = c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "clean", LeaderID: clean.Leader, NodeEpoch: epochs[clean.Leader],
		LeaderEpoch: clean.LeaderEpoch, PartitionEpoch: clean.PartitionEpoch, ISR: clean.ISR})
	wantCode(t, err, protocol.StaleBrokerEpoch)

	checkElected(t, c, orders, victims)
	// "clean": the last ISR member is kept, the partition is offline.
	testkit.WaitFor(t, 10*time.Second, "clean-0 offline", func() bool { return partitionOf(t, c, "clean", 0).Leader == -1 })
	if p := partitionOf(t, c, "clean", 0); !slices.Equal(p.ISR, clean.ISR) || p.LeaderEpoch != clean.LeaderEpoch+1 || p.PartitionEpoch != clean.PartitionEpoch+1 {
		t.Fatalf("clean-0 = %+v; want ISR %v kept, leader epoch %d", p, clean.ISR, clean.LeaderEpoch+1)
	}
	// "dirty" allows unclean election: a live replica outside the ISR leads
	// alone.
	testkit.WaitFor(t, 10*time.Second, "unclean election of dirty-0", func() bool { return partitionOf(t, c, "dirty", 0).Leader != dirty.Leader })
	survivor := without(dirty.Replicas, victims...)[0]
	if p := partitionOf(t, c, "dirty", 0); p.Leader != survivor || !slices.Equal(p.ISR, []int32{survivor}) || p.LeaderEpoch != dirty.LeaderEpoch+1 {
		t.Fatalf("dirty-0 = %+v; want %d leading alone", p, survivor)
	}

	// The victims register again: clean-0 gets its last ISR member back as
	// leader (leader epoch +1); nobody is put back into an ISR.
	for _, v := range victims {
		epochs[v] = registerOne(t, c, b, v)
	}
	testkit.WaitFor(t, 10*time.Second, "clean-0 back online", func() bool { return partitionOf(t, c, "clean", 0).Leader == clean.Leader })
	if p := partitionOf(t, c, "clean", 0); p.LeaderEpoch != clean.LeaderEpoch+2 || !slices.Equal(p.ISR, clean.ISR) {
		t.Fatalf("clean-0 after its leader returned = %+v", p)
	}
	for i, p := range mustDescribe(t, c, "orders").Partitions {
		for _, v := range victims {
			if slices.Contains(p.ISR, v) {
				t.Errorf("orders-%d: returning node %d put back into the ISR %v", i, v, p.ISR)
			}
		}
	}
	if p := partitionOf(t, c, "dirty", 0); p.Leader != survivor || !slices.Equal(p.ISR, []int32{survivor}) {
		t.Fatalf("dirty-0 changed when the old leader returned: %+v", p)
	}
}

// checkElected waits until no partition of topic (created with a full ISR)
// names a victim as leader or ISR member, and checks the elections: a dead
// leader is replaced by the first live ISR replica in replica order, with
// leader epoch +1; the dead leave every ISR; one change per partition.
func checkElected(t *testing.T, c *cluster.Client, before *cluster.Topic, victims []int32) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "elections in "+before.Name, func() bool {
		for _, p := range mustDescribe(t, c, before.Name).Partitions {
			if slices.Contains(victims, p.Leader) || len(without(p.ISR, victims...)) != len(p.ISR) {
				return false
			}
		}
		return true
	})
	for i, p := range mustDescribe(t, c, before.Name).Partitions {
		old := before.Partitions[i]
		wantISR := without(old.ISR, victims...)
		wantLeader, wantEpoch := old.Leader, old.LeaderEpoch
		if slices.Contains(victims, old.Leader) {
			wantLeader, wantEpoch = without(old.Replicas, victims...)[0], old.LeaderEpoch+1
		}
		if p.Leader != wantLeader || p.LeaderEpoch != wantEpoch || !slices.Equal(p.ISR, wantISR) || p.PartitionEpoch != old.PartitionEpoch+1 {
			t.Errorf("%s-%d = %+v; want leader %d, leader epoch %d, ISR %v, partition epoch %d",
				before.Name, i, p, wantLeader, wantEpoch, wantISR, old.PartitionEpoch+1)
		}
	}
}

func mustDescribe(t *testing.T, c *cluster.Client, topic string) *cluster.Topic {
	t.Helper()
	tp, err := c.DescribeTopic(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func TestControlledShutdownThroughTheAPI(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{sessionTimeout: time.Second})[0]
	c := client(m)
	ctx := context.Background()
	b := startBeats(t, c)
	epochs := registerAll(t, c, b, 1, 2, 3)
	orders, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "solo", Partitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	x := partitionOf(t, c, "solo", 0).Leader
	solo := shrink(t, c, epochs, "solo", 0, x) // x is its only ISR member

	_, err = c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: x, Epoch: epochs[x] - 1})
	wantCode(t, err, protocol.StaleBrokerEpoch)
	_, err = c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: 77, Epoch: 1})
	wantCode(t, err, protocol.UnknownNode)

	remaining, err := c.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: x, Epoch: epochs[x]})
	if err != nil || remaining != 1 {
		t.Fatalf("controlled shutdown = %d, %v; want 1 (solo-0)", remaining, err)
	}
	for i, p := range mustDescribe(t, c, "orders").Partitions {
		old := orders.Partitions[i]
		wantLeader, wantEpoch := old.Leader, old.LeaderEpoch
		if old.Leader == x {
			wantLeader, wantEpoch = without(old.Replicas, x)[0], old.LeaderEpoch+1
		}
		if p.Leader != wantLeader || p.LeaderEpoch != wantEpoch || !slices.Equal(p.ISR, without(old.ISR, x)) {
			t.Errorf("orders-%d after the shutdown of %d = %+v; want leader %d at epoch %d, ISR %v", i, x, p, wantLeader, wantEpoch, without(old.ISR, x))
		}
	}
	if p := partitionOf(t, c, "solo", 0); p.Leader != x || p.PartitionEpoch != solo.PartitionEpoch {
		t.Fatalf("solo-0 = %+v; want it untouched, led by %d", p, x)
	}

	// A leader cannot take the leaving node back into its ISR.
	p0 := partitionOf(t, c, "orders", 0)
	_, err = c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", LeaderID: p0.Leader, NodeEpoch: epochs[p0.Leader],
		LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, ISR: append(slices.Clone(p0.ISR), x)})
	wantCode(t, err, protocol.InvalidRequest)
	if !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("error %q does not say the node is shutting down", err)
	}

	// The node exits; when its session expires solo-0 goes offline and keeps
	// it as the last ISR member.
	b.drop(x)
	waitDead(t, c, x)
	testkit.WaitFor(t, 10*time.Second, "solo-0 offline", func() bool { return partitionOf(t, c, "solo", 0).Leader == -1 })
	if p := partitionOf(t, c, "solo", 0); !slices.Equal(p.ISR, []int32{x}) {
		t.Fatalf("solo-0 = %+v; want ISR [%d] kept", p, x)
	}
}

func TestPreferredLeaderReturns(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{sessionTimeout: time.Second, preferredInterval: 100 * time.Millisecond})[0]
	c := client(m)
	ctx := context.Background()
	b := startBeats(t, c)
	epochs := registerAll(t, c, b, 1, 2, 3)
	tp, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	pref, next := tp.Partitions[0].Replicas[0], tp.Partitions[0].Replicas[1]

	b.drop(pref)
	testkit.WaitFor(t, 15*time.Second, "leadership to leave the dead preferred replica", func() bool {
		return partitionOf(t, c, "orders", 0).Leader == next
	})
	epochs[pref] = registerOne(t, c, b, pref)
	// Back, but not in the ISR: it stays a follower until the leader adds it.
	p := partitionOf(t, c, "orders", 0)
	if p.Leader != next || p.LeaderEpoch != 1 || slices.Contains(p.ISR, pref) {
		t.Fatalf("after the preferred replica registered again: %+v", p)
	}
	np, err := c.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", LeaderID: next, NodeEpoch: epochs[next],
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: append(slices.Clone(p.ISR), pref)})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the preferred leader back", func() bool { return partitionOf(t, c, "orders", 0).Leader == pref })
	if p := partitionOf(t, c, "orders", 0); p.LeaderEpoch != 2 || !slices.Equal(p.ISR, np.ISR) || p.PartitionEpoch != np.PartitionEpoch+1 {
		t.Fatalf("after the preferred leader election: %+v; want leader epoch 2, ISR %v", p, np.ISR)
	}
}

// TestThreeMembersKeepReplicationState builds fenced nodes, a controlled
// shutdown and ISR changes through a follower, checks that a raft snapshot
// restores exactly that state, and that it all survives the loss of the
// metadata leader: the new leader decides from it as the old one did.
func TestThreeMembersKeepReplicationState(t *testing.T) {
	ms := startCluster(t, 3, clusterOpts{sessionTimeout: time.Second})
	ctx := context.Background()
	lead := leader(ms)
	var follower *member
	var rest []*member
	for _, m := range ms {
		if m != lead {
			follower = m
			rest = append(rest, m)
		}
	}
	fc := client(follower) // writes are relayed to the leader
	b := startBeats(t, client(ms...))
	epochs := registerAll(t, fc, b, 1, 2, 3, 4)
	orders, err := fc.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "orders", Partitions: 2, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}

	// An ISR change through the follower, and a stale one.
	p0 := orders.Partitions[0]
	alter0 := cluster.AlterPartitionRequest{Topic: "orders", LeaderID: p0.Leader, NodeEpoch: epochs[p0.Leader],
		LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, ISR: p0.Replicas[:2]}
	if np, err := fc.AlterPartition(ctx, alter0); err != nil || np.PartitionEpoch != 1 {
		t.Fatalf("AlterPartition through a follower = %+v, %v", np, err)
	}
	_, err = fc.AlterPartition(ctx, alter0)
	wantCode(t, err, protocol.InvalidUpdateVersion)

	// A controlled shutdown (of partition 1's leader) and a fenced node.
	x := orders.Partitions[1].Leader
	if remaining, err := fc.ControlledShutdown(ctx, cluster.ShutdownRequest{ID: x, Epoch: epochs[x]}); err != nil || remaining != 0 {
		t.Fatalf("controlled shutdown of %d = %d, %v", x, remaining, err)
	}
	y := without([]int32{1, 2, 3, 4}, x)[0]
	b.drop(y)
	waitDead(t, fc, y)
	testkit.WaitFor(t, 10*time.Second, "node "+string(rune('0'+y))+" out of every ISR", func() bool {
		for _, p := range mustDescribe(t, fc, "orders").Partitions {
			if slices.Contains(p.ISR, y) || p.Leader == x {
				return false
			}
		}
		return true
	})

	// A raft snapshot holds exactly the state.
	var want fsm.View
	testkit.WaitFor(t, 10*time.Second, "a snapshot of a quiet state", func() bool {
		want = lead.fsm.View()
		if err := lead.node.Snapshot(ctx); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		return lead.fsm.Version() == want.Version
	})
	if got := restoreLatest(t, lead.dataDir); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored snapshot differs:\n got %+v %v\nwant %+v %v", got.Snapshot, got.ShuttingDown, want.Snapshot, want.ShuttingDown)
	}
	if !want.ShuttingDown[x] {
		t.Fatalf("node %d not shutting down in %v", x, want.ShuttingDown)
	}

	// Lose the leader.
	lead.stop(t)
	testkit.WaitFor(t, 20*time.Second, "a new leader", func() bool { return leader(rest) != nil })
	rc := client(rest...)
	testkit.WaitFor(t, 20*time.Second, "the new leader to answer", func() bool {
		err := rc.Heartbeat(ctx, cluster.HeartbeatRequest{ID: y, Epoch: epochs[y]})
		if protocol.CodeOf(err) == protocol.NotController {
			return false
		}
		wantCode(t, err, protocol.StaleBrokerEpoch) // still fenced
		return true
	})
	for _, m := range rest {
		if got := m.fsm.View(); !reflect.DeepEqual(got, want) {
			t.Fatalf("member %s after the leader change:\n got %+v %v\nwant %+v %v", m.id, got.Snapshot, got.ShuttingDown, want.Snapshot, want.ShuttingDown)
		}
	}
	// The new leader keeps the shutdown mark and the partition epochs.
	p1 := partitionOf(t, rc, "orders", 1)
	_, err = rc.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", Partition: 1, LeaderID: p1.Leader, NodeEpoch: epochs[p1.Leader],
		LeaderEpoch: p1.LeaderEpoch, PartitionEpoch: p1.PartitionEpoch, ISR: append(slices.Clone(p1.ISR), x)})
	wantCode(t, err, protocol.InvalidRequest)
	_, err = rc.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", Partition: 1, LeaderID: p1.Leader, NodeEpoch: epochs[p1.Leader],
		LeaderEpoch: p1.LeaderEpoch, PartitionEpoch: p1.PartitionEpoch - 1, ISR: p1.ISR})
	wantCode(t, err, protocol.InvalidUpdateVersion)
	np, err := rc.AlterPartition(ctx, cluster.AlterPartitionRequest{Topic: "orders", Partition: 1, LeaderID: p1.Leader, NodeEpoch: epochs[p1.Leader],
		LeaderEpoch: p1.LeaderEpoch, PartitionEpoch: p1.PartitionEpoch, ISR: p1.ISR[:1]})
	if err != nil || np.PartitionEpoch != p1.PartitionEpoch+1 {
		t.Fatalf("AlterPartition on the new leader = %+v, %v", np, err)
	}
}

// restoreLatest restores a member's newest raft snapshot file into a new FSM.
func restoreLatest(t *testing.T, dataDir string) fsm.View {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("snapshots: %v, %v", metas, err)
	}
	_, rc, err := store.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	f := fsm.New()
	if err := f.Restore(rc); err != nil {
		t.Fatal(err)
	}
	return f.View()
}
