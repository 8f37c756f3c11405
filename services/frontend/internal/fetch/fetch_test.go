package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
)

// env is a Fetcher over fake storage nodes (real sockets) and a fake
// metadata service followed by a real metacache.
type env struct {
	md    *fakecluster.Metadata
	nodes []*fakecluster.Storage
	cache *metacache.Cache
	pool  *storageclient.Pool
	f     *Fetcher
}

func newEnv(t *testing.T, nodes int) *env {
	t.Helper()
	e := &env{pool: storageclient.NewPool("test-fetch")}
	t.Cleanup(func() { _ = e.pool.Close() })
	var ns []cluster.Node
	e.nodes, ns = fakecluster.StartStorages(t, nodes)
	e.md = fakecluster.NewMetadata(ns...)
	t.Cleanup(e.md.Close)
	var err error
	if e.cache, err = metacache.New(metacache.DefaultConfig(), cluster.NewClient([]string{e.md.URL()}), nil); err != nil {
		t.Fatal(err)
	}
	e.cache.Start()
	t.Cleanup(e.cache.Stop)
	cfg := DefaultConfig()
	cfg.Timeout = 3 * time.Second
	cfg.RetryBackoff = 5 * time.Millisecond
	cfg.UnknownTopicMaxAge = 0
	if e.f, err = New(cfg, e.cache, e.pool); err != nil {
		t.Fatal(err)
	}
	return e
}

// produce appends one batch of the values straight to a node, over the
// storage protocol.
func (e *env) produce(t *testing.T, node int, topic string, partition int32, codec record.Codec, values ...string) {
	t.Helper()
	b := record.NewBuilder(codec)
	for _, v := range values {
		b.Append(record.Record{Timestamp: 1700000000000, Key: []byte("k"), Value: []byte(v)})
	}
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.pool.Get(context.Background(), e.nodes[node].Addr())
	if err != nil {
		t.Fatal(err)
	}
	req := &protocol.ProduceRequest{Topic: topic, Partition: partition, Acks: protocol.AcksAll, TimeoutMs: 1000}
	if _, err := c.Call(context.Background(), protocol.APIProduce, req, batch, &protocol.ProduceResponse{}); err != nil {
		t.Fatal(err)
	}
}

// answer is the JSON answer, decoded.
type answer struct {
	Records []struct {
		Offset int64  `json:"offset"`
		Value  string `json:"value"`
	} `json:"records"`
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
}

