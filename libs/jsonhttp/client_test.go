package jsonhttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
)

func server(t *testing.T, status int, body string, hits *atomic.Int32) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestDoFailsOverAndRemembersTheAnsweringReplica(t *testing.T) {
	var down, notLeader, leader atomic.Int32
	dead := server(t, 200, "", &down)
	dead.Close() // connection refused
	nl := server(t, 503, `{"error_code":16,"error":"not the coordinator"}`, &notLeader)
	ok := server(t, 200, `{"v":7}`, &leader)
	c := New("offsets", []string{dead.URL, nl.URL, " " + ok.Listener.Addr().String() + "/ "}, func(code protocol.Code) bool { return code == protocol.NotCoordinator })
	var out struct{ V int }
	if err := c.Do(context.Background(), http.MethodGet, "/x", nil, &out); err != nil || out.V != 7 {
		t.Fatalf("Do = %v, %+v", err, out)
	}
	if notLeader.Load() != 1 || leader.Load() != 1 {
		t.Fatalf("hits: not-leader %d, leader %d", notLeader.Load(), leader.Load())
	}
	// The next request goes straight to the replica that answered.
	if err := c.Do(context.Background(), http.MethodGet, "/x", nil, &out); err != nil || notLeader.Load() != 1 || leader.Load() != 2 {
		t.Fatalf("second Do: %v, hits %d/%d", err, notLeader.Load(), leader.Load())
	}
}

// TestDoFollowsTheLeaderOfARelayedAnswer: a replica that relayed the
// request to its leader names the leader, and the next request goes there.
func TestDoFollowsTheLeaderOfARelayedAnswer(t *testing.T) {
	var relayed, direct atomic.Int32
	leader := server(t, 200, `{"v":1}`, &direct)
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		relayed.Add(1)
		w.Header().Set(LeaderHeader, leader.Listener.Addr().String())
		w.Write([]byte(`{"v":1}`))
	}))
	t.Cleanup(follower.Close)
	c := New("offsets", []string{follower.URL, leader.URL}, nil)
	var out struct{ V int }
	for range 3 {
		if err := c.Do(context.Background(), http.MethodPost, "/x", nil, &out); err != nil || out.V != 1 {
			t.Fatalf("Do = %v, %+v", err, out)
		}
	}
	if relayed.Load() != 1 || direct.Load() != 2 {
		t.Fatalf("relayed %d, direct %d: after the first answer named the leader, requests go there", relayed.Load(), direct.Load())
	}
}

func TestDoReturnsWireErrorsWithoutRetrying(t *testing.T) {
	var a, b atomic.Int32
	first := server(t, 409, `{"error_code":25,"error":"member gone"}`, &a)
	second := server(t, 200, `{}`, &b)
	c := New("offsets", []string{first.URL, second.URL}, func(code protocol.Code) bool { return code == protocol.NotCoordinator })
	err := c.Do(context.Background(), http.MethodPost, "/x", map[string]int{"a": 1}, nil)
	if !errors.Is(err, &protocol.Error{Code: protocol.UnknownMemberID}) || b.Load() != 0 {
		t.Fatalf("err = %v, second replica hits %d; want UNKNOWN_MEMBER_ID from the first only", err, b.Load())
	}
	plain := server(t, 500, "boom", &a)
	c = New("x", []string{plain.URL}, nil)
	if err := c.Do(context.Background(), http.MethodGet, "/", nil, nil); err == nil || protocol.CodeOf(err) != protocol.UnknownServerError {
		t.Fatalf("non-JSON error answer: %v", err)
	}
	if err := New("x", nil, nil).Do(context.Background(), http.MethodGet, "/", nil, nil); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("no address: %v", err)
	}
}

// TestDoAtMostOnceStopsWhenTheRequestMayHaveArrived: a replica that took
// the request and dropped the connection before answering is not followed
// by another attempt elsewhere (the request may have applied); a refused
// connection and a retry-elsewhere answer still move on.
func TestDoAtMostOnceStopsWhenTheRequestMayHaveArrived(t *testing.T) {
	var took, next atomic.Int32
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		took.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the request arrived; its answer is lost
		}
	}))
	t.Cleanup(hangUp.Close)
	ok := server(t, 200, `{"v":3}`, &next)
	var down atomic.Int32
	dead := server(t, 200, "", &down)
	dead.Close()
	nl := server(t, 503, `{"error_code":16,"error":"not the coordinator"}`, &down)
	retry := func(code protocol.Code) bool { return code == protocol.NotCoordinator }

	c := New("offsets", []string{hangUp.URL, ok.URL}, retry)
	if err := c.DoAtMostOnce(context.Background(), http.MethodPost, "/acks", nil, nil); err == nil {
		t.Fatal("DoAtMostOnce answered although the replica hung up on the request")
	}
	if took.Load() != 1 || next.Load() != 0 {
		t.Fatalf("hits: %d at the replica that hung up, %d elsewhere; want 1 and 0", took.Load(), next.Load())
	}
	// The same with Do: another attempt at the next replica.
	if err := c.Do(context.Background(), http.MethodPost, "/acks", nil, nil); err != nil || next.Load() != 1 {
		t.Fatalf("Do = %v, %d hits elsewhere", err, next.Load())
	}

	c = New("offsets", []string{dead.URL, nl.URL, ok.URL}, retry)
	var out struct{ V int }
	if err := c.DoAtMostOnce(context.Background(), http.MethodPost, "/acks", nil, &out); err != nil || out.V != 3 {
		t.Fatalf("DoAtMostOnce past a refused connection and a retry-elsewhere answer = %v, %+v", err, out)
	}
}

// TestWithHeaderAddsHeaders: each WithHeader adds one header to those of
// the client it copies (a relay names both the principal and its client's
// address), and the client copied keeps its own.
func TestWithHeaderAddsHeaders(t *testing.T) {
	got := make(chan http.Header, 2)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(s.Close)
	base := New("offsets", []string{s.URL}, nil).WithHeader("X-One", "1")
	both := base.WithHeader("X-Two", "2")
	if err := both.Do(context.Background(), http.MethodGet, "/x", nil, nil); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("X-One") != "1" || h.Get("X-Two") != "2" {
		t.Fatalf("the chained client sent X-One %q, X-Two %q", h.Get("X-One"), h.Get("X-Two"))
	}
	if err := base.Do(context.Background(), http.MethodGet, "/x", nil, nil); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("X-One") != "1" || h.Get("X-Two") != "" {
		t.Fatalf("the client copied sent X-One %q, X-Two %q", h.Get("X-One"), h.Get("X-Two"))
	}
}
