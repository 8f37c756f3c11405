package server

import (
	"errors"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// markerWait is one append of writeTxnMarkers waiting for the in-sync
// replicas: the request's markers at idx, at consecutive offsets from
// info.BaseOffset.
type markerWait struct {
	r    *replica.Replica
	st   replica.State
	info seglog.AppendInfo
	idx  []int
}

// writeTxnMarkers appends, for the transaction coordinator, the markers
// of the transactions that ended together on the partitions this node
// leads: each partition's markers in one append (one by one only when one
// of them is refused, to tell which), answered per marker once the
// in-sync replicas hold them, as an acks=all produce.
func (c *conn) writeTxnMarkers(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.WriteTxnMarkersRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	if !c.authorize(h, "", "") {
		return
	}
	results := make([]protocol.TxnMarkerResult, len(req.Markers))
	var waits []markerWait
	for _, idx := range markersByPartition(req.Markers) {
		first := req.Markers[idx[0]]
		fail := func(idx []int, err error) {
			for _, i := range idx {
				results[i] = protocol.TxnMarkerResult{Offset: -1, Err: markerErr(err)}
			}
		}
		r, err := c.s.mgr.Get(first.Topic, first.Partition)
		if err != nil {
			fail(idx, err)
			continue
		}
		st, err := r.CheckProduce(protocol.AcksAll)
		if err != nil {
			fail(idx, err)
			continue
		}
		info, err := r.Log.AppendMarkers(markerAppends(req.Markers, idx), st.LeaderEpoch)
		if errors.Is(err, seglog.ErrInvalidProducerEpoch) && len(idx) > 1 {
			for _, i := range idx { // one by one, to tell the refused one
				if info, err := r.Log.AppendMarkers(markerAppends(req.Markers, []int{i}), st.LeaderEpoch); err != nil {
					fail([]int{i}, err)
				} else {
					waits = append(waits, markerWait{r, st, info, []int{i}})
				}
			}
			r.Progressed()
			continue
		}
		if err != nil {
			c.s.mgr.ReportFailed(r, err)
			fail(idx, err)
			continue
		}
		r.Progressed()
		waits = append(waits, markerWait{r, st, info, idx})
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c.goRequest(func() {
		for _, w := range waits {
			err := c.awaitAll(w.r, w.st, w.info, timeout)
			for k, i := range w.idx {
				if err != nil {
					results[i] = protocol.TxnMarkerResult{Offset: -1, Err: markerErr(err)}
				} else {
					results[i] = protocol.TxnMarkerResult{Offset: w.info.BaseOffset + int64(k)}
				}
			}
		}
		c.s.log.Debug("transaction markers written", "markers", len(req.Markers), "appends", len(waits))
		c.respond(h, &protocol.WriteTxnMarkersResponse{Results: results}, nil)
	})
}

// markersByPartition returns the indexes of ms per partition, in the order
// of each partition's first marker.
func markersByPartition(ms []protocol.TxnMarker) [][]int {
	type key struct {
		topic     string
		partition int32
	}
	at := map[key]int{}
	var out [][]int
	for i, m := range ms {
		k := key{m.Topic, m.Partition}
		j, ok := at[k]
		if !ok {
			j = len(out)
			at[k] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], i)
	}
	return out
}

// markerAppends turns the request's markers at idx into the log's.
func markerAppends(ms []protocol.TxnMarker, idx []int) []seglog.MarkerAppend {
	out := make([]seglog.MarkerAppend, len(idx))
	for k, i := range idx {
		m := ms[i]
		t := record.ControlAbort
		if m.Commit {
			t = record.ControlCommit
		}
		out[k] = seglog.MarkerAppend{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, Marker: record.Marker{Type: t, CoordinatorEpoch: m.CoordinatorEpoch}}
	}
	return out
}

// markerErr is err as the protocol error a marker's result carries.
func markerErr(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return CodeFor(err).Err("%v", err)
}
