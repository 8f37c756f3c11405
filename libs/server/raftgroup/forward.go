package raftgroup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/sluicemq/sluice/libs/server/service"
)

// ApplyPath is the leader's internal HTTP route that applies a command
// forwarded by another member. The service's API serves it by calling
// ApplyLocal with the request body and answering with the FSM's result.
const ApplyPath = "/v1/internal/apply"

// ForwardedHeader marks a request relayed by a member; its value is the
// sender's id. A member that is not leader answers such a request with
// NOT_CONTROLLER instead of relaying it again, so requests never loop.
const ForwardedHeader = "X-Sluice-Forwarded-By"

// maxForwardResponse caps a leader's answer read by Forward.
const maxForwardResponse = 64 << 20

// Forward relays an HTTP request (method, path with query, JSON body, and
// the principal of service.RelayContext in ctx) to the leader's HTTP API and
// returns its status, content type and body verbatim.
// It fails with ErrNotStarted, ErrNoLeader, ErrLeaderAddressUnknown,
// ErrNotLeader (when this member is the leader: the caller should have served
// the request) or ErrForward. It is bounded by ctx's deadline, or by
// ForwardTimeout when ctx has none.
func (n *Node) Forward(ctx context.Context, method, pathQuery string, body []byte) (int, string, []byte, error) {
	if n.raft.Load() == nil {
		return 0, "", nil, ErrNotStarted
	}
	id, addr := n.Leader()
	switch {
	case id == "":
		return 0, "", nil, ErrNoLeader
	case id == n.cfg.ID:
		return 0, "", nil, n.errNotLeader()
	case addr == "":
		return 0, "", nil, fmt.Errorf("%w: leader %q is not in -peers", ErrLeaderAddressUnknown, id)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ForwardTimeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	scheme := "http://"
	if n.cfg.ClientTLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+addr+pathQuery, rd)
	if err != nil {
		return 0, "", nil, fmt.Errorf("%w: %w", ErrForward, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(ForwardedHeader, n.cfg.ID)
	if p, host := service.RelayPrincipal(ctx); p != "" {
		req.Header.Set(service.PrincipalHeader, p)
		req.Header.Set(service.ClientHostHeader, host)
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return 0, "", nil, fmt.Errorf("%w: leader %s at %s: %w", ErrForward, id, addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardResponse))
	if err != nil {
		return 0, "", nil, fmt.Errorf("%w: leader %s at %s: %w", ErrForward, id, addr, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), data, nil
}
