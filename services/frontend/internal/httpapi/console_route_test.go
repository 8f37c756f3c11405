package httpapi

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestConsoleRoute: /console and the paths under it go to the console
// handler, with the request id set; a path that only begins like it, or any
// console path on a server without a console, is the API's JSON 404.
func TestConsoleRoute(t *testing.T) {
	console := func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("console " + string(ctx.Path()))
	}
	start := func(d Deps) string {
		cfg := DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		s, err := New(cfg, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		return "http://" + s.Addr()
	}
	with, without := start(Deps{Console: console}), start(Deps{})
	for _, tc := range []struct {
		base, path string
		status     int
		body       string
	}{
		{with, "/console", http.StatusOK, "console /console"},
		{with, "/console/topics/orders", http.StatusOK, "console /console/topics/orders"},
		{with, "/consoles", http.StatusNotFound, ""},
		{without, "/console", http.StatusNotFound, ""},
	} {
		resp, err := http.Get(tc.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := reply{status: resp.StatusCode, header: resp.Header, body: b}
		if r.status != tc.status || r.header.Get(headerRequestID) == "" {
			t.Fatalf("%s: %d (request id %q)", tc.path, r.status, r.header.Get(headerRequestID))
		}
		if tc.body != "" && string(r.body) != tc.body {
			t.Fatalf("%s: body %q, want %q", tc.path, r.body, tc.body)
		}
		if tc.body == "" {
			r.errBody(t)
		}
	}
}
