package raftnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// ApplyResponse is the body of a 200 answer on ApplyPath: the command was
// committed and applied; Rejected is set when the FSM refused it.
type ApplyResponse struct {
	Index     uint64             `json:"index"`
	Epoch     int64              `json:"epoch,omitempty"`
	Topic     *cluster.Topic     `json:"topic,omitempty"`
	Partition *cluster.Partition `json:"partition,omitempty"`
	// ProducerID is the first id of the block reserved (AllocProducerIDs).
	ProducerID int64 `json:"producer_id,omitempty"`
	// Dropped lists the segments a DropRemoteSegments removed.
	Dropped  []cluster.RemoteSegment `json:"dropped,omitempty"`
	Rejected *cluster.ErrorBody      `json:"rejected,omitempty"`
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

// ApplyLocal proposes encoded command bytes on this member, which must lead,
// and returns the metadata FSM's result.
func (n *Node) ApplyLocal(ctx context.Context, data []byte) (*fsm.Result, error) {
	resp, err := n.Node.ApplyLocal(ctx, data)
	if err != nil {
		return nil, err
	}
	res, ok := resp.(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("raft apply: unexpected FSM response %T", resp)
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
	res := &fsm.Result{Index: ar.Index, Epoch: ar.Epoch, Topic: ar.Topic, Partition: ar.Partition, ProducerID: ar.ProducerID, Dropped: ar.Dropped}
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
		return &protocol.Error{Code: protocol.Code(eb.ErrorCode), Message: eb.Error, Status: status}
	}
	return fmt.Errorf("%w: leader answered HTTP %d: %s", ErrForward, status, bytes.TrimSpace(body))
}
