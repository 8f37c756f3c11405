package httpapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestAdminThroughClusterClient points libs/cluster's Client at the frontend:
// the routes, bodies and error codes must be the metadata service's.
func TestAdminThroughClusterClient(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2})
	c := cluster.NewClient([]string{e.srv.Addr()})
	ctx := context.Background()

	top, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "events", Partitions: 4, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if top.Name != "events" || len(top.Partitions) != 4 {
		t.Fatalf("created %+v", top)
	}
	// Produce right away through the same frontend.
	if r := e.produceJSON(t, "events", "", `{"records":[{"value":"a"}]}`); r.status != http.StatusOK {
		t.Fatalf("produce after create: %d %s", r.status, r.body)
	}

	_, err = c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "events", Partitions: 1, ReplicationFactor: 1})
	if protocol.CodeOf(err) != protocol.TopicAlreadyExists {
		t.Fatalf("second create: %v", err)
	}
	_, err = c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "bad name", Partitions: 1})
	if protocol.CodeOf(err) != protocol.InvalidTopic {
		t.Fatalf("bad name: %v", err)
	}

	ts, err := c.ListTopics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "events" {
		t.Fatalf("list %+v %v", ts, err)
	}
	d, err := c.DescribeTopic(ctx, "events")
	if err != nil || len(d.Partitions) != 4 {
		t.Fatalf("describe %+v %v", d, err)
	}
	if _, err := c.DescribeTopic(ctx, "missing"); protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("describe missing: %v", err)
	}

	snap, err := c.Snapshot(ctx)
	if err != nil || len(snap.Nodes) != 2 || len(snap.Topics) != 1 {
		t.Fatalf("snapshot %+v %v", snap, err)
	}

	if err := c.DeleteTopic(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, "events"); protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("second delete: %v", err)
	}
	testkit.WaitFor(t, 5*time.Second, "deletion in the cache", func() bool { _, ok := e.cache.Route("events"); return !ok })
	if r := e.produceJSON(t, "events", "", `{"records":[{"value":"a"}]}`); r.status != http.StatusNotFound {
		t.Fatalf("produce after delete: %d %s", r.status, r.body)
	}
}

func TestAdminRawShapes(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	r := e.do(t, http.MethodPost, "/v1/topics", "application/json", []byte(`{"name":"x","partitions":2,"replication_factor":1}`))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodDelete, "/v1/topics/x", "", nil)
	if r.status != http.StatusOK || string(r.body) != "{}" {
		t.Fatalf("delete: %d %q", r.status, r.body)
	}
	r = e.do(t, http.MethodGet, "/v1/topics", "", nil)
	if r.status != http.StatusOK || string(r.body) != `{"topics":[]}` {
		t.Fatalf("empty list: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodPost, "/v1/topics", "application/json", []byte(`{"name":`))
	if r.status != http.StatusBadRequest || r.errBody(t).ErrorCode != int16(protocol.InvalidRequest) {
		t.Fatalf("bad create body: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPut, "/v1/topics", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/topics/x/records", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/topics/x", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/cluster", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/topics/a/b/c", http.StatusNotFound},
		{http.MethodGet, "/", http.StatusNotFound},
	} {
		r := e.do(t, tc.method, tc.path, "", nil)
		if r.status != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, r.status, tc.status)
		}
		r.errBody(t)
	}
}

func TestAdminMetadataDown(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.SetDown(true) // answers NOT_CONTROLLER, which maps to 503
	r := e.do(t, http.MethodGet, "/v1/topics", "", nil)
	if r.status != http.StatusServiceUnavailable || r.errBody(t).ErrorCode != int16(protocol.NotController) {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	e.md.Close() // now unreachable: a transport error, also 503
	r = e.do(t, http.MethodGet, "/v1/topics/x", "", nil)
	if r.status != http.StatusServiceUnavailable || r.errBody(t).ErrorCode != int16(protocol.NetworkException) {
		t.Fatalf("unreachable: %d %s", r.status, r.body)
	}
}

// TestClusterWatchFromCache: a watcher pointed at the frontend is answered
// from its cache, at once for an old version and on change otherwise.
func TestClusterWatchFromCache(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	c := cluster.NewClient([]string{e.srv.Addr()})
	testkit.WaitFor(t, 5*time.Second, "cache ready", func() bool { return e.cache.Ready() == nil })
	ctx := context.Background()
	v := e.cache.Version()
	s, err := c.Watch(ctx, 0, time.Minute)
	if err != nil || s.Version != v {
		t.Fatalf("watch from 0: %+v %v", s, err)
	}
	start := time.Now()
	s, err = c.Watch(ctx, v, 30*time.Millisecond)
	if err != nil || s.Version != v || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("watch timing out: %+v %v after %v", s, err, time.Since(start))
	}
	got := make(chan *cluster.Snapshot, 1)
	go func() {
		s, err := c.Watch(ctx, v, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	e.md.AddTopic("w", 1)
	select {
	case s := <-got:
		if _, ok := s.Topic("w"); !ok {
			t.Fatalf("watch answered %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch not answered on change")
	}
	r := e.do(t, http.MethodGet, "/v1/cluster?since=x", "", nil)
	if r.status != http.StatusBadRequest {
		t.Fatalf("bad since: %d", r.status)
	}
}

func TestStopEndsLongPolls(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	testkit.WaitFor(t, 5*time.Second, "cache ready", func() bool { return e.cache.Ready() == nil })
	c := cluster.NewClient([]string{e.srv.Addr()})
	handled := e.srv.ids.n.Load() // each request the client sends (it names none) takes a new id
	done := make(chan error, 1)
	go func() {
		_, err := c.Watch(context.Background(), e.cache.Version(), time.Minute)
		done <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the long-poll to reach the handler", func() bool { return e.srv.ids.n.Load() > handled })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.srv.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("stop took %v with a long-poll open", time.Since(start))
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll still open after stop")
	}
}
