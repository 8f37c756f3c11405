package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
)

// forwardGroups serves every /v1/groups route (and every /v1/share-groups
// route but share.go's) by relaying it verbatim (method, path as the
// client escaped it, query, body) to the offsets service and answering
// with its status and body: consumer and share groups live there, and
// clients that reach only the frontend manage them through it. prefix is
// the routes' path.
func (s *Server) forwardGroups(ctx *fasthttp.RequestCtx, id, prefix string) {
	path := string(ctx.URI().PathOriginal())
	if path != prefix && !strings.HasPrefix(path, prefix+"/") {
		// The decoded path is a groups route but the raw one is not (dot
		// segments, escapes): relay only what plainly is one.
		service.NotFound(ctx)
		return
	}
	if q := ctx.URI().QueryString(); len(q) > 0 {
		path += "?" + string(q)
	}
	h := http.Header{}
	h.Set(headerRequestID, id)
	if p, ok := ctx.UserValue(principalKey).(*cluster.Principal); ok {
		// The offsets service checks the group's own topics for it.
		h.Set(service.PrincipalHeader, p.Name)
		h.Set(service.ClientHostHeader, p.Host)
	}
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 {
		h.Set("Content-Type", string(ct))
	}
	if a := ctx.Request.Header.Peek("Accept"); len(a) > 0 {
		h.Set("Accept", string(a))
	}
	// A copy, not ctx.PostBody(): fasthttp reuses the request's buffer once
	// the handler returns, and net/http's transport may still be reading a
	// request body then (its write loop runs on after a cancel or a
	// deadline, or while a replica is failed over).
	body := append([]byte(nil), ctx.PostBody()...)
	actx, cancel := s.adminContext()
	defer cancel()
	resp, err := s.offsets.Forward(actx, string(ctx.Method()), path, h, body)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			service.WriteCode(ctx, protocol.RequestTimedOut, "offsets service: "+err.Error())
			return
		}
		service.WriteCode(ctx, protocol.NetworkException, err.Error())
		return
	}
	for k := range resp.Header {
		ctx.Response.Header.Set(k, resp.Header.Get(k))
	}
	ctx.SetStatusCode(resp.Status)
	ctx.SetBody(resp.Body)
}
