package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/groupcommit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// maxMarkersPerRequest bounds the markers of one WriteTxnMarkers request.
const maxMarkersPerRequest = 4096

// TxnMarkerWriter writes transaction markers at their partitions'
// leaders for the transaction coordinator. The markers bound for a node
// while a request to it is in flight go together in that node's next
// request (group commit per node, as Kafka's coordinator queues markers
// per broker), where each partition's markers are one append; a slow node
// holds up only the markers it leads. It is safe for concurrent use.
type TxnMarkerWriter struct {
	meta    *Metadata
	pool    *storageclient.Pool
	timeout time.Duration // a request's wait for the in-sync replicas

	mu    sync.Mutex
	nodes map[string]*groupcommit.Batcher[protocol.TxnMarker, error] // by address
}

// NewTxnMarkerWriter returns a writer reaching the leaders through meta
// and pool; timeout bounds a node's wait for its in-sync replicas.
func NewTxnMarkerWriter(meta *Metadata, pool *storageclient.Pool, timeout time.Duration) *TxnMarkerWriter {
	return &TxnMarkerWriter{meta: meta, pool: pool, timeout: timeout, nodes: map[string]*groupcommit.Batcher[protocol.TxnMarker, error]{}}
}

// Write writes ms and returns one error per marker (nil: written and held
// by the in-sync replicas). A marker whose leader was unknown or moved is
// written again on its own, following leader changes as WriteTxnMarker
// does; so is every marker of a request that failed as a whole (a lost
// connection, a node of an earlier release that does not know the
// batched request).
func (w *TxnMarkerWriter) Write(ctx context.Context, ms []protocol.TxnMarker) []error {
	errs := make([]error, len(ms))
	byAddr := map[string][]int{}
	for i, m := range ms {
		addr, err := w.meta.Leader(ctx, m.Topic, m.Partition)
		if err != nil {
			errs[i] = err
			continue
		}
		byAddr[addr] = append(byAddr[addr], i)
	}
	var wg sync.WaitGroup
	for addr, idx := range byAddr {
		wg.Go(func() {
			sub := make([]protocol.TxnMarker, len(idx))
			for k, i := range idx {
				sub[k] = ms[i]
			}
			outs, failed := w.node(addr).DoAll(ctx, sub)
			for k, i := range idx {
				errs[i] = errors.Join(failed[k], outs[k])
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		var alone *retryAlone
		if err != nil && ctx.Err() == nil && (storageclient.IsRetriable(err) || errors.As(err, &alone)) {
			wg.Go(func() {
				m := ms[i]
				_, errs[i] = WriteTxnMarker(ctx, w.meta, w.pool, protocol.WriteTxnMarkerRequest{Topic: m.Topic, Partition: m.Partition,
					ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch,
					TimeoutMs: int32(w.timeout / time.Millisecond)})
			})
		}
	}
	wg.Wait()
	return errs
}

// Counts reports the batched requests sent and the markers they held.
func (w *TxnMarkerWriter) Counts() (requests, markers int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.nodes {
		r, m := b.Counts()
		requests, markers = requests+r, markers+m
	}
	return requests, markers
}

// Close waits for the requests in flight.
func (w *TxnMarkerWriter) Close() {
	w.mu.Lock()
	nodes := make([]*groupcommit.Batcher[protocol.TxnMarker, error], 0, len(w.nodes))
	for _, b := range w.nodes {
		nodes = append(nodes, b)
	}
	w.mu.Unlock()
	for _, b := range nodes {
		b.Wait()
	}
}

// node returns the batcher of the node at addr.
func (w *TxnMarkerWriter) node(addr string) *groupcommit.Batcher[protocol.TxnMarker, error] {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.nodes[addr]
	if b == nil {
		b = groupcommit.New(func(ctx context.Context, ms []protocol.TxnMarker) ([]error, error) { return w.send(ctx, addr, ms) },
			maxMarkersPerRequest, maxMarkersPerRequest, func(protocol.TxnMarker) int { return 1 })
		w.nodes[addr] = b
	}
	return b
}

// send sends one WriteTxnMarkers request to the node at addr.
func (w *TxnMarkerWriter) send(ctx context.Context, addr string, ms []protocol.TxnMarker) ([]error, error) {
	c, err := w.pool.Get(ctx, addr)
	if err != nil {
		return nil, &retryAlone{err}
	}
	var resp protocol.WriteTxnMarkersResponse
	req := &protocol.WriteTxnMarkersRequest{Markers: ms, TimeoutMs: int32(w.timeout / time.Millisecond)}
	if _, err := c.Call(ctx, protocol.APIWriteTxnMarkers, req, nil, &resp); err != nil {
		return nil, &retryAlone{err}
	}
	if len(resp.Results) != len(ms) {
		return nil, &retryAlone{protocol.UnknownServerError.Err("%s answered %d markers of %d", addr, len(resp.Results), len(ms))}
	}
	errs := make([]error, len(ms))
	for i, r := range resp.Results {
		errs[i] = r.Err
	}
	return errs, nil
}

// retryAlone marks a marker whose batched request failed as a whole.
type retryAlone struct{ err error }

func (r *retryAlone) Error() string { return r.err.Error() }
func (r *retryAlone) Unwrap() error { return r.err }
