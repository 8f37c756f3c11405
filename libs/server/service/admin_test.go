package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestAdminServesHealthReadinessAndMetrics(t *testing.T) {
	ready := NewReadiness()
	var notReady error = errors.New("no leader yet")
	ready.Add("raft", func() error { return notReady })
	a, err := NewAdmin("127.0.0.1:0", false, NewRegistry(), ready, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	defer a.Stop(context.Background())
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + a.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "raft: no leader yet") {
		t.Fatalf("readyz %d %q", code, body)
	}
	notReady = nil
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz after ready %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics %d", code)
	}
	if code, _ := get("/debug/pprof/"); code != 404 {
		t.Fatalf("pprof served without the flag: %d", code)
	}
}
