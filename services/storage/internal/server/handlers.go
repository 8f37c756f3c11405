package server

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// produce appends the payload's batches inline (keeping per-connection order)
// and answers when the acks level is met. An idempotent producer's retry of
// batches already in the log appends nothing and is answered with their
// original offsets, once they meet the same acks level (the first attempt's
// answer may have been lost before they were replicated).
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
	if !c.authorize(h, cluster.OpProduce, req.Topic) {
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
	st, err := r.CheckProduce(req.Acks)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	info, err := r.Log.Append(payload, st.LeaderEpoch)
	if err != nil {
		c.s.mgr.ReportFailed(r, err) // a failed log: hand the partition over
		c.respondErr(h, err)
		return
	}
	r.Progressed()
	c.s.metrics.BytesIn.WithLabelValues(req.Topic).Add(float64(info.Bytes))
	resp := &protocol.ProduceResponse{BaseOffset: info.BaseOffset, LastOffset: info.LastOffset, LogAppendTime: -1, LogStartOffset: r.Log.StartOffset()}
	durable := st.Config.FlushPolicy != cluster.FlushReplication
	if req.Acks != protocol.AcksAll {
		c.observeProduce(req.Topic, req.Acks, start)
		c.respond(h, resp, nil)
		if durable { // the records still count toward the high watermark only once flushed
			c.goRequest(func() { c.flushed(r, info.LastOffset+1, 30*time.Second) })
		}
		return
	}
	// acks=all: answer once the high watermark passes the batch.
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c.goRequest(func() {
		if err := c.awaitAll(r, st, info, timeout); err != nil {
			c.respondErr(h, err)
			return
		}
		c.observeProduce(req.Topic, req.Acks, start)
		c.respond(h, resp, nil)
	})
}

// awaitAll waits, for an acks=all append, until the high watermark (the
// smallest progress over the ISR: flushed offsets under the fsync policy)
// passes it, or timeout.
func (c *conn) awaitAll(r *replica.Replica, st replica.State, info seglog.AppendInfo, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	if st.Config.FlushPolicy != cluster.FlushReplication {
		if err := r.Log.WaitFlushed(ctx, info.LastOffset+1); err != nil {
			if errors.Is(err, seglog.ErrFailed) { // the records may never reach the disk
				c.s.mgr.ReportFailed(r, err)
				return err
			}
			return protocol.RequestTimedOut.Err("records at %d..%d appended but not yet durable: %v", info.BaseOffset, info.LastOffset, err)
		}
		r.Progressed()
	}
	if err := r.WaitHighWatermark(ctx, info.LastOffset+1, st.LeaderEpoch); err != nil {
		if protocol.CodeOf(err) == protocol.UnknownServerError {
			err = protocol.RequestTimedOut.Err("records at %d..%d appended but not acknowledged by the in-sync replicas in time: %v", info.BaseOffset, info.LastOffset, err)
		}
		return err
	}
	return nil
}

// writeTxnMarker appends, for the transaction coordinator (a cluster
// service), the marker that ends a producer's transaction, and answers once
// the in-sync replicas have it, as an acks=all produce.
func (c *conn) writeTxnMarker(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.WriteTxnMarkerRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	if !c.authorize(h, "", req.Topic) {
		return
	}
	r, err := c.s.mgr.Get(req.Topic, req.Partition)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	st, err := r.CheckProduce(protocol.AcksAll)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	m := record.Marker{Type: record.ControlAbort, CoordinatorEpoch: req.CoordinatorEpoch}
	if req.Commit {
		m.Type = record.ControlCommit
	}
	info, err := r.Log.AppendMarker(req.ProducerID, req.ProducerEpoch, m, st.LeaderEpoch)
	if err != nil {
		c.s.mgr.ReportFailed(r, err)
		c.respondErr(h, err)
		return
	}
	r.Progressed()
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c.goRequest(func() {
		if err := c.awaitAll(r, st, info, timeout); err != nil {
			c.respondErr(h, err)
			return
		}
		c.s.log.Debug("transaction marker written", "topic", req.Topic, "partition", req.Partition, "producer_id", req.ProducerID,
			"epoch", req.ProducerEpoch, "marker", m.Type.String(), "offset", info.BaseOffset)
		c.respond(h, &protocol.WriteTxnMarkerResponse{Offset: info.BaseOffset}, nil)
	})
}

