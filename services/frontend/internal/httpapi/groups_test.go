package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/frontend/internal/forward"
)

func TestGroupsForwardedVerbatim(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.offsets.SetAnswer(http.StatusConflict, `{"error_code":68,"error":"group g.1 has members"}`)
	r := e.do(t, http.MethodPost, "/v1/groups/g.1/reset-offsets?topic=a%20b", "application/json", []byte(`{"to":"earliest"}`), "X-Request-Id", "grp-1")
	if r.status != http.StatusConflict || string(r.body) != `{"error_code":68,"error":"group g.1 has members"}` || r.header.Get("X-Request-Id") != "grp-1" {
		t.Fatalf("answer %d %v %s", r.status, r.header, r.body)
	}
	got, body := e.offsets.LastRequest()
	if got.Method != http.MethodPost || got.RequestURI != "/v1/groups/g.1/reset-offsets?topic=a%20b" || body != `{"to":"earliest"}` ||
		got.Header.Get("Content-Type") != "application/json" || got.Header.Get("X-Request-Id") != "grp-1" {
		t.Fatalf("offsets got %s %s %q %v", got.Method, got.RequestURI, body, got.Header)
	}
	// The SDK's groups client works against the frontend.
	e.offsets.SetAnswer(http.StatusOK, `{"groups":[{"group":"g.1","state":"stable","members":2}]}`)
	ls, err := groups.NewClient([]string{e.srv.Addr()}).List(context.Background())
	if err != nil || len(ls) != 1 {
		t.Fatalf("list through the frontend: %+v %v", ls, err)
	}
	if got, _ := e.offsets.LastRequest(); got.Method != http.MethodGet || got.RequestURI != "/v1/groups" {
		t.Fatalf("offsets got %s %s", got.Method, got.RequestURI)
	}
	e.offsets.Close()
	r = e.do(t, http.MethodDelete, "/v1/groups/g.1", "", nil)
	if eb := r.errBody(t); r.status != http.StatusServiceUnavailable || eb.ErrorCode != int16(protocol.NetworkException) {
		t.Fatalf("offsets down: %d %s", r.status, r.body)
	}
}

func TestInitProducerIDForwarded(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	c := cluster.NewClient([]string{e.srv.Addr()})
	a, err := c.InitProducerID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.InitProducerID(context.Background())
	if err != nil || b.ProducerID == a.ProducerID || a.ProducerID <= 0 {
		t.Fatalf("ids %+v %+v %v", a, b, err)
	}
	if r := e.do(t, http.MethodGet, "/v1/producers", "", nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", r.status)
	}
	e.md.SetDown(true)
	if r := e.do(t, http.MethodPost, "/v1/producers", "application/json", []byte(`{}`)); r.status != http.StatusServiceUnavailable {
		t.Fatalf("metadata down: %d %s", r.status, r.body)
	}
}

// TestRequestIDOnEveryRoute: the client's X-Request-Id comes back on every
// answer, errors included, and one is made up when the client sent none.
func TestRequestIDOnEveryRoute(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, http: func(c *Config) { c.MaxBodyBytes = 4096 }})
	e.md.AddTopic("t", 1)
	big := make([]byte, 8192)
	for _, tc := range []struct{ method, path, ct, body string }{
		{http.MethodPost, "/v1/topics/t/records", "application/json", `{"records":[{"value":"a"}]}`},
		{http.MethodPost, "/v1/topics/t/records", "application/json", `{"records":[`},
		{http.MethodPost, "/v1/topics/t/records", "application/json", string(big)},
		{http.MethodPost, "/v1/topics/t/records", "application/vnd.sluice.batches+msgpack", "\x90"},
		{http.MethodPost, "/v1/topics/nope/records", "application/json", `{"records":[{"value":"a"}]}`},
		{http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=0", "", ""},
		{http.MethodGet, "/v1/topics/t/partitions/0/records?offset=99", "", ""},
		{http.MethodGet, "/v1/topics", "", ""},
		{http.MethodGet, "/v1/topics/t", "", ""},
		{http.MethodGet, "/v1/topics/missing", "", ""},
		{http.MethodPost, "/v1/topics", "application/json", `{"name":`},
		{http.MethodGet, "/v1/cluster", "", ""},
		{http.MethodPost, "/v1/producers", "application/json", `{}`},
		{http.MethodGet, "/v1/groups", "", ""},
		{http.MethodPut, "/v1/topics", "", ""},
		{http.MethodGet, "/nowhere", "", ""},
	} {
		r := e.do(t, tc.method, tc.path, tc.ct, []byte(tc.body), "X-Request-Id", "id-"+tc.method+tc.path)
		if got := r.header.Get("X-Request-Id"); got != "id-"+tc.method+tc.path {
			t.Errorf("%s %s (%d): request id %q", tc.method, tc.path, r.status, got)
		}
		if r := e.do(t, tc.method, tc.path, tc.ct, []byte(tc.body)); r.header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s (%d): no generated request id", tc.method, tc.path, r.status)
		}
	}
}

// keepRelay keeps the body of every request it relays, as net/http's
// transport may keep reading one after Forward returned.
type keepRelay struct {
	mu     sync.Mutex
	bodies [][]byte // guarded by mu
}

func (r *keepRelay) Forward(_ context.Context, _, _ string, _ http.Header, body []byte) (*forward.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, body)
	return &forward.Response{Status: http.StatusOK, Header: http.Header{}, Body: []byte(`{}`)}, nil
}

// TestGroupsRelayOwnsTheBody: the body handed to the relay is not
// fasthttp's request buffer, which the next request on the connection
// reuses.
func TestGroupsRelayOwnsTheBody(t *testing.T) {
	relay := &keepRelay{}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	s, err := New(cfg, Deps{Offsets: relay}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	first, second := strings.Repeat("a", 512), strings.Repeat("b", 512)
	for _, body := range []string{first, second} { // one keep-alive connection
		resp, err := http.Post("http://"+s.Addr()+"/v1/groups/g/commit", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	relay.mu.Lock()
	defer relay.mu.Unlock()
	if len(relay.bodies) != 2 || string(relay.bodies[0]) != first || string(relay.bodies[1]) != second {
		t.Fatalf("relayed bodies changed after their handler returned: %d bodies, first %.8q...", len(relay.bodies), relay.bodies[0])
	}
}
