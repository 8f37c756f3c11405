package service

import (
	"encoding/json"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
)

// The one way the metadata, frontend and offsets HTTP APIs answer: JSON
// bodies, and errors as jsonhttp.ErrorBody with the HTTP status of their wire
// code in protocol's table (or the status an upstream service answered a
// relayed error with).

// WriteJSON answers with v encoded as JSON.
func WriteJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(jsonhttp.ErrorBody{ErrorCode: int16(protocol.UnknownServerError), Error: "encoding the answer: " + err.Error()})
	}
	ctx.Response.ResetBody()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// WriteError answers with err: its wire code (UNKNOWN_SERVER_ERROR when it
// has none), its message and protocol.HTTPStatusOf(err).
func WriteError(ctx *fasthttp.RequestCtx, err error) {
	WriteStatus(ctx, protocol.HTTPStatusOf(err), protocol.CodeOf(err), protocol.MessageOf(err))
}

// WriteCode answers with code's error and status.
func WriteCode(ctx *fasthttp.RequestCtx, code protocol.Code, msg string) {
	WriteStatus(ctx, code.HTTPStatus(), code, msg)
}

// WriteStatus answers with an error whose HTTP status is not its code's:
// the answers of HTTP itself (no route 404, method 405, body too large 413,
// headers too large 431), which carry INVALID_REQUEST.
func WriteStatus(ctx *fasthttp.RequestCtx, status int, code protocol.Code, msg string) {
	WriteJSON(ctx, status, jsonhttp.ErrorBody{ErrorCode: int16(code), Error: msg})
}

// DecodeJSON parses the request's JSON body into v; an empty or invalid
// body is INVALID_REQUEST with the reason.
func DecodeJSON(ctx *fasthttp.RequestCtx, v any) error {
	body := ctx.PostBody()
	if len(body) == 0 {
		return protocol.InvalidRequest.Err("empty request body; want JSON")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return protocol.InvalidRequest.Err("request body is not valid JSON for this route: %v", err)
	}
	return nil
}
