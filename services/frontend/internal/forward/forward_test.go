package forward

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
)

// replica is an httptest server that records what it got and answers with
// the status and body a test sets.
type replica struct {
	srv    *httptest.Server
	hits   atomic.Int32
	status int
	body   string
	got    struct{ method, uri, body, ct, id string }
}

func newReplica(t *testing.T, status int, body string) *replica {
	r := &replica{status: status, body: body}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		b, _ := io.ReadAll(req.Body)
		r.got.method, r.got.uri, r.got.body = req.Method, req.RequestURI, string(b)
		r.got.ct, r.got.id = req.Header.Get("Content-Type"), req.Header.Get("X-Request-Id")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Internal", "not relayed")
		w.WriteHeader(r.status)
		_, _ = io.WriteString(w, r.body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func TestForwardVerbatim(t *testing.T) {
	r := newReplica(t, http.StatusConflict, `{"error_code":68,"error":"group has members"}`)
	f := New("offsets", []string{strings.TrimPrefix(r.srv.URL, "http://") + "/"}, protocol.NotCoordinator)
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req-1"}, "Cookie": {"no"}}
	resp, err := f.Forward(context.Background(), http.MethodPost, "/v1/groups/a%2Fb/reset-offsets?topic=t&x=%20", h, []byte(`{"to":"earliest"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusConflict || string(resp.Body) != r.body || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Internal") != "" {
		t.Fatalf("answer %+v", resp)
	}
	g := r.got
	if g.method != http.MethodPost || g.uri != "/v1/groups/a%2Fb/reset-offsets?topic=t&x=%20" || g.body != `{"to":"earliest"}` || g.ct != "application/json" || g.id != "req-1" {
		t.Fatalf("replica got %+v", g)
	}
}

func TestForwardFailsOver(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // unreachable
	follower := newReplica(t, http.StatusServiceUnavailable, `{"error_code":16,"error":"not the coordinator"}`)
	leader := newReplica(t, http.StatusOK, `{"groups":[]}`)
	f := New("offsets", []string{down.URL, follower.srv.URL, leader.srv.URL}, protocol.NotCoordinator)
	for i := 0; i < 2; i++ {
		resp, err := f.Forward(context.Background(), http.MethodGet, "/v1/groups", nil, nil)
		if err != nil || resp.Status != http.StatusOK || string(resp.Body) != `{"groups":[]}` {
			t.Fatalf("attempt %d: %+v %v", i, resp, err)
		}
	}
	// The second request went straight to the replica that answered.
	if follower.hits.Load() != 1 || leader.hits.Load() != 2 {
		t.Fatalf("follower hit %d times, leader %d", follower.hits.Load(), leader.hits.Load())
	}
	leader.srv.Close()
	_, err := f.Forward(context.Background(), http.MethodGet, "/v1/groups", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no offsets replica answered") || !strings.Contains(err.Error(), "not the coordinator") {
		t.Fatalf("all failing: %v", err)
	}
	if _, err := New("offsets", nil, protocol.NotCoordinator).Forward(context.Background(), http.MethodGet, "/", nil, nil); err == nil {
		t.Fatal("no address: no error")
	}
}
