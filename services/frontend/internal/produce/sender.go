package produce

import (
	"context"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// PoolSender sends produce requests over a storageclient.Pool: one pipelined
// connection per storage node, shared by every request of the frontend, so
// requests for one partition reach its leader in the order they were sent.
type PoolSender struct {
	Pool *storageclient.Pool
}

// Produce implements Sender.
func (s PoolSender) Produce(ctx context.Context, addr string, req *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error) {
	var resp protocol.ProduceResponse
	conn, err := s.Pool.Get(ctx, addr)
	if err != nil {
		return resp, neverSent{err} // no connection: nothing reached the leader
	}
	_, err = conn.Call(ctx, protocol.APIProduce, req, batch, &resp)
	return resp, err
}

// neverSent marks an attempt's error as one from before anything was sent,
// so that it leaves the batch's outcome known (unanswered is false).
type neverSent struct{ err error }

func (e neverSent) Error() string { return e.err.Error() }
func (e neverSent) Unwrap() error { return e.err }
