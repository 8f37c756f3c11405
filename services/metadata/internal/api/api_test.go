package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

func wantCode(t *testing.T, err error, code protocol.Code) {
	t.Helper()
	if got := protocol.CodeOf(err); got != code {
		t.Fatalf("error %v has code %v; want %v", err, got, code)
	}
}

// rawDo sends one request and returns status and decoded error body.
func rawDo(t *testing.T, method, url string, body []byte) (int, cluster.ErrorBody) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb cluster.ErrorBody
	if resp.StatusCode/100 != 2 {
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error == "" {
			t.Fatalf("%s %s: HTTP %d body %q is not an ErrorBody", method, url, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, eb
}

func TestSingleNodeAPI(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()

	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.ClusterID == "" || snap.Leader != m.http || snap.Version == 0 {
		t.Fatalf("snapshot = %+v", snap)
	}

	// Storage nodes: register and heartbeat.
	var epochs []int64
	for id := int32(1); id <= 3; id++ {
		e, err := c.Register(ctx, cluster.RegisterRequest{ID: id, Addr: "127.0.0.1:900" + string(rune('0'+id)), Rack: "r" + string(rune('0'+id))})
		if err != nil {
			t.Fatal(err)
		}
		epochs = append(epochs, e)
	}
	if !slices.IsSorted(epochs) || epochs[0] <= 0 {
		t.Fatalf("epochs = %v", epochs)
	}
	if err := c.Heartbeat(ctx, cluster.HeartbeatRequest{ID: 1, Epoch: epochs[0]}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.Heartbeat(ctx, cluster.HeartbeatRequest{ID: 1, Epoch: epochs[0] - 1}), protocol.StaleBrokerEpoch)
	wantCode(t, c.Heartbeat(ctx, cluster.HeartbeatRequest{ID: 42, Epoch: 1}), protocol.UnknownNode)
	_, err = c.Register(ctx, cluster.RegisterRequest{ID: 4, Addr: "no-port"})
	wantCode(t, err, protocol.InvalidRequest)

	// Create, describe, list.
	tp, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "orders", Partitions: 6, ReplicationFactor: 2,
		Config: map[string]string{cluster.ConfigRetentionMs: "60000"}})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Name != "orders" || len(tp.Partitions) != 6 || tp.ReplicationFactor != 2 || tp.Config[cluster.ConfigRetentionMs] != "60000" {
		t.Fatalf("created topic = %+v", tp)
	}
	leaders := map[int32]int{}
	for i, p := range tp.Partitions {
		if p.ID != int32(i) || len(p.Replicas) != 2 || p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) ||
			p.LeaderEpoch != 0 || p.PartitionEpoch != 0 {
			t.Fatalf("partition %d = %+v", i, p)
		}
		leaders[p.Leader]++
	}
	if len(leaders) != 3 || leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("leaders per node = %v; want 2 each", leaders)
	}
	got, err := c.DescribeTopic(ctx, "orders")
	if err != nil || got.Name != "orders" || len(got.Partitions) != 6 {
		t.Fatalf("describe = %+v, %v", got, err)
	}
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "logs", Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListTopics(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "logs" || list[1].Name != "orders" {
		t.Fatalf("list = %+v, %v", list, err)
	}

	// Rejections, each with its wire code.
	rejects := []struct {
		name string
		req  cluster.CreateTopicRequest
		code protocol.Code
	}{
		{"duplicate", cluster.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 1}, protocol.TopicAlreadyExists},
		{"bad config key", cluster.CreateTopicRequest{Name: "t1", Partitions: 1, ReplicationFactor: 1, Config: map[string]string{"colour": "blue"}}, protocol.InvalidConfig},
		{"bad config value", cluster.CreateTopicRequest{Name: "t1", Partitions: 1, ReplicationFactor: 1, Config: map[string]string{cluster.ConfigMinInsyncReplicas: "2"}}, protocol.InvalidConfig},
		{"bad name", cluster.CreateTopicRequest{Name: "a b", Partitions: 1, ReplicationFactor: 1}, protocol.InvalidTopic},
		{"zero partitions", cluster.CreateTopicRequest{Name: "t1", Partitions: 0, ReplicationFactor: 1}, protocol.InvalidPartitions},
		{"too many partitions", cluster.CreateTopicRequest{Name: "t1", Partitions: cluster.MaxPartitions + 1, ReplicationFactor: 1}, protocol.InvalidPartitions},
		{"negative rf", cluster.CreateTopicRequest{Name: "t1", Partitions: 1, ReplicationFactor: -2}, protocol.InvalidReplicationFactor},
		{"rf above live nodes", cluster.CreateTopicRequest{Name: "t1", Partitions: 1, ReplicationFactor: 4}, protocol.InvalidReplicationFactor},
	}
	for _, r := range rejects {
		t.Run("reject "+r.name, func(t *testing.T) {
			_, err := c.CreateTopic(ctx, r.req)
			wantCode(t, err, r.code)
		})
	}
	_, err = c.DescribeTopic(ctx, "nope")
	wantCode(t, err, protocol.UnknownTopicOrPartition)

	// HTTP statuses and bodies.
	base := "http://" + m.http
	statuses := []struct {
		method, path string
		body         []byte
		status       int
		code         protocol.Code
	}{
		{"POST", "/v1/topics", []byte(`{"name":"orders","partitions":1,"replication_factor":1}`), 409, protocol.TopicAlreadyExists},
		{"POST", "/v1/topics", []byte(`{"name":"x","partitions":1,"replication_factor":1,"config":{"retention.ms":"soon"}}`), 400, protocol.InvalidConfig},
		{"POST", "/v1/topics", []byte(`not json`), 400, protocol.InvalidRequest},
		{"POST", "/v1/topics", nil, 400, protocol.InvalidRequest},
		{"GET", "/v1/topics/nope", nil, 404, protocol.UnknownTopicOrPartition},
		{"DELETE", "/v1/topics/nope", nil, 404, protocol.UnknownTopicOrPartition},
		{"PUT", "/v1/topics", nil, 405, protocol.InvalidRequest},
		{"GET", "/v1/elsewhere", nil, 404, protocol.InvalidRequest},
		{"GET", "/v1/cluster?since=x", nil, 400, protocol.InvalidRequest},
		{"GET", "/v1/topics?consistent=maybe", nil, 400, protocol.InvalidRequest},
		{"POST", "/v1/nodes/heartbeat", []byte(`{"id":1,"epoch":1}`), 409, protocol.StaleBrokerEpoch},
		{"POST", "/v1/nodes/heartbeat", []byte(`{"id":77,"epoch":1}`), 404, protocol.UnknownNode},
		{"POST", "/v1/internal/apply", []byte(`{"type":"explode"}`), 400, protocol.InvalidRequest},
	}
	for _, s := range statuses {
		status, eb := rawDo(t, s.method, base+s.path, s.body)
		if status != s.status || protocol.Code(eb.ErrorCode) != s.code {
			t.Errorf("%s %s: HTTP %d code %d (%s); want %d code %d", s.method, s.path, status, eb.ErrorCode, eb.Error, s.status, s.code)
		}
	}
	if status, _ := rawDo(t, "GET", base+"/v1/topics/orders?consistent=true", nil); status != 200 {
		t.Fatalf("consistent describe: HTTP %d", status)
	}

	// Delete.
	if err := c.DeleteTopic(ctx, "logs"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.DeleteTopic(ctx, "logs"), protocol.UnknownTopicOrPartition)
	if _, err := c.DescribeTopic(ctx, "logs"); protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("describe after delete = %v", err)
	}
}

