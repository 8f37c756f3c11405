package service

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestHealthCheck(t *testing.T) {
	ready := NewReadiness()
	var notReady error
	ready.Add("thing", func() error { return notReady })
	a, err := NewAdmin("127.0.0.1:0", false, NewRegistry(), ready, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	defer a.Stop(t.Context())
	_, port, _ := net.SplitHostPort(a.Addr())
	var errb bytes.Buffer
	if code := HealthCheck([]string{"-addr", "0.0.0.0:" + port}, &errb); code != 0 {
		t.Fatalf("ready: exit %d %s", code, errb.String())
	}
	notReady = http.ErrServerClosed
	if code := HealthCheck([]string{"-addr", a.Addr()}, &errb); code != 1 || !strings.Contains(errb.String(), "503") {
		t.Fatalf("not ready: exit %d %q", code, errb.String())
	}
	if code := HealthCheck([]string{"-addr", a.Addr(), "-path", "/healthz"}, &errb); code != 0 {
		t.Fatalf("healthz while not ready: exit %d", code)
	}
	t.Setenv("SLUICE_ADMIN_ADDR", "")
	if code := HealthCheck(nil, &errb); code != 2 {
		t.Fatalf("no address: exit %d", code)
	}
	if code := HealthCheck([]string{"-addr", "127.0.0.1:1"}, &errb); code != 1 {
		t.Fatalf("nothing listening: exit %d", code)
	}
}