// observeProduce counts a produce request about to be answered with success
// and its latency; it runs before the response is written so that a client
// that has its answer also sees it counted.
func (c *conn) observeProduce(topic string, acks int8, start time.Time) {
	c.s.metrics.Produced.WithLabelValues(topic).Inc()
	c.s.metrics.ProduceLatency.WithLabelValues(topic, acksLabel(acks)).Observe(time.Since(start).Seconds())
}

// flushed waits for the leader's log to be fsynced up to offset and lets the
// high watermark move.
func (c *conn) flushed(r *replica.Replica, offset int64, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(c.s.ctx, timeout)
	defer cancel()
	if err := r.Log.WaitFlushed(ctx, offset); err == nil {
		r.Progressed()
	} else {
		c.s.mgr.ReportFailed(r, err)
	}
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
	op := cluster.OpConsume
	if req.ReplicaID >= 0 {
		op = "" // replication: the cluster's services only
	}
	if !c.authorize(h, op, req.Topic) {
		return
	}
	r, ok := c.leaderReplica(h, req.Topic, req.Partition)
	if !ok {
		return
	}
	follower := req.ReplicaID >= 0
	var rate int64 // the consumer's fetch quota; followers have none
	if err := r.CheckFetcherEpoch(req.CurrentLeaderEpoch); err != nil {
		c.respondErr(h, err)
		return
	}
	if follower {
		c.s.mgr.Alter(r, r.FollowerFetched(req.ReplicaID, req.Offset, req.FlushedOffset, time.Now(), c.s.mgr.MaxLag()))
	}
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond
	if wait > c.s.cfg.MaxFetchWait {
		wait = c.s.cfg.MaxFetchWait
	}
	if !follower {
		if rate = c.s.mgr.Quota(h.ClientID).FetchBytesPerSec; rate > 0 {
			if throttle := c.s.quotas.Admit(h.ClientID, rate); throttle > 0 {
				c.s.metrics.QuotaThrottled.Inc()
				c.goRequest(func() { c.throttleFetch(h, r, min(throttle, wait), throttle) })
				return
			}
		}
	}
	c.goRequest(func() {
		if sent := c.pollFetch(h, &req, r, follower, wait); rate > 0 {
			c.s.quotas.Charge(h.ClientID, rate, int(sent))
		}
	})
}

// throttleFetch answers the fetch of a consumer over its quota as Kafka
// does: no records, and how long to wait before the next fetch, after
// holding the answer for hold (at most the fetch's own wait) so that a
// client unaware of throttling is slowed down too.
func (c *conn) throttleFetch(h *protocol.RequestHeader, r *replica.Replica, hold, throttle time.Duration) {
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
		c.release()
		return
	}
	view := r.ConsumerView(protocol.ReadUncommitted)
	body := &protocol.FetchResponse{HighWatermark: view.HighWatermark, LogStartOffset: r.StartOffset(), LogEndOffset: r.Log.EndOffset(),
		LastStableOffset: view.LastStableOffset, ThrottleMs: int32(min((throttle - hold).Milliseconds(), math.MaxInt32))}
	c.respond(h, body, nil)
}