// TestBodyTooLarge announces a body over the limit; the server answers 413
// from the headers alone (a client still sending would see its connection
// reset, so the test sends none of the body).
func TestBodyTooLarge(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	conn, err := net.Dial("tcp", m.http)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 2<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb cluster.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || protocol.Code(eb.ErrorCode) != protocol.InvalidRequest || !strings.Contains(eb.Error, "too large") {
		t.Fatalf("HTTP %d %+v; want 413 with an ErrorBody", resp.StatusCode, eb)
	}
}

func TestWatch(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()
	if _, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "127.0.0.1:9001"}); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// An older version answers at once.
	start := time.Now()
	s, err := c.Watch(ctx, snap.Version-1, 10*time.Second)
	if err != nil || s.Version != snap.Version || time.Since(start) > 5*time.Second {
		t.Fatalf("watch below the current version = %d, %v after %v", s.Version, err, time.Since(start))
	}

	// No change: answers with the same version once the wait passes.
	start = time.Now()
	s, err = c.Watch(ctx, snap.Version, 300*time.Millisecond)
	if err != nil || s.Version != snap.Version {
		t.Fatalf("watch without change = %d, %v", s.Version, err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("watch without change returned after %v; want about 300ms", el)
	}

	// A change wakes a waiting watch long before its wait passes.
	type answer struct {
		s   *cluster.Snapshot
		err error
	}
	done := make(chan answer, 1)
	go func() {
		s, err := c.Watch(ctx, snap.Version, 30*time.Second)
		done <- answer{s, err}
	}()
	testkit.WaitFor(t, 5*time.Second, "the watch to be waiting", func() bool { return m.srv.Waiting() == 1 })
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "events", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.s.Version <= snap.Version {
			t.Fatalf("watch woke at version %d; want > %d", a.s.Version, snap.Version)
		}
		if _, ok := a.s.Topic("events"); !ok {
			t.Fatalf("woken snapshot lacks the new topic: %+v", a.s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch not woken by a change")
	}
}

func TestStopEndsLongPoll(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Watch(context.Background(), snap.Version, 60*time.Second)
		done <- err
	}()
	testkit.WaitFor(t, 5*time.Second, "the server to hold the watch", func() bool { return m.srv.Waiting() == 1 })
	start := time.Now()
	m.stop(t)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("watch still open after Stop")
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Stop took %v with a watch open", el)
	}
}