func (e *env) fetchJSON(t *testing.T, req Request) (answer, error) {
	t.Helper()
	r, err := e.f.Fetch(context.Background(), req)
	if err != nil {
		return answer{}, err
	}
	defer r.Release()
	b, err := AppendJSON(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return a, nil
}

func (a answer) values() string {
	var vs []string
	for _, r := range a.Records {
		vs = append(vs, r.Value)
	}
	return strings.Join(vs, ",")
}

func TestFetchFromOffset(t *testing.T) {
	e := newEnv(t, 1)
	e.md.AddTopic("t", 1)
	e.produce(t, 0, "t", 0, record.CodecNone, "a", "b")
	e.produce(t, 0, "t", 0, record.CodecGzip, "c", "d")
	e.produce(t, 0, "t", 0, record.CodecNone, "e")
	a, err := e.fetchJSON(t, Request{Topic: "t", Offset: 1, MaxBytes: 1 << 20, MaxWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if a.values() != "b,c,d,e" || a.Records[0].Offset != 1 || a.NextOffset != 5 || a.HighWatermark != 5 {
		t.Fatalf("answer %+v", a)
	}
	// max_bytes is soft: the first batch comes whole, the next only if it fits.
	a, err = e.fetchJSON(t, Request{Topic: "t", Offset: 2, MaxBytes: 1})
	if err != nil || a.values() != "c,d" || a.NextOffset != 4 {
		t.Fatalf("one batch: %+v %v", a, err)
	}
	// earliest and latest
	a, err = e.fetchJSON(t, Request{Topic: "t", Offset: OffsetEarliest, MaxBytes: 1 << 20})
	if err != nil || a.values() != "a,b,c,d,e" {
		t.Fatalf("earliest: %+v %v", a, err)
	}
	a, err = e.fetchJSON(t, Request{Topic: "t", Offset: OffsetLatest, MaxBytes: 1 << 20})
	if err != nil || len(a.Records) != 0 || a.NextOffset != 5 {
		t.Fatalf("latest: %+v %v", a, err)
	}
}

func TestFetchLongPoll(t *testing.T) {
	e := newEnv(t, 1)
	e.md.AddTopic("t", 1)
	start := time.Now()
	a, err := e.fetchJSON(t, Request{Topic: "t", Offset: 0, MaxBytes: 1 << 20, MaxWait: 30 * time.Millisecond})
	if err != nil || len(a.Records) != 0 || a.NextOffset != 0 || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("empty wait: %+v %v after %v", a, err, time.Since(start))
	}
	got := make(chan answer, 1)
	go func() {
		a, err := e.fetchJSON(t, Request{Topic: "t", Offset: 0, MaxBytes: 1 << 20, MaxWait: 20 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- a
	}()
	testkit.WaitFor(t, 10*time.Second, "the long-poll to reach the node", func() bool { return e.nodes[0].Fetches("t", 0) >= 2 })
	e.produce(t, 0, "t", 0, record.CodecNone, "new")
	select {
	case a := <-got:
		if a.values() != "new" {
			t.Fatalf("answer %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll not woken by an append")
	}
}

func TestFetchFollowsLeaderChange(t *testing.T) {
	e := newEnv(t, 2)
	e.md.AddTopic("t", 2) // node 2 leads and holds the data
	e.produce(t, 1, "t", 0, record.CodecNone, "x", "y")
	v := e.md.Version()
	testkit.WaitFor(t, 10*time.Second, "the cache to follow metadata", func() bool { return e.cache.Version() >= v })
	e.md.SetLeader("t", 0, 1) // a stale view: node 1 no longer leads when asked
	v = e.md.Version()
	testkit.WaitFor(t, 10*time.Second, "the cache to follow metadata", func() bool { return e.cache.Version() >= v })
	e.nodes[0].SetFetchReject(func(req *protocol.FetchRequest, attempt int) error {
		e.md.SetLeader("t", 0, 2)
		return protocol.NotLeaderOrFollower.Err("not the leader of %s-%d", req.Topic, req.Partition)
	})
	a, err := e.fetchJSON(t, Request{Topic: "t", Offset: 0, MaxBytes: 1 << 20})
	if err != nil || a.values() != "x,y" {
		t.Fatalf("%+v %v", a, err)
	}
	if e.nodes[0].Fetches("t", 0) != 1 {
		t.Fatalf("old leader asked %d times", e.nodes[0].Fetches("t", 0))
	}
}

func TestFetchErrors(t *testing.T) {
	e := newEnv(t, 1)
	e.md.AddTopic("t", 1)
	e.md.AddTopic("leaderless", -1)
	e.produce(t, 0, "t", 0, record.CodecNone, "a", "b", "c", "d", "e")
	e.nodes[0].SetLogStart("t", 0, 2)
	for _, tc := range []struct {
		name string
		req  Request
		code protocol.Code
		msg  string
	}{
		{"below the log start", Request{Topic: "t", Offset: 0, MaxBytes: 100}, protocol.OffsetOutOfRange, "log start offset is 2 and its end (high watermark) 5"},
		{"past the end", Request{Topic: "t", Offset: 9, MaxBytes: 100}, protocol.OffsetOutOfRange, "offset 9 is outside partition 0"},
		{"unknown topic", Request{Topic: "nope", MaxBytes: 100}, protocol.UnknownTopicOrPartition, `unknown topic "nope"`},
		{"unknown partition", Request{Topic: "t", Partition: 1, MaxBytes: 100}, protocol.UnknownTopicOrPartition, "partition 1 does not exist"},
	} {
		_, err := e.fetchJSON(t, tc.req)
		if protocol.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.code, tc.msg)
		}
	}
	// No leader until the time runs out: the last retriable error.
	f := *e.f
	f.cfg.Timeout = 50 * time.Millisecond
	if _, err := f.Fetch(context.Background(), Request{Topic: "leaderless", MaxBytes: 100}); protocol.CodeOf(err) != protocol.LeaderNotAvailable {
		t.Errorf("leaderless: %v", err)
	}
	e.md.SetDown(true)
	if _, err := e.f.Fetch(context.Background(), Request{Topic: "other", MaxBytes: 100}); !errors.Is(err, ErrMetadataUnavailable) {
		t.Errorf("metadata down: %v", err)
	}
}
