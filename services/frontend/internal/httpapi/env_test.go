package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
	"github.com/sluicemq/sluice/services/frontend/internal/forward"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// env is a frontend HTTP server on 127.0.0.1:0 in front of fake storage nodes
// (real sockets, the storage protocol) and a fake metadata service (HTTP).
type env struct {
	md       *fakecluster.Metadata
	nodes    []*fakecluster.Storage
	cache    *metacache.Cache
	producer *produce.Producer
	offsets  *fakecluster.Offsets
	srv      *Server
	url      string
}

type envOptions struct {
	nodes   int
	http    func(*Config)
	produce func(*produce.Config)
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{}
	var ns []cluster.Node
	for i := 0; i < o.nodes; i++ {
		s, err := fakecluster.NewStorage()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		e.nodes = append(e.nodes, s)
		ns = append(ns, cluster.Node{ID: int32(i + 1), Addr: s.Addr(), AdvertisedAddr: "unreachable.example:1", Alive: true})
	}
	e.md = fakecluster.NewMetadata(ns...)
	t.Cleanup(e.md.Close)

	client := cluster.NewClient([]string{e.md.URL()})
	mcfg := metacache.DefaultConfig()
	mcfg.WatchWait = 2 * time.Second
	var err error
	if e.cache, err = metacache.New(mcfg, client, nil); err != nil {
		t.Fatal(err)
	}
	e.cache.Start()
	t.Cleanup(e.cache.Stop)

	pool := storageclient.NewPool("test-frontend")
	t.Cleanup(func() { _ = pool.Close() })
	pcfg := produce.DefaultConfig()
	pcfg.Timeout = 5 * time.Second
	pcfg.RetryBackoff = 5 * time.Millisecond
	pcfg.MaxRetryBackoff = 50 * time.Millisecond
	pcfg.UnknownTopicMaxAge = 0 // tests create topics behind the cache's back
	if o.produce != nil {
		o.produce(&pcfg)
	}
	if e.producer, err = produce.NewProducer(pcfg, e.cache, produce.PoolSender{Pool: pool}, client, produce.NewMetrics(nil), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.producer.Close) // after the server's stop, registered later

	hcfg := DefaultConfig()
	hcfg.Addr = "127.0.0.1:0"
	hcfg.AdminTimeout = 5 * time.Second
	if o.http != nil {
		o.http(&hcfg)
	}
	fpool := storageclient.NewPool("test-frontend-fetch")
	t.Cleanup(func() { _ = fpool.Close() })
	fcfg := fetch.DefaultConfig()
	fcfg.Timeout = 5 * time.Second
	fcfg.RetryBackoff = 5 * time.Millisecond
	fcfg.UnknownTopicMaxAge = 0
	fetcher, err := fetch.New(fcfg, e.cache, fpool)
	if err != nil {
		t.Fatal(err)
	}
	e.offsets = fakecluster.NewOffsets("")
	t.Cleanup(e.offsets.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // a replica that is down: the relay fails over
	relay := forward.New("offsets", []string{down.URL, e.offsets.URL()}, protocol.NotCoordinator)
	d := Deps{Producer: e.producer, Fetcher: fetcher, Admin: client, Offsets: relay, Cache: e.cache}
	if e.srv, err = New(hcfg, d, nil); err != nil {
		t.Fatal(err)
	}
	e.srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	e.url = "http://" + e.srv.Addr()
	return e
}

// reply is an HTTP answer with its body read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", r.status, r.body, err)
	}
}

// errBody decodes the JSON error body every error answer carries.
func (r reply) errBody(t *testing.T) cluster.ErrorBody {
	t.Helper()
	var eb cluster.ErrorBody
	r.json(t, &eb)
	if eb.Error == "" {
		t.Fatalf("error answer %d without a reason: %s", r.status, r.body)
	}
	return eb
}

func (e *env) do(t *testing.T, method, path, contentType string, body []byte, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) produceJSON(t *testing.T, topic, query, body string) reply {
	t.Helper()
	return e.do(t, http.MethodPost, "/v1/topics/"+topic+"/records"+query, "application/json", []byte(body))
}

// offsets is the produce answer.
type offsets struct {
	Offsets []struct {
		Partition int32  `json:"partition"`
		Offset    *int64 `json:"offset"`
		ErrorCode int16  `json:"error_code"`
		Error     string `json:"error"`
	} `json:"offsets"`
}

type (
	produceConfig = produce.Config
	produceResult = produce.Result
	fakeAppended  = fakecluster.Appended
)

// readAnswer reads one response from a raw connection, waiting at most 10 s.
func readAnswer(t testing.TB, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}
