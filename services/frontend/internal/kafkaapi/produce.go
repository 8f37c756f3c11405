package kafkaapi

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
	"github.com/sluicemq/sluice/services/frontend/internal/txnjoin"
)

// produce answers Produce. Versions 0 to 2 carry message sets, the record
// format before RecordBatch v2: each partition's set is converted to one
// batch (record.FromMessageSet), as Kafka's brokers did, and a set that does
// not convert is that partition's CORRUPT_MESSAGE. A transactional
// producer's partitions are checked against its open transaction first
// (verifyTxn). Acks 0 gets no answer, as in Kafka.
func (s *Service) produce(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ProduceRequest)
	acks, refuse := produceAcks(r)
	resp := produceResponse(r, int16(refuse))
	if refuse != protocol.None {
		c.Log().Warn("kafka produce refused", "code", refuse.String(), "version", r.Version)
		return s.produceReply(r, resp, 0)
	}
	timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > s.producer.Config().Timeout {
		timeout = s.producer.Config().Timeout
	}
	deadline := time.Now().Add(timeout)
	if r.TransactionID != nil {
		if code := s.verifyTxn(ctx, c, r); code != 0 {
			c.Log().Info("kafka transactional produce refused", "transactional_id", *r.TransactionID, "code", protocol.Code(code).String())
			return s.produceReply(r, produceResponse(r, code), 0)
		}
	}
	ps := &produceSend{c: c, r: r, ls: c.Local(lanesKey{}, newLanes).(*lanes), acks: acks, deadline: deadline}
	bytes := 0
	parts := make([][]*part, len(r.Topics))
	for i := range r.Topics {
		for _, rp := range r.Topics[i].Partitions {
			bytes += len(rp.Records)
		}
		parts[i] = s.submitTopic(ps, &r.Topics[i], &resp.Topics[i])
	}
	throttle := s.chargeProduce(c, bytes)
	// The answer comes once every part is answered, while the connection's
	// next requests are read.
	return kafka.Reply{Async: func() kafka.Reply {
		for i := range r.Topics {
			for j, p := range parts[i] {
				s.fill(r.Topics[i].Topic, &resp.Topics[i].Partitions[j], waitPart(c.Context(), p))
			}
		}
		return s.produceReply(r, resp, throttle)
	}}
}

// produceAcks is the request's acks as the storage protocol has them, or
// the code refusing them (a transactional producer writes with acks=all).
func produceAcks(r *kmsg.ProduceRequest) (int8, protocol.Code) {
	switch {
	case r.TransactionID != nil && r.Acks != -1:
		return 0, protocol.InvalidRequiredAcks
	case r.Acks == 0:
		return protocol.AcksNone, protocol.None
	case r.Acks == 1:
		return protocol.AcksLeader, protocol.None
	case r.Acks == -1:
		return protocol.AcksAll, protocol.None
	}
	return 0, protocol.InvalidRequiredAcks
}

// produceResponse is an answer naming every partition of r, each with
// code.
func produceResponse(r *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		resp.Topics[i] = kmsg.NewProduceResponseTopic()
		resp.Topics[i].Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rp.Partition, -1, -1, -1
			p.ErrorCode = code
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
		}
	}
	return resp
}

// produceSend is a Produce request being queued in its connection's lanes.
type produceSend struct {
	c        *kafka.Conn
	r        *kmsg.ProduceRequest
	ls       *lanes
	acks     int8
	deadline time.Time
}

// submitTopic queues a topic's partitions in their lanes and returns their
// parts, or answers them all in out when the topic may not be written.
// Each partition's place in its lane is taken now, while the connection's
// requests are read one by one.
func (s *Service) submitTopic(ps *produceSend, rt *kmsg.ProduceRequestTopic, out *kmsg.ProduceResponseTopic) []*part {
	var code int16
	var msg *string
	switch {
	case !s.broker.Allowed(ps.c, cluster.OpProduce, rt.Topic):
		code = int16(protocol.TopicAuthorizationFailed)
	case rt.Topic == groups.OffsetsLogTopic:
		code, msg = int16(protocol.InvalidTopic), kmsg.StringPtr(kafka.OffsetsLogWriteRefused.Error())
	}
	if code != 0 {
		for j := range out.Partitions {
			out.Partitions[j].ErrorCode, out.Partitions[j].ErrorMessage = code, msg
		}
		return nil
	}
	var parts []*part
	for _, rp := range rt.Partitions {
		records := rp.Records
		if ps.r.Version < 3 {
			batch, err := record.FromMessageSet(records, time.Now().UnixMilli(), 0)
			if err != nil {
				ps.c.Log().Warn("kafka produce of a message set refused", "topic", rt.Topic, "partition", rp.Partition, "version", ps.r.Version, "error", err)
				parts = append(parts, failedPart(protocol.CorruptRecord.Err("partition %s-%d: %v", rt.Topic, rp.Partition, err)))
				continue
			}
			records = batch
		}
		parts = append(parts, s.submit(ps.c, ps.ls, laneKey{rt.Topic, rp.Partition, ps.acks}, records, ps.deadline))
	}
	return parts
}

