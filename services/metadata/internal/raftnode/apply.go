package raftnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// ApplyPath is the leader's internal HTTP route that applies a command
// forwarded by another member. The API serves it with ServeApply's logic.
const ApplyPath = "/v1/internal/apply"

// ForwardedHeader marks a request relayed by a member; its value is the
// sender's id. A member that is not leader answers such a request with
// NOT_CONTROLLER instead of relaying it again, so requests never loop.
const ForwardedHeader = "X-Sluice-Forwarded-By"

// maxForwardResponse caps a leader's answer read by Forward.
const maxForwardResponse = 64 << 20

// ApplyResponse is the body of a 200 answer on ApplyPath: the command was
// committed and applied; Rejected is set when the FSM refused it.
type ApplyResponse struct {
	Index     uint64             `json:"index"`
	Epoch     int64              `json:"epoch,omitempty"`
	Topic     *cluster.Topic     `json:"topic,omitempty"`
	Partition *cluster.Partition `json:"partition,omitempty"`
	Rejected  *cluster.ErrorBody `json:"rejected,omitempty"`
}

// Apply commits cmd and returns the FSM's result. On the leader it proposes
// directly; on any other member it forwards the command to the leader's HTTP
// API and the returned Result.Err is then a *protocol.Error carrying the
// leader's code. The error return is for failures to commit (no leader,
// timeout, leadership lost); a command the FSM rejects comes back in
// Result.Err.
func (n *Node) Apply(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	b, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	if n.IsLeader() {
		return n.ApplyLocal(ctx, b)
	}
	return n.forwardApply(ctx, b)
}

// Propose commits cmd on this member only: ErrNotLeader when it does not
// lead. Decisions taken from the leader's own view (placement, liveness,
// elections) use it, so a deposed leader's decision is never relayed to the
// new leader.
func (n *Node) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	b, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	return n.ApplyLocal(ctx, b)
}

// ApplyLocal proposes encoded command bytes on this member, which must lead.
func (n *Node) ApplyLocal(ctx context.Context, data []byte) (*fsm.Result, error) {
	r := n.raft.Load()
	if r == nil {
		return nil, ErrNotStarted
	}
	f := r.Apply(data, n.timeout(ctx))
	if err := wait(ctx, f); err != nil {
		return nil, err
	}
	res, ok := f.Response().(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("raft apply: unexpected FSM response %T", f.Response())
	}
	return res, nil
}

func (n *Node) forwardApply(ctx context.Context, data []byte) (*fsm.Result, error) {
	status, _, body, err := n.Forward(ctx, http.MethodPost, ApplyPath, data)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, decodeErrorBody(status, body)
	}
	var ar ApplyResponse
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("%w: leader's apply answer: %w", ErrForward, err)
	}
	res := &fsm.Result{Index: ar.Index, Epoch: ar.Epoch, Topic: ar.Topic, Partition: ar.Partition}
	if ar.Rejected != nil {
		res.Err = &protocol.Error{Code: protocol.Code(ar.Rejected.ErrorCode), Message: ar.Rejected.Error}
	}
	return res, nil
}

// decodeErrorBody turns a leader's non-2xx answer into an error, keeping the
// wire code when the body is an ErrorBody.
func decodeErrorBody(status int, body []byte) error {
	var eb cluster.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
		return &protocol.Error{Code: protocol.Code(eb.ErrorCode), Message: eb.Error}
	}
	return fmt.Errorf("%w: leader answered HTTP %d: %s", ErrForward, status, bytes.TrimSpace(body))
}

// Forward relays an HTTP request (method, path with query, JSON body) to the
// leader's HTTP API and returns its status, content type and body verbatim.
// It fails with ErrNoLeader, ErrLeaderAddressUnknown, ErrNotLeader (when this
// member is the leader: the caller should have served the request) or
// ErrForward. It is bounded by ctx's deadline, or by ForwardTimeout when ctx
// has none.
func (n *Node) Forward(ctx context.Context, method, pathQuery string, body []byte) (int, string, []byte, error) {
	if n.raft.Load() == nil {
		return 0, "", nil, ErrNotStarted
	}
	id, addr := n.Leader()
	switch {
	case id == "":
		return 0, "", nil, ErrNoLeader
	case id == n.cfg.ID:
		return 0, "", nil, ErrNotLeader
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
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+pathQuery, rd)
	if err != nil {
		return 0, "", nil, fmt.Errorf("%w: %w", ErrForward, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(ForwardedHeader, n.cfg.ID)
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
