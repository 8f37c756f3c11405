package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

func remoteSegment(key string, base, end int64) cluster.RemoteSegment {
	return cluster.RemoteSegment{Object: key, BaseOffset: base, EndOffset: end, LogBytes: 1000, Bytes: 1100, MaxTimestamp: 1700000000000,
		Sections: cluster.RemoteSections{IndexPos: 1000, IndexLen: 80, EpochsPos: 1080, EpochsLen: 20}}
}

// TestRemoteLogThroughTheAPI: a partition leader adds segments to its remote
// log and drops them, the log is read over HTTP and summarized in the
// cluster model (waking watchers), stale leaders are refused with their
// codes, and a deleted topic's segments wait in the garbage until cleared.
func TestRemoteLogThroughTheAPI(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()
	epochs := map[int32]int64{}
	for id := int32(1); id <= 2; id++ {
		e, err := c.Register(ctx, cluster.RegisterRequest{ID: id, Addr: "127.0.0.1:900" + string(rune('0'+id))})
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = e
	}
	tp, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 2,
		Config: map[string]string{cluster.ConfigRemoteStorageEnable: "true", cluster.ConfigLocalRetentionBytes: "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0] // led by its first replica, at leader epoch 0
	leader := cluster.RemoteLeader{Topic: "orders", LeaderID: p.Leader, LeaderEpoch: p.LeaderEpoch, NodeEpoch: epochs[p.Leader]}
	follower := p.Replicas[1]
	add := func(l cluster.RemoteLeader, s cluster.RemoteSegment) (cluster.RemoteSummary, error) {
		return c.AddRemoteSegment(ctx, cluster.AddRemoteSegmentRequest{RemoteLeader: l, Segment: s})
	}

	if l, err := c.RemoteLog(ctx, "orders", 0); err != nil || l.Topic != "orders" || l.Segments == nil || len(l.Segments) != 0 {
		t.Fatalf("remote log before any upload = %+v, %v", l, err)
	}

	// The first segment wakes a watcher with the partition's summary.
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	woken := make(chan *cluster.Snapshot, 1)
	go func() {
		s, _ := c.Watch(ctx, snap.Version, 30*time.Second)
		woken <- s
	}()
	testkit.WaitFor(t, 5*time.Second, "the watch to be waiting", func() bool { return m.srv.Waiting() == 1 })
	a, b := remoteSegment("orders-0/a", 0, 100), remoteSegment("orders-0/b", 100, 250)
	sum, err := add(leader, a)
	if want := (cluster.RemoteSummary{Start: 0, End: 100, Bytes: 1100, Segments: 1}); err != nil || sum != want {
		t.Fatalf("add = %+v, %v; want %+v", sum, err, want)
	}
	select {
	case s := <-woken:
		if s == nil || s.Version <= snap.Version || s.Topics[0].Partitions[0].Remote == nil || s.Topics[0].Partitions[0].Remote.End != 100 {
			t.Fatalf("watch woke with %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("adding a segment woke no watcher")
	}

	// The next segment continues the log; a retry is answered as added.
	for range 2 {
		if sum, err := add(leader, b); err != nil || sum != (cluster.RemoteSummary{Start: 0, End: 250, Bytes: 2200, Segments: 2}) {
			t.Fatalf("add of the next segment = %+v, %v", sum, err)
		}
	}
	l, err := c.RemoteLog(ctx, "orders", 0)
	if err != nil || !reflect.DeepEqual(l.Segments, []cluster.RemoteSegment{a, b}) {
		t.Fatalf("remote log = %+v, %v", l, err)
	}
	var consistent cluster.RemoteLog
	getJSON(t, "http://"+m.http+"/v1/topics/orders/partitions/0/remote?consistent=true", &consistent)
	if !reflect.DeepEqual(consistent, *l) {
		t.Fatalf("consistent remote log = %+v; want %+v", consistent, *l)
	}
	if got := partitionOf(t, c, "orders", 0); got.Remote == nil || got.Remote.Segments != 2 || got.LeaderEpoch != p.LeaderEpoch || got.PartitionEpoch != p.PartitionEpoch {
		t.Fatalf("described partition = %+v", got)
	}

	// Refusals, with their codes and statuses.
	next := remoteSegment("orders-0/c", 250, 400)
	_, err = add(leader, remoteSegment("orders-0/c", 300, 400))
	wantCode(t, err, protocol.OffsetOutOfRange)
	if !strings.Contains(err.Error(), "300") || !strings.Contains(err.Error(), "250") {
		t.Fatalf("gap error %q does not give both offsets", err)
	}
	base := "http://" + m.http + "/v1/remote/segments"
	for _, s := range []struct {
		name   string
		edit   func(r *cluster.AddRemoteSegmentRequest)
		status int
		code   protocol.Code
	}{
		{"gap", func(r *cluster.AddRemoteSegmentRequest) { r.Segment.BaseOffset = 300 }, 404, protocol.OffsetOutOfRange},
		{"stale leader epoch", func(r *cluster.AddRemoteSegmentRequest) { r.LeaderEpoch++ }, 503, protocol.FencedLeaderEpoch},
		{"stale node epoch", func(r *cluster.AddRemoteSegmentRequest) { r.NodeEpoch-- }, 409, protocol.StaleBrokerEpoch},
		{"not the leader", func(r *cluster.AddRemoteSegmentRequest) { r.LeaderID, r.NodeEpoch = follower, epochs[follower] }, 400, protocol.InvalidRequest},
		{"malformed segment", func(r *cluster.AddRemoteSegmentRequest) { r.Segment.LogBytes = 0 }, 400, protocol.InvalidRequest},
		{"unknown topic", func(r *cluster.AddRemoteSegmentRequest) { r.Topic = "nope" }, 404, protocol.UnknownTopicOrPartition},
		{"unknown node", func(r *cluster.AddRemoteSegmentRequest) { r.LeaderID = 42 }, 404, protocol.UnknownNode},
	} {
		req := cluster.AddRemoteSegmentRequest{RemoteLeader: leader, Segment: next}
		s.edit(&req)
		body, _ := json.Marshal(req)
		if status, eb := rawDo(t, "POST", base, body); status != s.status || protocol.Code(eb.ErrorCode) != s.code {
			t.Errorf("%s: HTTP %d code %d (%s); want %d code %d", s.name, status, eb.ErrorCode, eb.Error, s.status, s.code)
		}
	}
	if status, eb := rawDo(t, "POST", base, []byte("{")); status != 400 || protocol.Code(eb.ErrorCode) != protocol.InvalidRequest {
		t.Errorf("bad JSON: HTTP %d %+v", status, eb)
	}
	stale := leader
	stale.LeaderEpoch++
	_, err = c.DropRemoteSegments(ctx, cluster.DropRemoteSegmentsRequest{RemoteLeader: stale, Below: 1000})
	wantCode(t, err, protocol.FencedLeaderEpoch)
	_, err = c.RemoteLog(ctx, "orders", 1)
	wantCode(t, err, protocol.UnknownTopicOrPartition)
	_, err = c.RemoteLog(ctx, "nope", 0)
	wantCode(t, err, protocol.UnknownTopicOrPartition)
	if l, err := c.RemoteLog(ctx, "orders", 0); err != nil || len(l.Segments) != 2 {
		t.Fatalf("refusals changed the remote log: %+v, %v", l, err)
	}

	// Drops take whole segments from the front.
	if got, err := c.DropRemoteSegments(ctx, cluster.DropRemoteSegmentsRequest{RemoteLeader: leader, Below: 99}); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("drop of nothing = %#v, %v", got, err)
	}
	if got, err := c.DropRemoteSegments(ctx, cluster.DropRemoteSegmentsRequest{RemoteLeader: leader, Below: 100}); err != nil || !reflect.DeepEqual(got, []cluster.RemoteSegment{a}) {
		t.Fatalf("drop below 100 = %+v, %v", got, err)
	}
	if got := partitionOf(t, c, "orders", 0); got.Remote == nil || *got.Remote != (cluster.RemoteSummary{Start: 100, End: 250, Bytes: 1100, Segments: 1}) {
		t.Fatalf("summary after the drop: %+v", got.Remote)
	}

	// A deleted topic's remote segments wait in the garbage until cleared.
	if g, err := c.RemoteGarbage(ctx); err != nil || g == nil || len(g) != 0 {
		t.Fatalf("garbage before a deletion = %#v, %v", g, err)
	}
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = c.RemoteLog(ctx, "orders", 0)
	wantCode(t, err, protocol.UnknownTopicOrPartition)
	want := []cluster.RemoteLog{{Topic: "orders", Partition: 0, Segments: []cluster.RemoteSegment{b}}}
	if g, err := c.RemoteGarbage(ctx); err != nil || !reflect.DeepEqual(g, want) {
		t.Fatalf("garbage = %+v, %v; want %+v", g, err, want)
	}
	var consistentGarbage []cluster.RemoteLog
	getJSON(t, "http://"+m.http+"/v1/remote/garbage?consistent=true", &consistentGarbage)
	if !reflect.DeepEqual(consistentGarbage, want) {
		t.Fatalf("consistent garbage = %+v", consistentGarbage)
	}
	if err := c.ClearRemoteGarbage(ctx, cluster.ClearRemoteGarbageRequest{Topic: "orders", Partition: 0, Objects: []string{b.Object}}); err != nil {
		t.Fatal(err)
	}
	if g, err := c.RemoteGarbage(ctx); err != nil || len(g) != 0 {
		t.Fatalf("garbage after clearing = %+v, %v", g, err)
	}
}

// getJSON GETs url and decodes its 200 answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}
