package kafkaapi

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/shares"
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
	group, member, code := s.shareCaller(c, "ShareFetch", r.GroupID, r.MemberID)
	if code != protocol.None {
		resp.ErrorCode = int16(code)
		return kafka.Reply{Msg: resp}
	}
	if r.ShareAcquireMode != 0 && r.ShareAcquireMode != 1 {
		resp.ErrorCode, resp.ErrorMessage = int16(protocol.InvalidRequest), kmsg.StringPtr("ShareAcquireMode is 0 (batch optimized) or 1 (record limit)")
		return kafka.Reply{Msg: resp}
	}
	snap := s.broker.Snapshot(ctx)
	q := s.readShareFetch(c, snap, r)
	parts, ids, acks := q.parts, q.ids, q.acks
	if r.ShareSessionEpoch == 0 && len(acks) > 0 {
		resp.ErrorCode, resp.ErrorMessage = int16(protocol.InvalidRequest), kmsg.StringPtr("a share fetch opening a session (epoch 0) may not acknowledge records")
		return kafka.Reply{Msg: resp}
	}
	sess, err := s.shareSessionStep(shareMemberKey{group, member}, r.ShareSessionEpoch, q.add, q.forget)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
		return kafka.Reply{Msg: resp}
	}
	sc := shareCaller{s.sharesFor(c), group, member}
	return kafka.Reply{Async: func() kafka.Reply {
		rctx := c.Context()
		// A renewal request only renews (KIP-1222): it acquires nothing.
		acquire := sess != nil && r.MaxRecords >= 0 && !r.IsRenewAck
		lockMs := int64(30_000)
		var carried []shares.Ack // acknowledgements sent with the acquisition
		if acquire && sess.oneTopic(acks) {
			carried = acks
		} else {
			errs, ms := sc.sendAcks(rctx, acks)
			setAckErrors(parts, errs)
			if ms > 0 {
				lockMs = ms
			}
		}
		if acquire {
			lockMs = s.shareAcquire(rctx, sc, r, sess, carried, parts)
		}
		resp.AcquisitionLockTimeoutMillis = int32(lockMs)
		s.answerShareFetch(resp, snap, parts, ids)
		return kafka.Reply{Msg: resp}
	}}
}

// shareFetchAsk is what a ShareFetch request asks, read against the model:
// the partitions to add to the session and to forget, the
// acknowledgements, and each partition's part of the answer so far (a
// refusal, or acknowledgements that do not parse).
type shareFetchAsk struct {
	parts       map[groups.TP]*shareFetchPart
	ids         map[string][16]byte // the topic ids the request named
	add, forget []groups.TP
	acks        []shares.Ack
}

// readShareFetch reads a ShareFetch request: topics by id, each checked for
// READ, their acknowledgement batches, the forgotten partitions.
func (s *Service) readShareFetch(c *kafka.Conn, snap *cluster.Snapshot, r *kmsg.ShareFetchRequest) shareFetchAsk {
	q := shareFetchAsk{parts: map[groups.TP]*shareFetchPart{}, ids: map[string][16]byte{}}
	for _, t := range r.Topics {
		topic, ok := kafka.TopicByID(snap, t.TopicID)
		if !ok {
			for _, p := range t.Partitions {
				q.parts[groups.TP{Partition: p.Partition}] = &shareFetchPart{err: protocol.UnknownTopicID.Err("no topic has this id")}
			}
			continue
		}
		q.ids[topic.Name] = t.TopicID
		for _, p := range t.Partitions {
			tp := groups.TP{Topic: topic.Name, Partition: p.Partition}
			if !s.broker.Allowed(c, cluster.OpConsume, topic.Name) {
				q.parts[tp] = &shareFetchPart{err: protocol.TopicAuthorizationFailed.Err("the principal may not read topic %s", topic.Name)}
				continue
			}
			q.add = append(q.add, tp)
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			part := &shareFetchPart{acked: true}
			q.parts[tp] = part
			a, err := kafkaAcks(tp, p.AcknowledgementBatches, r.IsRenewAck)
			if err != nil {
				part.ackErr = err
				continue
			}
			q.acks = append(q.acks, a...)
		}
	}
	for _, f := range r.ForgottenTopicsData {
		if topic, ok := kafka.TopicByID(snap, f.TopicID); ok {
			for _, p := range f.Partitions {
				q.forget = append(q.forget, groups.TP{Topic: topic.Name, Partition: p})
			}
		}
	}
	return q
}

// answerShareFetch fills the answer's topics with every partition that
// has something to say: records, an error, an acknowledgement's outcome.
func (s *Service) answerShareFetch(resp *kmsg.ShareFetchResponse, snap *cluster.Snapshot, parts map[groups.TP]*shareFetchPart, ids map[string][16]byte) {
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
			rp.ErrorCode, rp.ErrorMessage = protocol.KafkaOf(p.err, protocol.CoordinatorAnswer), message(p.err)
		}
		if p.ackErr != nil {
			rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage = protocol.KafkaOf(p.ackErr, protocol.CoordinatorAnswer), message(p.ackErr)
		}
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = s.member.ID(), leaderEpoch(snap, tp.Topic, tp.Partition)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
}

