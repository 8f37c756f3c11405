package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
)

// answer runs writeErr on err and returns the status and body.
func answer(t *testing.T, err error) (int, cluster.ErrorBody) {
	t.Helper()
	var ctx fasthttp.RequestCtx
	writeErr(&ctx, err)
	var body cluster.ErrorBody
	if jerr := json.Unmarshal(ctx.Response.Body(), &body); jerr != nil {
		t.Fatalf("%v: body %q: %v", err, ctx.Response.Body(), jerr)
	}
	return ctx.Response.StatusCode(), body
}

// TestEveryCodeAnswersWithItsStatus walks every wire code through the
// frontend's error answer, both as an error of its own and as one relayed
// from metadata or offsets through their JSON client: the status is the
// code's in protocol's table, or the one the answering service gave.
func TestEveryCodeAnswersWithItsStatus(t *testing.T) {
	var mu sync.Mutex // guards upstream
	var upstream struct {
		status int
		code   protocol.Code
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		status, code := upstream.status, upstream.code
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(cluster.ErrorBody{ErrorCode: int16(code), Error: "because"})
	}))
	defer srv.Close()
	client := jsonhttp.New("metadata", []string{srv.URL}, func(protocol.Code) bool { return false })
	for _, info := range protocol.Codes() {
		if info.Code == protocol.None {
			continue
		}
		if status, body := answer(t, info.Code.Err("because")); status != info.Status || protocol.Code(body.ErrorCode) != info.Code {
			t.Errorf("%v: HTTP %d %+v, want %d", info.Name, status, body, info.Status)
		}
		// Relayed: the answering service's status stays, even one that is
		// not the code's own (an older service's, say).
		for _, status := range []int{info.Status, http.StatusTeapot} {
			if status < 400 {
				continue
			}
			mu.Lock()
			upstream.status, upstream.code = status, info.Code
			mu.Unlock()
			err := client.Do(context.Background(), http.MethodGet, "/v1/x", nil, nil)
			if got, body := answer(t, fmt.Errorf("create topic: %w", err)); got != status || protocol.Code(body.ErrorCode) != info.Code || !strings.Contains(body.Error, "because") {
				t.Errorf("%v relayed with HTTP %d: answered HTTP %d %+v", info.Name, status, got, body)
			}
		}
	}
	for err, want := range map[error]struct {
		status int
		code   protocol.Code
	}{
		context.DeadlineExceeded:    {http.StatusGatewayTimeout, protocol.RequestTimedOut},
		errors.New("dial: refused"): {http.StatusServiceUnavailable, protocol.NetworkException},
		jsonhttp.ErrNoAddress:       {http.StatusServiceUnavailable, protocol.NetworkException},
	} {
		if status, body := answer(t, err); status != want.status || protocol.Code(body.ErrorCode) != want.code || body.Error != err.Error() {
			t.Errorf("%v: HTTP %d %+v, want %d %v", err, status, body, want.status, want.code)
		}
	}
}