// pollFetch long-polls one fetch: followers read up to the log end, consumers
// up to the high watermark (read_committed ones: the last stable offset,
// with the aborted transactions of what they read); either wakes on appends and high-watermark moves.
// It returns the record bytes it answered with.
func (c *conn) pollFetch(h *protocol.RequestHeader, req *protocol.FetchRequest, r *replica.Replica, follower bool, wait time.Duration) int64 {
	deadline := time.Now().Add(wait)
	var timer *time.Timer
	for {
		appended, moved := r.Log.Changed(), r.Changed()
		view := r.ConsumerView(req.Isolation)
		limit := view.Bound
		if follower {
			limit = r.Log.EndOffset()
		}
		rd, err := c.readFetch(req, r, follower, view, limit)
		if err != nil {
			c.respondErr(h, err)
			return 0
		}
		sl := rd.sl
		left := time.Until(deadline)
		if sl.Size() >= int64(req.MinBytes) && (sl.Size() > 0 || req.MinBytes <= 0) || left <= 0 {
			body := &protocol.FetchResponse{HighWatermark: view.HighWatermark, LogStartOffset: rd.start, LogEndOffset: r.Log.EndOffset(),
				LastStableOffset: view.LastStableOffset, Aborted: rd.aborted}
			size := sl.Size()
			c.respondSlice(h, body, sl, req.Topic, readerLabel(follower))
			return size
		}
		sl.Release()
		if timer == nil {
			timer = time.NewTimer(left)
			defer timer.Stop()
		}
		select {
		case <-rd.fetched:
		case <-appended:
		case <-moved:
		case <-timer.C:
			deadline = time.Now() // answer with what there is
		case <-c.ctx.Done():
			c.release()
			return 0
		}
	}
}

// fetchRead is what one read of a fetch found.
type fetchRead struct {
	sl      seglog.Slice
	aborted []protocol.AbortedTxn
	start   int64           // the log start offset the answer gives
	fetched <-chan struct{} // a remote read's fetch in flight: read again when closed
}

// readFetch reads a fetch's records: a consumer's below the local log's
// start from remote storage (tiered topics), else from the local log
// (damage found there is reported, none of it sent, and the replica
// repaired). A follower sees the local log's start, a consumer the
// partition's.
func (c *conn) readFetch(req *protocol.FetchRequest, r *replica.Replica, follower bool, view replica.ConsumerView, limit int64) (fetchRead, error) {
	if follower {
		sl, err := r.Log.Read(req.Offset, int(req.MaxBytes), limit)
		if err != nil {
			c.s.mgr.ReportCorrupt(r, err)
			return fetchRead{}, err
		}
		return fetchRead{sl: sl, aborted: view.Aborted(r.Log, req.Offset, sl), start: r.Log.StartOffset()}, nil
	}
	cr, err := c.s.remote.ReadConsumer(r, req.Offset, int(req.MaxBytes), view)
	if err != nil {
		c.s.mgr.ReportCorrupt(r, err)
		return fetchRead{}, err
	}
	return fetchRead{sl: cr.Slice, aborted: cr.Aborted, fetched: cr.Wait, start: r.StartOffset()}, nil
}

// offsetForLeaderEpoch tells a follower where an epoch ends in the leader's log.
func (c *conn) offsetForLeaderEpoch(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.OffsetForLeaderEpochRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	r, ok := c.leaderReplica(h, req.Topic, req.Partition)
	if !ok {
		return
	}
	if err := r.CheckFetcherEpoch(req.CurrentLeaderEpoch); err != nil {
		c.respondErr(h, err)
		return
	}
	end, epoch := r.Log.EndOffsetForEpoch(req.LeaderEpoch)
	c.respond(h, &protocol.OffsetForLeaderEpochResponse{LeaderEpoch: epoch, EndOffset: end}, nil)
}

// listOffsets answers the earliest, latest or by-timestamp offset.
func (c *conn) listOffsets(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.ListOffsetsRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	r, ok := c.leaderReplica(h, req.Topic, req.Partition)
	if !ok {
		return
	}
	if err := r.CheckFetcherEpoch(req.CurrentLeaderEpoch); err != nil {
		c.respondErr(h, err)
		return
	}
	if !c.s.remote.Searches(r, req.Timestamp) {
		resp, err := r.ListOffset(req.Timestamp, req.Isolation)
		if err != nil {
			c.respondErr(h, err)
			return
		}
		c.respond(h, &resp, nil)
		return
	}
	c.goRequest(func() { // the remote log is read: off the connection's reading loop
		ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.MaxFetchWait)
		defer cancel()
		resp, err := c.s.remote.ListOffset(ctx, r, req.Timestamp, req.Isolation)
		if err != nil {
			c.respondErr(h, err)
			return
		}
		c.respond(h, &resp, nil)
	})
}

// leaderReplica returns the partition's replica when this node leads it, and
// otherwise answers the request with the reason.
func (c *conn) leaderReplica(h *protocol.RequestHeader, topic string, partition int32) (*replica.Replica, bool) {
	r, err := c.s.mgr.Leader(topic, partition)
	if err != nil {
		c.respondErr(h, err)
		return nil, false
	}
	return r, true
}

