package groups

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
)

// TestOffsetsConnRetriesElsewhereAndActsFor: the offsets clients' shell
// moves to the next replica on NOT_COORDINATOR, and a client For a
// principal names it and its host on every request while the client it
// copies names no one.
func TestOffsetsConnRetriesElsewhereAndActsFor(t *testing.T) {
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(fmt.Appendf(nil, `{"error_code":%d,"error":"not the coordinator"}`, protocol.NotCoordinator))
	}))
	t.Cleanup(follower.Close)
	got := make(chan http.Header, 2)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Write([]byte(`{"groups":[]}`))
	}))
	t.Cleanup(leader.Close)

	c := NewClient([]string{follower.URL, leader.URL})
	if _, err := c.For("alice", "10.0.0.7").List(context.Background()); err != nil {
		t.Fatalf("List past a replica answering NOT_COORDINATOR: %v", err)
	}
	if h := <-got; h.Get(PrincipalHeader) != "alice" || h.Get(ClientHostHeader) != "10.0.0.7" {
		t.Fatalf("For(alice) sent principal %q, host %q", h.Get(PrincipalHeader), h.Get(ClientHostHeader))
	}
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get(PrincipalHeader) != "" {
		t.Fatalf("the client For copied sent principal %q", h.Get(PrincipalHeader))
	}
}
