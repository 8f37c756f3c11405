package kafkaapi

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/kafka"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
)

// shareFetchPart is one partition's part of a ShareFetch answer.
type shareFetchPart struct {
	records  []byte
	acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	err      error // the partition's error
	ackErr   error // its acknowledgements' error
	acked    bool  // the request acknowledged records of it
}

// shareFetch answers ShareFetch: the piggybacked acknowledgements go to the
// offsets service, then records of the session's partitions are acquired
// there and read from the storage leaders.
func (s *Service) shareFetch(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ShareFetchRequest)
	resp := kmsg.NewPtrShareFetchResponse()
	if r.GroupID == nil || r.MemberID == nil || *r.MemberID == "" {
		resp.ErrorCode = int16(protocol.InvalidRequest)
		return kafka.Reply{Msg: resp}
	}
	if !s.broker.UsesGroups(c, "ShareFetch") {
		resp.ErrorCode = int16(protocol.GroupAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	if r.ShareAcquireMode != 0 && r.ShareAcquireMode != 1 {
		resp.ErrorCode, resp.ErrorMessage = int16(protocol.InvalidRequest), kmsg.StringPtr("ShareAcquireMode is 0 (batch optimized) or 1 (record limit)")
		return kafka.Reply{Msg: resp}
	}
	group, member := *r.GroupID, *r.MemberID
	snap := s.broker.Snapshot(ctx)
	parts := map[groups.TP]*shareFetchPart{}
	ids := map[string][16]byte{}
	var add, forget []groups.TP
	var acks []shares.Ack
	for _, t := range r.Topics {
		topic, ok := kafka.TopicByID(snap, t.TopicID)
		if !ok {
			for _, p := range t.Partitions {
				parts[groups.TP{Partition: p.Partition}] = &shareFetchPart{err: protocol.UnknownTopicID.Err("no topic has this id")}
			}
			continue
		}
		ids[topic.Name] = t.TopicID
		for _, p := range t.Partitions {
			tp := groups.TP{Topic: topic.Name, Partition: p.Partition}
			if !s.broker.Allowed(c, cluster.OpConsume, topic.Name) {
				parts[tp] = &shareFetchPart{err: protocol.TopicAuthorizationFailed.Err("the principal may not read topic %s", topic.Name)}
				continue
			}
			add = append(add, tp)
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			part := &shareFetchPart{acked: true}
			parts[tp] = part
			a, err := kafkaAcks(tp, p.AcknowledgementBatches, r.IsRenewAck)
			if err != nil {
				part.ackErr = err
				continue
			}
			acks = append(acks, a...)
		}
	}
	for _, f := range r.ForgottenTopicsData {
		if topic, ok := kafka.TopicByID(snap, f.TopicID); ok {
			for _, p := range f.Partitions {
				forget = append(forget, groups.TP{Topic: topic.Name, Partition: p})
			}
		}
	}
	if r.ShareSessionEpoch == 0 && len(acks) > 0 {
		resp.ErrorCode, resp.ErrorMessage = int16(protocol.InvalidRequest), kmsg.StringPtr("a share fetch opening a session (epoch 0) may not acknowledge records")
		return kafka.Reply{Msg: resp}
	}
	sess, err := s.shareSessionStep(shareMemberKey{group, member}, r.ShareSessionEpoch, add, forget)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = int16(protocol.CodeOf(err)), message(err)
		return kafka.Reply{Msg: resp}
	}
	client := s.sharesFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		rctx := c.Context()
		errs, lockMs := sendShareAcks(rctx, client, group, member, acks)
		for tp, err := range errs {
			if p := parts[tp]; p != nil {
				p.ackErr = err
			}
		}
		if lockMs == 0 {
			lockMs = 30_000
		}
		// A renewal request only renews (KIP-1222): it acquires nothing.
		if sess != nil && r.MaxRecords >= 0 && !r.IsRenewAck {
			lockMs = s.shareAcquire(rctx, client, group, member, r, sess, parts)
		}
		resp.AcquisitionLockTimeoutMillis = int32(lockMs)
		byTopic := map[string]int{}
		for tp, p := range parts {
			if p.err == nil && p.ackErr == nil && !p.acked && len(p.acquired) == 0 {
				continue
			}
			i, ok := byTopic[tp.Topic]
			if !ok {
				t := kmsg.NewShareFetchResponseTopic()
				t.TopicID = ids[tp.Topic]
				if snap != nil {
					if topic, found := snap.Topic(tp.Topic); found {
						t.TopicID = kafka.TopicID(topic) // a partition of the session the request did not name
					}
				}
				resp.Topics = append(resp.Topics, t)
				i = len(resp.Topics) - 1
				byTopic[tp.Topic] = i
			}
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition, rp.Records, rp.AcquiredRecords = tp.Partition, p.records, p.acquired
			if p.err != nil {
				rp.ErrorCode, rp.ErrorMessage = int16(protocol.CodeOf(p.err)), message(p.err)
			}
			if p.ackErr != nil {
				rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage = int16(protocol.CodeOf(p.ackErr)), message(p.ackErr)
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = s.member.ID(), leaderEpoch(snap, tp.Topic, tp.Partition)
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// shareAcquire acquires records of the session's partitions, waiting up to
// the request's MaxWait when there are none, reads them into parts and
// returns the lock duration in milliseconds.
func (s *Service) shareAcquire(ctx context.Context, client *shares.Client, group, member string, r *kmsg.ShareFetchRequest, sess *shareSession, parts map[groups.TP]*shareFetchPart) int64 {
	byTopic := map[string][]int32{}
	for tp := range sess.parts {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	max := r.MaxRecords
	if max <= 0 {
		max = 500
	}
	wait := min(time.Duration(r.MaxWaitMillis)*time.Millisecond, maxShareWait)
	deadline := time.Now().Add(wait)
	lockMs := int64(30_000)
	for {
		got := 0
		for _, topic := range topics {
			req := shares.AcquireRequest{MemberID: member, Topic: topic, MaxRecords: max, Partitions: byTopic[topic]}
			if len(topics) == 1 {
				req.WaitMs = int32(max64(0, time.Until(deadline).Milliseconds()))
			}
			out, err := client.Acquire(ctx, group, req)
			if err != nil {
				for _, p := range byTopic[topic] {
					tp := groups.TP{Topic: topic, Partition: p}
					if parts[tp] == nil {
						parts[tp] = &shareFetchPart{}
					}
					parts[tp].err = protocol.Code(groupCode(err)).Err("%s", protocol.MessageOf(err))
				}
				continue
			}
			if out.LockUntilMs > 0 {
				lockMs = max64(1000, out.LockUntilMs-time.Now().UnixMilli())
			}
			got += len(out.Acquired)
			s.readShared(ctx, client, group, member, out.Acquired, parts)
		}
		if got > 0 || len(topics) == 1 || time.Now().After(deadline) || ctx.Err() != nil {
			return lockMs
		}
		t := time.NewTimer(min(50*time.Millisecond, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// readShared reads the batches holding acquired ranges into their
// partitions' answers. Records whose delivery time has not come are
// deferred and left out of the ranges; ranges that cannot be read are
// released. The whole batches go out whatever the acquire mode: a
// record-limit request (v2) gets no more acquired records than it asked
// for, which is what clients count.
func (s *Service) readShared(ctx context.Context, client *shares.Client, group, member string, acquired []shares.Acquired, parts map[groups.TP]*shareFetchPart) {
	snap := s.cache.Snapshot()
	var later []shares.Ack
	next := map[groups.TP]int64{} // per partition: the first offset not read yet
	for _, a := range acquired {
		tp := groups.TP{Topic: a.Topic, Partition: a.Partition}
		p := parts[tp]
		if p == nil {
			p = &shareFetchPart{}
			parts[tp] = p
		}
		delayMs := shares.TopicDelayMs(snap, a.Topic)
		now := time.Now().UnixMilli()
		var deferred []int64
		at := max64(a.FirstOffset, next[tp])
		for at <= a.LastOffset {
			res, err := s.fetcher.Fetch(ctx, fetch.Request{Topic: a.Topic, Partition: a.Partition, Offset: at, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
			if err != nil {
				p.err = err
				later = append(later, shares.Ack{Topic: a.Topic, Partition: a.Partition, FirstOffset: at, LastOffset: a.LastOffset, Type: shares.AckRelease})
				break
			}
			after, werr := fetch.Records(res, func(rec *record.Record) {
				if rec.Offset >= a.FirstOffset && rec.Offset <= a.LastOffset {
					if t := shares.DeliverAt(rec.Headers, rec.Timestamp, delayMs); t > now {
						deferred = append(deferred, rec.Offset)
						later = append(later, shares.Ack{Topic: a.Topic, Partition: a.Partition, FirstOffset: rec.Offset, LastOffset: rec.Offset, Type: shares.AckDefer, NotBeforeMs: t})
					}
				}
			})
			if werr == nil && after > at {
				p.records = append(p.records, res.Payload...)
			}
			res.Release()
			if werr != nil || after <= at {
				if werr == nil {
					werr = protocol.OffsetNotAvailable.Err("%s: no record at offset %d though it was acquired", tp, at)
				}
				p.err = werr
				later = append(later, shares.Ack{Topic: a.Topic, Partition: a.Partition, FirstOffset: at, LastOffset: a.LastOffset, Type: shares.AckRelease})
				break
			}
			at = after
		}
		next[tp] = at
		if p.err != nil {
			continue
		}
		// The range without its deferred offsets.
		first := a.FirstOffset
		for _, d := range append(deferred, a.LastOffset+1) {
			if d > first {
				p.acquired = append(p.acquired, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: first, LastOffset: d - 1, DeliveryCount: a.DeliveryCount})
			}
			first = d + 1
		}
	}
	if errs, _ := sendShareAcks(ctx, client, group, member, later); len(errs) > 0 {
		s.log.Info("deferring or releasing share records failed; their locks will expire", "group", group, "partitions", len(errs))
	}
}
