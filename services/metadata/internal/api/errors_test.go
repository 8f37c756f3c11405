package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// answer runs writeError on err and returns the status and body.
func answer(t *testing.T, err error) (int, cluster.ErrorBody) {
	t.Helper()
	var ctx fasthttp.RequestCtx
	writeError(&ctx, err)
	var body cluster.ErrorBody
	if jerr := json.Unmarshal(ctx.Response.Body(), &body); jerr != nil {
		t.Fatalf("%v: body %q: %v", err, ctx.Response.Body(), jerr)
	}
	return ctx.Response.StatusCode(), body
}

// TestEveryCodeAnswersWithItsStatus walks every wire code, and every internal
// error of the mapping, through the service's error answer: the status is the
// code's in protocol's table (or the one the leader gave an error relayed
// from it), the body keeps the code and message.
func TestEveryCodeAnswersWithItsStatus(t *testing.T) {
	for _, info := range protocol.Codes() {
		if info.Code == protocol.None {
			continue
		}
		for _, err := range []error{info.Code.Err("because"), &protocol.Error{Code: info.Code, Message: "because", Status: 599}} {
			status, body := answer(t, err)
			if status != protocol.HTTPStatusOf(err) || protocol.Code(body.ErrorCode) != info.Code || body.Error != "because" {
				t.Errorf("%v: HTTP %d %+v, want %d", info.Name, status, body, protocol.HTTPStatusOf(err))
			}
		}
	}
	for _, m := range mapping {
		err := fmt.Errorf("%w: detail", m.err)
		status, body := answer(t, err)
		if status != m.code.HTTPStatus() || protocol.Code(body.ErrorCode) != m.code || body.Error != err.Error() {
			t.Errorf("%v: HTTP %d %+v, want %d %v", m.err, status, body, m.code.HTTPStatus(), m.code)
		}
	}
	if status, body := answer(t, errors.New("no code")); status != http.StatusInternalServerError || protocol.Code(body.ErrorCode) != protocol.UnknownServerError {
		t.Errorf("an error without a code: HTTP %d %+v", status, body)
	}
}