// submit queues a partition's batches in its lane, the lane's sender owned
// by the service.
func (s *Service) submit(c *kafka.Conn, ls *lanes, k laneKey, records []byte, deadline time.Time) *part {
	p, start := ls.submit(k, records, deadline)
	if start != nil {
		s.senders.Add(1)
		go func() {
			defer s.senders.Done()
			ls.run(c.Context(), s.send, k, start)
		}()
	}
	return p
}

// fill sets a partition's answer from its part's result.
func (s *Service) fill(topic string, p *kmsg.ProduceResponseTopicPartition, res produce.RecordsResult) {
	if res.Err == nil {
		p.BaseOffset, p.LogStartOffset = res.BaseOffset, res.LogStartOffset
		return
	}
	p.BaseOffset, p.LogStartOffset = -1, -1
	if errors.Is(res.Err, produce.ErrMetadataUnavailable) {
		p.ErrorCode = int16(protocol.LeaderNotAvailable)
	} else {
		p.ErrorCode = protocol.KafkaOf(res.Err, protocol.DataAnswer)
	}
	msg := protocol.MessageOf(res.Err)
	p.ErrorMessage = &msg
	if p.ErrorCode == int16(protocol.NotLeaderOrFollower) {
		// KIP-951 (Produce v10+): the client retries at the leader named
		// without a metadata round trip.
		if id, epoch, ok := kafka.LeaderHint(s.cache.Snapshot(), topic, p.Partition); ok {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = id, epoch
		}
	}
}

// produceReply finishes a produce answer: none for acks 0, the node
// endpoints of the leaders named in hints (v10+), the quota throttle.
func (s *Service) produceReply(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, throttle time.Duration) kafka.Reply {
	if r.Acks == 0 {
		return kafka.Reply{None: true, Throttle: throttle}
	}
	resp.ThrottleMillis = int32(throttle / time.Millisecond)
	if r.Version >= 10 {
		kafka.AddLeaderEndpoints(s.cache.Snapshot(), resp)
	}
	return kafka.Reply{Msg: resp, Throttle: throttle}
}

// chargeProduce counts a produce request's bytes against its client's
// produce quota and returns how long the client should wait (Kafka's
// throttle: the request is served, the connection then rests).
func (s *Service) chargeProduce(c *kafka.Conn, n int) time.Duration {
	client := cluster.QuotaClientID(c.ClientID())
	rate := s.cache.Quota(client).ProduceBytesPerSec
	if rate <= 0 {
		return 0
	}
	key := "produce\x00" + client // the HTTP API's bucket of the client id
	s.quotas.Charge(key, rate, n)
	if wait := s.quotas.Admit(key, rate); wait > 0 {
		s.producer.Metrics().QuotaThrottled.WithLabelValues("produce").Inc()
		return wait
	}
	return 0
}

// verifyTxn brings a transactional produce request's partitions into its
// producer's transaction (package txnjoin): Produce v12+ is transaction
// version 2. It answers the request's error code, 0 when it may go on. It
// runs before the partitions take their places in their lanes, so it holds
// the connection's next request back by one round trip to the coordinator.
func (s *Service) verifyTxn(ctx context.Context, c *kafka.Conn, r *kmsg.ProduceRequest) int16 {
	req := txnjoin.NewRequest(r.Version >= 12)
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			if err := req.Add(rt.Topic, rp.Partition, rp.Records); err != nil {
				return int16(protocol.CodeOf(err))
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.producer.Config().Timeout)
	defer cancel()
	return txnCode(s.joiner.Join(ctx, s.txnsFor(c), *r.TransactionID, req), 0)
}
