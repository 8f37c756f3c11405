package console

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
)

// env is a console served on 127.0.0.1:0 over the real sources: a metadata
// cache following a fake metadata service, a storage pool to fake storage
// nodes (real sockets, the storage protocol) and a groups client of a fake
// offsets service.
type env struct {
	md      *fakecluster.Metadata
	nodes   []*fakecluster.Storage
	cache   *metacache.Cache
	offsets *fakecluster.Offsets
	shares  *fakeShares
	url     string
}

// fakeShares answers the share-group look-ups from descriptions set by the
// test (the fake offsets service serves consumer groups only).
type fakeShares struct {
	mu    sync.Mutex
	descs map[string]shares.Description
}

func (f *fakeShares) List(context.Context) ([]shares.Listing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []shares.Listing
	for name, d := range f.descs {
		out = append(out, shares.Listing{Group: name, Topics: 1, Members: len(d.Members)})
	}
	return out, nil
}

func (f *fakeShares) Describe(_ context.Context, group string) (*shares.Description, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.descs[group]
	if !ok {
		return nil, protocol.GroupIDNotFound.Err("no share group %q", group)
	}
	return &d, nil
}

// testLookupTimeout keeps the tests of backends that never answer short.
const testLookupTimeout = 500 * time.Millisecond

func newEnv(t *testing.T, storageNodes int) *env {
	t.Helper()
	e := &env{}
	var ns []cluster.Node
	for i := 0; i < storageNodes; i++ {
		s, err := fakecluster.NewStorage()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		e.nodes = append(e.nodes, s)
		ns = append(ns, cluster.Node{ID: int32(i + 1), Addr: s.Addr(), AdvertisedAddr: fmt.Sprintf("public.example:%d", 9000+i), Alive: true})
	}
	e.md = fakecluster.NewMetadata(ns...)
	t.Cleanup(e.md.Close)
	mcfg := metacache.DefaultConfig()
	mcfg.WatchWait = 2 * time.Second
	mcfg.RequestTimeout = testLookupTimeout
	var err error
	if e.cache, err = metacache.New(mcfg, cluster.NewClient([]string{e.md.URL()}), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cache.Stop)
	e.offsets = fakecluster.NewOffsets("")
	t.Cleanup(e.offsets.Close)
	pool := storageclient.NewPool("console-test")
	t.Cleanup(func() { _ = pool.Close() })
	cfg := DefaultConfig()
	cfg.LookupTimeout = testLookupTimeout
	e.shares = &fakeShares{descs: map[string]shares.Description{}}
	c, err := New(cfg, Sources{Metadata: e.cache, Replicas: pool, Groups: groups.NewClient([]string{e.offsets.URL()}), Shares: e.shares}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.url = serve(t, c.Serve)
	return e
}

// serve runs handler on a fasthttp server on 127.0.0.1:0 until the test ends
// and returns its base URL.
func serve(t *testing.T, handler fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: handler}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// startWatching starts the cache's watch and waits for its first snapshot.
func (e *env) startWatching(t *testing.T) {
	t.Helper()
	e.cache.Start()
	testkit.Eventually(t, 5*time.Second, e.cache.Ready) // fails naming what the cache lacks
}

// produce appends n records to a partition of node i (from 0).
func (e *env) produce(t *testing.T, i int, topic string, partition int32, n int) {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	for j := 0; j < n; j++ {
		b.Append(record.Record{Timestamp: 1, Value: []byte("value")})
	}
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c, err := storageclient.Dial(context.Background(), e.nodes[i].Addr(), "console-test-producer")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var resp protocol.ProduceResponse
	req := &protocol.ProduceRequest{Topic: topic, Partition: partition, Acks: protocol.AcksAll, TimeoutMs: 5000}
	if _, err := c.Call(context.Background(), protocol.APIProduce, req, batch, &resp); err != nil {
		t.Fatal(err)
	}
}

// answer is an answer of the console.
type answer struct {
	status int
	header http.Header
	body   string
}

func (e *env) get(t *testing.T, path string) answer {
	t.Helper()
	return e.do(t, http.MethodGet, path)
}

func (e *env) do(t *testing.T, method, path string) answer {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// mustContain fails unless the answer holds every fragment.
func (p answer) mustContain(t *testing.T, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(p.body, f) {
			t.Fatalf("answer (%d) lacks %q:\n%s", p.status, f, p.body)
		}
	}
}

// silentNode is a storage node that accepts connections and never answers.
func silentNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
