package replica

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// durableLocked reports whether records count toward the high watermark only
// once fsynced (the fsync flush policy); mu must be held.
func (r *Replica) durableLocked() bool { return r.config.FlushPolicy != cluster.FlushReplication }

// Durable reports whether the topic uses the fsync flush policy.
func (r *Replica) Durable() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.durableLocked()
}

// recomputeHWLocked applies the high-watermark rule on a leader and wakes
// waiters when it moved; mu must be held.
func (r *Replica) recomputeHWLocked() {
	self := FollowerState{LEO: r.Log.EndOffset(), Flushed: r.Log.FlushedOffset()}
	isr := r.isr
	if r.maxISR != nil {
		isr = r.maxISR
	}
	hw := HighWatermark(r.hw, r.self, self, isr, r.followers, r.durableLocked())
	if hw > r.hw {
		r.hw = hw
		r.Log.SetHighWatermark(hw)
		r.notifyLocked()
	}
}

// Progressed recomputes a leader's high watermark after its own log moved
// (an append, or a flush under the fsync policy).
func (r *Replica) Progressed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == r.self {
		r.recomputeHWLocked()
	}
}

// CheckProduce refuses an acks=all produce before appending when the ISR is
// smaller than min.insync.replicas (NOT_ENOUGH_REPLICAS), and any produce on a
// node that does not lead the partition.
func (r *Replica) CheckProduce(acks int8) (State, error) {
	s, err := r.CheckLeader(r.self)
	if err != nil {
		return s, err
	}
	if acks == protocol.AcksAll && len(s.ISR) < s.Config.MinInsyncReplicas {
		return s, protocol.NotEnoughReplicas.Err("%s has %d in-sync replicas %v, min.insync.replicas is %d",
			r.Key, len(s.ISR), s.ISR, s.Config.MinInsyncReplicas)
	}
	return s, nil
}

