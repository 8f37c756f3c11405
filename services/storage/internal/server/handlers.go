package server

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// produce appends the payload's batches inline (keeping per-connection order)
// and answers when the acks level is met.
func (c *conn) produce(h *protocol.RequestHeader, dec *protocol.Decoder) {
	start := time.Now()
	var req protocol.ProduceRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	if req.Acks != protocol.AcksNone && req.Acks != protocol.AcksLeader && req.Acks != protocol.AcksAll {
		c.respondErr(h, protocol.InvalidRequiredAcks.Err("acks %d", req.Acks))
		return
	}
	payload := dec.Payload()
	if len(payload) == 0 {
		c.respondErr(h, protocol.InvalidRequest.Err("produce request holds no record batch"))
		return
	}
	r, err := c.s.mgr.Get(req.Topic, req.Partition)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	st, err := r.CheckLeader(c.s.mgr.Self())
	if err != nil {
		c.respondErr(h, err)
		return
	}
	info, err := r.Log.Append(payload, st.LeaderEpoch)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	c.s.metrics.BytesIn.Add(float64(info.Bytes))
	resp := &protocol.ProduceResponse{BaseOffset: info.BaseOffset, LastOffset: info.LastOffset, LogAppendTime: -1, LogStartOffset: r.Log.StartOffset()}
	if req.Acks != protocol.AcksAll || st.Config.FlushPolicy != cluster.FlushFsync {
		c.respond(h, resp, nil)
		c.s.metrics.ProduceLatency.Observe(time.Since(start).Seconds())
		return
	}
	// acks=all with fsync durability: answer once group commit covers the batch.
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c.goRequest(func() {
		ctx, cancel := context.WithTimeout(c.ctx, timeout)
		defer cancel()
		if err := r.Log.WaitFlushed(ctx, info.LastOffset+1); err != nil {
			c.respondErr(h, protocol.RequestTimedOut.Err("records at %d..%d appended but not yet durable: %v", info.BaseOffset, info.LastOffset, err))
			return
		}
		c.respond(h, resp, nil)
		c.s.metrics.ProduceLatency.Observe(time.Since(start).Seconds())
	})
}

// fetch long-polls until enough bytes are below the high watermark or the wait
// ends, then answers with whole batches sent by sendfile.
func (c *conn) fetch(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.FetchRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	if req.MaxBytes <= 0 {
		c.respondErr(h, protocol.InvalidFetchSize.Err("max bytes %d", req.MaxBytes))
		return
	}
	r, err := c.s.mgr.Get(req.Topic, req.Partition)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	if _, err := r.CheckLeader(c.s.mgr.Self()); err != nil {
		c.respondErr(h, err)
		return
	}
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond
	if wait > c.s.cfg.MaxFetchWait {
		wait = c.s.cfg.MaxFetchWait
	}
	c.goRequest(func() {
		deadline := time.Now().Add(wait)
		var timer *time.Timer
		for {
			changed := r.Log.Changed()
			hw := r.HighWatermark()
			sl, err := r.Log.Read(req.Offset, int(req.MaxBytes), hw)
			if err != nil {
				c.respondErr(h, err)
				return
			}
			left := time.Until(deadline)
			if sl.Size() >= int64(req.MinBytes) && (sl.Size() > 0 || req.MinBytes <= 0) || left <= 0 {
				body := &protocol.FetchResponse{HighWatermark: hw, LogStartOffset: r.Log.StartOffset(), LogEndOffset: r.Log.EndOffset()}
				c.respondSlice(h, body, sl)
				return
			}
			sl.Release()
			if timer == nil {
				timer = time.NewTimer(left)
				defer timer.Stop()
			}
			select {
			case <-changed:
			case <-timer.C:
				deadline = time.Now() // answer with what there is
			case <-c.ctx.Done():
				c.release()
				return
			}
		}
	})
}

// listOffsets answers the earliest, latest or by-timestamp offset.
func (c *conn) listOffsets(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.ListOffsetsRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	r, err := c.s.mgr.Get(req.Topic, req.Partition)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	if _, err := r.CheckLeader(c.s.mgr.Self()); err != nil {
		c.respondErr(h, err)
		return
	}
	resp := &protocol.ListOffsetsResponse{Timestamp: -1}
	switch req.Timestamp {
	case protocol.TimestampEarliest:
		resp.Offset = r.Log.StartOffset()
	case protocol.TimestampLatest:
		resp.Offset = r.HighWatermark()
	default:
		if req.Timestamp < 0 {
			c.respondErr(h, protocol.InvalidTimestamp.Err("timestamp %d", req.Timestamp))
			return
		}
		off, ts, err := r.Log.OffsetForTimestamp(req.Timestamp)
		if err != nil {
			c.respondErr(h, err)
			return
		}
		resp.Offset, resp.Timestamp = off, ts
	}
	c.respond(h, resp, nil)
}