func TestDisallowedRelayLoop(t *testing.T) {
	ms := startCluster(t, 3, clusterOpts{})
	var follower *member
	for _, m := range ms {
		if !m.node.IsLeader() {
			follower = m
			break
		}
	}
	req, _ := http.NewRequest("POST", "http://"+follower.http+"/v1/topics", strings.NewReader(`{"name":"t","partitions":1,"replication_factor":1}`))
	req.Header.Set("X-Sluice-Forwarded-By", "9")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb cluster.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	if resp.StatusCode != 503 || protocol.Code(eb.ErrorCode) != protocol.NotController {
		t.Fatalf("relayed request on a follower: HTTP %d %+v; want 503 NOT_CONTROLLER", resp.StatusCode, eb)
	}
}

// TestTopicWithoutReplicationFactor: a topic created without a replication
// factor (0, or Kafka's -1) gets default.replication.factor (3) replicas,
// or as many as there are live storage nodes when fewer; the setting
// changes at run time.
func TestTopicWithoutReplicationFactor(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()
	register := func(id int32) {
		t.Helper()
		if _, err := c.Register(ctx, cluster.RegisterRequest{ID: id, Addr: fmt.Sprintf("127.0.0.1:900%d", id)}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name string, rf int) int {
		t.Helper()
		tp, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: name, Partitions: 2, ReplicationFactor: rf})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range tp.Partitions {
			if len(p.Replicas) != tp.ReplicationFactor {
				t.Fatalf("%s: partition %d has replicas %v, replication factor %d", name, p.ID, p.Replicas, tp.ReplicationFactor)
			}
		}
		return tp.ReplicationFactor
	}
	register(1)
	if rf := create("alone", 0); rf != 1 {
		t.Fatalf("one live node: replication factor %d, want 1", rf)
	}
	register(2)
	register(3)
	register(4)
	if rf := create("durable", 0); rf != 3 {
		t.Fatalf("four live nodes: replication factor %d, want 3", rf)
	}
	if rf := create("kafka-style", cluster.DefaultRF); rf != 3 {
		t.Fatalf("-1 on four live nodes: replication factor %d, want 3", rf)
	}
	if rf := create("asked", 2); rf != 2 {
		t.Fatalf("an explicit 2: replication factor %d", rf)
	}
	if _, err := c.SetClusterConfig(ctx, cluster.AlterTopicConfigRequest{Set: map[string]string{cluster.SettingReplicationFactor: "4"}}); err != nil {
		t.Fatal(err)
	}
	if rf := create("wider", 0); rf != 4 {
		t.Fatalf("default.replication.factor=4: replication factor %d", rf)
	}
}