// WaitHighWatermark waits until the high watermark reaches offset while this
// node stays the leader of the given epoch. It fails with
// NOT_LEADER_OR_FOLLOWER when the node loses leadership (a deposed leader
// acknowledges nothing) and with the context's error when it ends.
//
// When the high watermark passes but the ISR has meanwhile shrunk below
// min.insync.replicas, the records are in the log but fewer replicas than
// required hold them: NOT_ENOUGH_REPLICAS_AFTER_APPEND, as in Kafka.
func (r *Replica) WaitHighWatermark(ctx context.Context, offset int64, epoch int32) error {
	for {
		r.mu.RLock()
		hw, ch, leader, cur := r.hw, r.hwCh, r.leader, r.leaderEpoch
		isr, minISR := len(r.isr), r.config.MinInsyncReplicas
		r.mu.RUnlock()
		if leader != r.self || cur != epoch {
			return protocol.NotLeaderOrFollower.Err("%s: leadership moved to node %d epoch %d before the records were replicated", r.Key, leader, cur)
		}
		if hw >= offset {
			if isr < minISR {
				return protocol.NotEnoughReplicasAfterAppend.Err("%s: the ISR shrank to %d replicas, min.insync.replicas is %d", r.Key, isr, minISR)
			}
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// CheckFetcherEpoch compares a fetcher's idea of the leader epoch with the
// current one: an older one is FENCED_LEADER_EPOCH, a newer one
// UNKNOWN_LEADER_EPOCH (this node has not heard of it yet). -1 skips the check.
func (r *Replica) CheckFetcherEpoch(epoch int32) error {
	if epoch < 0 {
		return nil
	}
	cur := r.State().LeaderEpoch
	switch {
	case epoch < cur:
		return protocol.FencedLeaderEpoch.Err("%s: fetch for leader epoch %d, current is %d", r.Key, epoch, cur)
	case epoch > cur:
		return protocol.UnknownLeaderEpoch.Err("%s: fetch for leader epoch %d, this node knows %d", r.Key, epoch, cur)
	}
	return nil
}

// FollowerFetched records a follower's fetch on the leader: its log end and
// flushed offsets move the high watermark; a follower that caught up may join
// the ISR, which the returned request (non-nil) asks metadata for.
func (r *Replica) FollowerFetched(id int32, fetchOffset, flushed int64, now time.Time, maxLag time.Duration) *cluster.AlterPartitionRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != r.self || !slices.Contains(r.replicas, id) || fetchOffset > r.Log.EndOffset() {
		// A fetch past this leader's end comes from a log that diverged;
		// it proves nothing until the follower has truncated.
		return nil
	}
	r.followers[id] = CaughtUp(r.followers[id], fetchOffset, flushed, r.Log.EndOffset(), now)
	r.recomputeHWLocked()
	if r.alterPending {
		return nil
	}
	// Only the follower that fetched may join (as Kafka decides on the
	// follower's own fetch): a dead follower's last state, still fresh in
	// the map, must not be proposed on another follower's fetch.
	isr, changed := ExpandISR(r.isr, []int32{id}, r.followers, r.hw, now, maxLag)
	if !changed {
		return nil
	}
	r.maxISR = isr
	return r.alterLocked(isr)
}

// ShrinkIfLagging returns the request that drops lagging followers from the
// ISR, or nil when none lags (or an ISR change is already in flight).
func (r *Replica) ShrinkIfLagging(now time.Time, maxLag time.Duration) *cluster.AlterPartitionRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != r.self || r.alterPending {
		return nil
	}
	isr, changed := ShrinkISR(r.isr, r.self, r.followers, now, maxLag)
	if !changed {
		return nil
	}
	return r.alterLocked(isr)
}

func (r *Replica) alterLocked(isr []int32) *cluster.AlterPartitionRequest {
	req := &cluster.AlterPartitionRequest{Topic: r.Key.Topic, Partition: r.Key.Partition, LeaderID: r.self,
		LeaderEpoch: r.leaderEpoch, PartitionEpoch: r.partitionEpoch, ISR: isr}
	r.alterPending, r.alterBase, r.alterReq = true, r.partitionEpoch, req
	return req
}

// errNotSent: an ISR change that never reached metadata (no metadata client
// is configured); it cannot have committed.
var errNotSent = errors.New("replica: the ISR change was not sent")

// Altered applies metadata's answer to the ISR change req and reports whether
// the outcome is still unknown, so that req must be asked again. One change
// is in flight at a time, and it stays in flight until it is decided:
//   - success: the ISR metadata answered;
//   - a refusal that a committed change cannot produce (INVALID_REQUEST: a
//     joining replica metadata fenced, an invalid state), or a request never
//     sent: the change did not commit, and an expansion no longer holds the
//     high watermark;
//   - a snapshot at a newer partition or leader epoch (setState), which
//     supersedes req: its answer, arriving later, changes nothing.
//
// Anything else leaves the outcome unknown: a lost answer, or a refusal for a
// stale partition, leader or node epoch. A retry after a lost answer is
// refused that way when the first attempt did commit. maxISR then keeps
// counting the joining replicas until the change is decided. A change that
// did commit moved the partition epoch, so a newer snapshot is on its way.
func (r *Replica) Altered(req *cluster.AlterPartitionRequest, p *cluster.Partition, err error) (retry bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req != r.alterReq {
		return false // superseded by a snapshot
	}
	switch {
	case err == nil && p != nil && p.LeaderEpoch == r.leaderEpoch && p.PartitionEpoch >= r.partitionEpoch:
		r.partitionEpoch, r.isr = p.PartitionEpoch, slices.Clone(p.ISR)
	case errors.Is(err, errNotSent) || protocol.CodeOf(err) == protocol.InvalidRequest:
	default:
		return true
	}
	r.alterPending, r.alterReq, r.maxISR = false, nil, nil
	if r.leader == r.self {
		r.recomputeHWLocked()
	}
	r.notifyLocked()
	return false
}

// SetFollowerHighWatermark records the leader's high watermark on a follower,
// capped by the follower's own log end. It changes nothing once this replica
// leads.
func (r *Replica) SetFollowerHighWatermark(leaderHW int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == r.self {
		return
	}
	hw := min(leaderHW, r.Log.EndOffset())
	if hw != r.hw {
		r.hw = hw
		r.Log.SetHighWatermark(hw)
		r.notifyLocked()
	}
}

// ListOffset answers a ListOffsets look-up on the leader (Kafka's
// ListOffsets for consumers): the log start offset (TimestampEarliest), the
// high watermark (TimestampLatest), the record with the largest timestamp
// (TimestampMax) or the first record at or after a timestamp, with the
// leader epoch that wrote it. Records above the high watermark are not
// visible: a look-up that finds only those answers -1. At read_committed
// the last stable offset stands for the high watermark.
func (r *Replica) ListOffset(timestamp int64, isolation int8) (protocol.ListOffsetsResponse, error) {
	resp := protocol.ListOffsetsResponse{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	hw := r.ConsumerView(isolation).Bound
	switch timestamp {
	case protocol.TimestampEarliest:
		resp.Offset = r.StartOffset() // the remote log's start with tiered storage
	case protocol.TimestampEarliestLocal:
		resp.Offset = r.Log.StartOffset()
	case protocol.TimestampLatest:
		resp.Offset = hw
	default:
		var off, ts int64
		var err error
		switch {
		case timestamp == protocol.TimestampMax:
			off, ts, err = r.Log.MaxTimestamp()
		case timestamp < 0:
			return resp, protocol.InvalidTimestamp.Err("timestamp %d", timestamp)
		default:
			off, ts, err = r.Log.OffsetForTimestamp(timestamp)
		}
		if err != nil {
			return resp, err
		}
		if off >= 0 && off < hw {
			// A record found below the log start offset (deleted records
			// share its batch) answers with the start itself.
			resp.Offset, resp.Timestamp = max(off, r.Log.StartOffset()), ts
		}
	}
	if resp.Offset >= 0 {
		resp.LeaderEpoch = r.Log.EpochAt(resp.Offset)
	}
	return resp, nil
}

// DeleteRecords moves the leader's log start offset up to offset (Kafka's
// DeleteRecords): -1 is the high watermark; an offset above the high
// watermark is OFFSET_OUT_OF_RANGE. Followers move theirs from the fetch
// answers (Fetcher), and retention then deletes whole segments below it. It
// returns the leader's new log start offset (Kafka's low watermark).
func (r *Replica) DeleteRecords(offset int64) (int64, error) {
	hw := r.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, protocol.OffsetOutOfRange.Err("%s: delete records below %d: the high watermark is %d", r.Key, offset, hw)
	}
	return r.Log.RaiseStartOffset(offset)
}
