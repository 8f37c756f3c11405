package kafkaapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/kafka"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// produce answers Produce. Versions 0 to 2 are advertised (librdkafka turns
// compression off against a broker whose minimum is above 0) and refused
// with UNSUPPORTED_VERSION: they carry message sets older than RecordBatch
// v2. A transactional producer's partitions are checked against its open
// transaction first (verifyTxn). Acks 0 gets no answer, as in Kafka.
func (s *Service) produce(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ProduceRequest)
	resp := kmsg.NewPtrProduceResponse()
	var acks int8
	refuse := protocol.None
	switch {
	case r.Version < 3:
		refuse = protocol.UnsupportedVersion
	case r.TransactionID != nil && r.Acks != -1:
		refuse = protocol.InvalidRequiredAcks // a transactional producer writes with acks=all
	case r.Acks == 0:
		acks = protocol.AcksNone
	case r.Acks == 1:
		acks = protocol.AcksLeader
	case r.Acks == -1:
		acks = protocol.AcksAll
	default:
		refuse = protocol.InvalidRequiredAcks
	}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		resp.Topics[i] = kmsg.NewProduceResponseTopic()
		resp.Topics[i].Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rp.Partition, -1, -1, -1
			p.ErrorCode = int16(refuse)
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
		}
	}
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
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
			return s.produceReply(r, resp, 0)
		}
	}
	bytes := 0
	ls := c.Local(lanesKey{}, newLanes).(*lanes)
	parts := make([][]*part, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		out := &resp.Topics[i]
		for _, rp := range rt.Partitions {
			bytes += len(rp.Records)
		}
		if !s.broker.Allowed(c, cluster.OpProduce, rt.Topic) {
			for j := range out.Partitions {
				out.Partitions[j].ErrorCode = int16(protocol.TopicAuthorizationFailed)
			}
			continue
		}
		// Each partition's place in its lane is taken now, while the
		// connection's requests are read one by one.
		for _, rp := range rt.Partitions {
			parts[i] = append(parts[i], s.submit(c, ls, laneKey{rt.Topic, rp.Partition, acks}, rp.Records, deadline))
		}
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
		p.ErrorCode = codeOf(res.Err)
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

// verifyTxn prepares a transactional produce request: under transaction
// version 2 (Produce v12+) it adds the request's partitions to the
// producer's transaction; under version 1 it checks that they are in the
// open one (KIP-890 part 1), so that a late write of an ended transaction
// cannot start a new one that nothing would end. It answers the request's
// error code, 0 when it may go on. It runs before the partitions take their
// places in their lanes, so it holds the connection's next request back by
// one round trip to the coordinator.
func (s *Service) verifyTxn(ctx context.Context, c *kafka.Conn, r *kmsg.ProduceRequest) int16 {
	v2 := r.Version >= 12
	verify := txns.AddPartitionsRequest{Producer: txns.Producer{ProducerID: -1, ProducerEpoch: -1}, VerifyOnly: !v2, V2: v2}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			h, err := record.ParseHeader(rp.Records)
			if err != nil {
				return int16(protocol.CorruptRecord)
			}
			if !h.IsTransactional() || h.ProducerID < 0 {
				return int16(protocol.InvalidRecord) // a transactional request of non-transactional batches
			}
			if verify.ProducerID >= 0 && (h.ProducerID != verify.ProducerID || h.ProducerEpoch != verify.ProducerEpoch) {
				return int16(protocol.InvalidRecord)
			}
			verify.ProducerID, verify.ProducerEpoch = h.ProducerID, h.ProducerEpoch
			verify.Partitions = append(verify.Partitions, groups.TP{Topic: rt.Topic, Partition: rp.Partition})
		}
	}
	if v2 {
		verify.Partitions = s.joined.missing(*r.TransactionID, verify.Producer, verify.Partitions)
	}
	if len(verify.Partitions) == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, s.producer.Config().Timeout)
	defer cancel()
	client := s.txnsFor(c)
	err := whileConcurrent(ctx, func() error { return client.AddPartitions(ctx, *r.TransactionID, verify) })
	if err == nil && v2 {
		s.joined.add(*r.TransactionID, verify.Producer, verify.Partitions)
	}
	switch code := txnCode(err, 0); code {
	case int16(protocol.ProducerFenced), int16(protocol.InvalidProducerIDMapping):
		// What a produce request's producer understands as fenced.
		return int16(protocol.InvalidProducerEpoch)
	default:
		return code
	}
}

// joinedTxns remembers, per transactional id, the partitions this frontend
// added to the producer's current version 2 transaction, so that only a
// partition's first produce request of a transaction asks the coordinator.
// Under version 2 every transaction has its own epoch, so (producer id,
// epoch) names one transaction: once it ends, or the coordinator aborts it,
// the partitions refuse that epoch themselves (its markers carry the next
// one). Version 1 transactions share an epoch and are never remembered.
type joinedTxns struct {
	mu  sync.Mutex
	ids map[string]*joinedTxn
}

type joinedTxn struct {
	producer txns.Producer
	parts    map[groups.TP]struct{}
}

// maxJoinedTxns bounds the transactional ids remembered; past it the
// memory is dropped (each id then asks once more).
const maxJoinedTxns = 100000

// missing returns the partitions not yet added to id's transaction at p.
func (j *joinedTxns) missing(id string, p txns.Producer, parts []groups.TP) []groups.TP {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.ids[id]
	if t == nil || t.producer != p {
		return parts
	}
	var out []groups.TP
	for _, tp := range parts {
		if _, ok := t.parts[tp]; !ok {
			out = append(out, tp)
		}
	}
	return out
}

// add records partitions the coordinator added to id's transaction at p.
func (j *joinedTxns) add(id string, p txns.Producer, parts []groups.TP) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ids == nil || len(j.ids) >= maxJoinedTxns {
		j.ids = map[string]*joinedTxn{}
	}
	t := j.ids[id]
	if t == nil || t.producer != p {
		t = &joinedTxn{producer: p, parts: map[groups.TP]struct{}{}}
		j.ids[id] = t
	}
	for _, tp := range parts {
		t.parts[tp] = struct{}{}
	}
}