func TestRecreatedTopicGetsANewID(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()
	if _, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "127.0.0.1:9001"}); err != nil {
		t.Fatal(err)
	}
	first, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	second, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if first.ID == "" || second.ID == "" || first.ID == second.ID {
		t.Fatalf("topic ids %q then %q", first.ID, second.ID)
	}
}

// TestAlterTopicConfig: PATCH /v1/topics/{name}/config sets and deletes keys,
// and refuses an invalid result, a key both set and deleted, an empty change
// and an unknown topic, leaving the config as it was.
func TestAlterTopicConfig(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()
	if _, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "127.0.0.1:9001"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1,
		Config: map[string]string{"segment.bytes": "4096"}}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Snapshot(ctx)
	got, err := c.AlterTopicConfig(ctx, "t", cluster.AlterTopicConfigRequest{Set: map[string]string{"retention.bytes": "8192"}, Delete: []string{"segment.bytes"}})
	if err != nil || !reflect.DeepEqual(got.Config, map[string]string{"retention.bytes": "8192"}) {
		t.Fatalf("alter: %+v, %v", got, err)
	}
	if after, _ := c.Snapshot(ctx); after.Version <= before.Version {
		t.Fatalf("snapshot version %d after the change, %d before: watchers would miss it", after.Version, before.Version)
	}
	wantCode(t, errOf(c.AlterTopicConfig(ctx, "t", cluster.AlterTopicConfigRequest{Set: map[string]string{"retention.bytes": "lots"}})), protocol.InvalidConfig)
	wantCode(t, errOf(c.AlterTopicConfig(ctx, "t", cluster.AlterTopicConfigRequest{Set: map[string]string{"min.insync.replicas": "2"}})), protocol.InvalidConfig)
	wantCode(t, errOf(c.AlterTopicConfig(ctx, "t", cluster.AlterTopicConfigRequest{Set: map[string]string{"retention.ms": "1"}, Delete: []string{"retention.ms"}})), protocol.InvalidRequest)
	wantCode(t, errOf(c.AlterTopicConfig(ctx, "t", cluster.AlterTopicConfigRequest{})), protocol.InvalidRequest)
	wantCode(t, errOf(c.AlterTopicConfig(ctx, "nope", cluster.AlterTopicConfigRequest{Set: map[string]string{"retention.ms": "1"}})), protocol.UnknownTopicOrPartition)
	if tp, err := c.DescribeTopic(ctx, "t"); err != nil || !reflect.DeepEqual(tp.Config, map[string]string{"retention.bytes": "8192"}) {
		t.Fatalf("config after the refused changes: %+v, %v", tp, err)
	}
}

func errOf(_ *cluster.Topic, err error) error { return err }

// TestAddPartitions: POST /v1/topics/{name}/partitions grows a topic to the
// given total, placing the new partitions over the live nodes; a total not
// above the current count, or an unknown topic, is refused.
func TestAddPartitions(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()
	registerNodes(t, c, 3)
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "t", Partitions: 2, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := c.AddPartitions(ctx, "t", cluster.AddPartitionsRequest{Partitions: 5})
	if err != nil || len(got.Partitions) != 5 {
		t.Fatalf("add: %+v, %v", got, err)
	}
	leaders := map[int32]int{}
	for i, p := range got.Partitions {
		if p.ID != int32(i) || len(p.Replicas) != 2 || p.Leader != p.Replicas[0] || len(p.ISR) != 2 {
			t.Fatalf("partition %d: %+v", i, p)
		}
		leaders[p.Leader]++
	}
	if len(leaders) != 3 {
		t.Fatalf("leaders of 5 partitions over 3 nodes: %v", leaders)
	}
	wantCode(t, errOf(c.AddPartitions(ctx, "t", cluster.AddPartitionsRequest{Partitions: 5})), protocol.InvalidPartitions)
	wantCode(t, errOf(c.AddPartitions(ctx, "t", cluster.AddPartitionsRequest{Partitions: 3})), protocol.InvalidPartitions)
	wantCode(t, errOf(c.AddPartitions(ctx, "nope", cluster.AddPartitionsRequest{Partitions: 3})), protocol.UnknownTopicOrPartition)
	if tp, _ := c.DescribeTopic(ctx, "t"); len(tp.Partitions) != 5 {
		t.Fatalf("%d partitions after the refused changes", len(tp.Partitions))
	}
}