// describeReplicas answers the state of this node's replicas of a topic (or
// of all): role, leader epoch, log range, high watermark, flushed offset and
// size on disk.
func (c *conn) describeReplicas(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.DescribeReplicasRequest
	if err := dec.Body(&req); err != nil {
		c.respondErr(h, err)
		return
	}
	resp := &protocol.DescribeReplicasResponse{Replicas: []protocol.ReplicaInfo{}}
	for _, r := range c.s.mgr.Replicas() {
		if req.Topic != "" && r.Key.Topic != req.Topic {
			continue
		}
		st := r.State()
		cleanable, firstDirty := int64(-1), int64(-1)
		if st.Config.Compact {
			_, cleanable, _ = r.Log.DirtyBytes()
			firstDirty = r.Log.FirstDirtyOffset()
		}
		resp.Replicas = append(resp.Replicas, protocol.ReplicaInfo{Topic: r.Key.Topic, Partition: r.Key.Partition,
			Leader: st.Leader == c.s.mgr.Self(), LeaderEpoch: st.LeaderEpoch, LogStartOffset: r.Log.StartOffset(),
			LogEndOffset: r.Log.EndOffset(), HighWatermark: st.HighWatermark, FlushedOffset: r.Log.FlushedOffset(),
			SizeBytes: r.Log.Size(), CleanableBytes: cleanable, FirstDirtyOffset: firstDirty})
	}
	sort.Slice(resp.Replicas, func(i, j int) bool {
		a, b := resp.Replicas[i], resp.Replicas[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	c.respond(h, resp, nil)
}

// servicesAtLeader decodes the body of a request of the cluster's services
// about one partition (topic and partition point into it) and returns the
// partition's replica, which this node must lead; ok is false once it has
// answered the request with why not.
func (c *conn) servicesAtLeader(h *protocol.RequestHeader, dec *protocol.Decoder, body protocol.Body, topic *string, partition *int32) (*replica.Replica, bool) {
	if err := dec.Body(body); err != nil {
		c.respondErr(h, err)
		return nil, false
	}
	if !c.authorize(h, "", *topic) {
		return nil, false
	}
	return c.leaderReplica(h, *topic, *partition)
}

// deleteRecords moves a led partition's log start offset (Kafka's
// DeleteRecords, relayed by a frontend): the cluster's services only.
func (c *conn) deleteRecords(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.DeleteRecordsRequest
	r, ok := c.servicesAtLeader(h, dec, &req, &req.Topic, &req.Partition)
	if !ok {
		return
	}
	low, err := r.DeleteRecords(req.Offset)
	if err != nil {
		c.respondErr(h, err)
		return
	}
	c.s.log.Info("records deleted", "topic", req.Topic, "partition", req.Partition, "log_start_offset", low)
	c.respond(h, &protocol.DeleteRecordsResponse{LowWatermark: low}, nil)
}

// describeProducers lists the producers a led partition's log remembers
// (Kafka's DescribeProducers, relayed by a frontend): the cluster's services
// only.
func (c *conn) describeProducers(h *protocol.RequestHeader, dec *protocol.Decoder) {
	var req protocol.DescribeProducersRequest
	r, ok := c.servicesAtLeader(h, dec, &req, &req.Topic, &req.Partition)
	if !ok {
		return
	}
	open := r.Log.OpenTxns()
	resp := &protocol.DescribeProducersResponse{Producers: []protocol.ProducerInfo{}}
	for pid, e := range r.Log.Producers() {
		p := protocol.ProducerInfo{ProducerID: pid, Epoch: e.Epoch, LastSequence: -1, CurrentTxnStartOffset: -1}
		if n := len(e.Batches); n > 0 {
			p.LastSequence = e.Batches[n-1].LastSeq
		}
		if first, ok := open[pid]; ok {
			p.CurrentTxnStartOffset = first
		}
		resp.Producers = append(resp.Producers, p)
	}
	slices.SortFunc(resp.Producers, func(a, b protocol.ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	c.respond(h, resp, nil)
}