// setAckErrors records acknowledgement errors in the partitions' answers.
func setAckErrors(parts map[groups.TP]*shareFetchPart, errs map[groups.TP]error) {
	for tp, err := range errs {
		if p := parts[tp]; p != nil {
			p.ackErr = err
		}
	}
}

// oneTopic reports whether the session is of one topic and acks, when
// there are any, are of it: they can then ride on the acquisition.
func (s *shareSession) oneTopic(acks []shares.Ack) bool {
	topic := ""
	for tp := range s.parts {
		if topic != "" && tp.Topic != topic {
			return false
		}
		topic = tp.Topic
	}
	for _, a := range acks {
		if a.Topic != topic {
			return false
		}
	}
	return len(acks) > 0
}

// shareAcquire acquires records of the session's partitions, waiting up to
// the request's MaxWait when there are none, reads them into parts and
// returns the lock duration in milliseconds. acks, of a session of one
// topic, go with the acquisition, and their outcomes into parts.
func (s *Service) shareAcquire(ctx context.Context, sc shareCaller, r *kmsg.ShareFetchRequest, sess *shareSession, acks []shares.Ack, parts map[groups.TP]*shareFetchPart) int64 {
	byTopic := map[string][]int32{}
	for tp := range sess.parts {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	limit := r.MaxRecords
	if limit <= 0 {
		limit = 500
	}
	wait := min(time.Duration(r.MaxWaitMillis)*time.Millisecond, maxShareWait)
	deadline := time.Now().Add(wait)
	lockMs := int64(30_000)
	for {
		got := 0
		for _, topic := range topics {
			req := shares.AcquireRequest{MemberID: sc.member, Topic: topic, MaxRecords: limit, Partitions: byTopic[topic], Acks: acks}
			if len(topics) == 1 {
				req.WaitMs = int32(max(0, time.Until(deadline).Milliseconds()))
			}
			out, err := sc.client.Acquire(ctx, sc.group, req)
			switch {
			case len(acks) == 0:
			case err != nil:
				setAckErrors(parts, ackFailure(acks, err))
			case len(out.AckResults) == 0:
				// An offsets service older than acknowledgements on
				// acquisitions ignored them.
				errs, _ := sc.sendAcks(ctx, acks)
				setAckErrors(parts, errs)
			default:
				setAckErrors(parts, ackErrors(out.AckResults))
			}
			acks = nil
			if err != nil {
				for _, p := range byTopic[topic] {
					tp := groups.TP{Topic: topic, Partition: p}
					if parts[tp] == nil {
						parts[tp] = &shareFetchPart{}
					}
					parts[tp].err = err
				}
				continue
			}
			if out.LockUntilMs > 0 {
				lockMs = max(1000, out.LockUntilMs-time.Now().UnixMilli())
			}
			got += len(out.Acquired)
			s.readShared(ctx, sc, out.Acquired, parts)
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

// readShared reads the batches holding acquired ranges into their
// partitions' answers. Records whose delivery time has not come are
// deferred and left out of the ranges; ranges that cannot be read are
// released. The whole batches go out whatever the acquire mode: a
// record-limit request (v2) gets no more acquired records than it asked
// for, which is what clients count.
func (s *Service) readShared(ctx context.Context, sc shareCaller, acquired []shares.Acquired, parts map[groups.TP]*shareFetchPart) {
	snap := s.cache.Snapshot()
	now := time.Now().UnixMilli()
	var later []shares.Ack // deferrals, and releases of what could not be read
	for _, ranges := range shares.ByPartition(acquired) {
		tp := groups.TP{Topic: ranges[0].Topic, Partition: ranges[0].Partition}
		p := parts[tp]
		if p == nil {
			p = &shareFetchPart{}
			parts[tp] = p
		}
		got, err := s.fetcher.ReadAcquired(ctx, ranges, shares.TopicDelayMs(snap, tp.Topic), now,
			func(payload []byte) { p.records = append(p.records, payload...) }, nil)
		if err != nil {
			// The partition answers its error and no records: all of
			// them go back at once.
			p.err, p.records = err, nil
			later = append(later, shares.Releases(ranges)...)
			continue
		}
		later = append(later, got.Defers...)
		for _, a := range ranges {
			// The range without its deferred offsets.
			first := a.FirstOffset
			for _, d := range got.Defers {
				if d.FirstOffset < a.FirstOffset || d.FirstOffset > a.LastOffset {
					continue
				}
				if d.FirstOffset > first {
					p.acquired = append(p.acquired, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: first, LastOffset: d.FirstOffset - 1, DeliveryCount: a.DeliveryCount})
				}
				first = d.FirstOffset + 1
			}
			if first <= a.LastOffset {
				p.acquired = append(p.acquired, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: first, LastOffset: a.LastOffset, DeliveryCount: a.DeliveryCount})
			}
		}
	}
	if errs, _ := sc.sendAcks(ctx, later); len(errs) > 0 {
		s.log.Info("deferring or releasing share records failed; their locks will expire", "group", sc.group, "partitions", len(errs))
	}
}
