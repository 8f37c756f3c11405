package kafkaapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/kafka"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// produce answers Produce. Versions 0 to 2 are advertised (librdkafka turns
// compression off against a broker whose minimum is above 0) and refused
// with UNSUPPORTED_VERSION: they carry message sets older than RecordBatch
// v2. Transactional batches are refused until transactions exist. Acks 0
// gets no answer, as in Kafka.
func (s *Service) produce(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ProduceRequest)
	resp := kmsg.NewPtrProduceResponse()
	var acks int8
	refuse := protocol.None
	switch {
	case r.Version < 3:
		refuse = protocol.UnsupportedVersion
	case r.TransactionID != nil:
		refuse = protocol.TransactionalIDAuthorizationFailed
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
	bytes := 0
	order := c.Local(orderKey{}, func() any { return newOrder() }).(*order)
	var work []func()
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
		// Each partition's place in the connection's order is taken now,
		// while the requests are read one by one.
		parts := make([]produce.PartitionRecords, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			parts[j] = produce.PartitionRecords{Partition: rp.Partition, Records: rp.Records}
			parts[j].After, parts[j].Sent = order.take(rt.Topic, rp.Partition)
		}
		work = append(work, func() { s.produceTopic(c.Context(), acks, timeout, rt.Topic, parts, out) })
	}
	throttle := s.chargeProduce(c, bytes)
	// The rest goes on while the connection's next requests are read: a
	// client's pipelined produce requests overlap, in order per partition.
	return kafka.Reply{Async: func() kafka.Reply {
		var wg sync.WaitGroup
		for _, w := range work {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w()
			}()
		}
		wg.Wait()
		return s.produceReply(r, resp, throttle)
	}}
}

// orderKey names a connection's produce order.
type orderKey struct{}

// order keeps a connection's batches in request order per partition while
// its produce requests are served at once: a request's first attempt to a
// partition waits until the previous request's to it was written to the
// leader's connection (or failed), which keeps them in that order.
type order struct {
	mu   sync.Mutex
	last map[topicPartition]chan struct{} // the newest request's gate per partition
}

type topicPartition struct {
	topic     string
	partition int32
}

func newOrder() *order { return &order{last: map[topicPartition]chan struct{}{}} }

// take queues a request's batch of a partition: it may go once after is
// closed, and calls sent once it went (or failed).
func (o *order) take(topic string, partition int32) (after <-chan struct{}, sent func()) {
	tp := topicPartition{topic, partition}
	mine := make(chan struct{})
	o.mu.Lock()
	prev := o.last[tp]
	o.last[tp] = mine
	o.mu.Unlock()
	if prev == nil {
		closed := make(chan struct{})
		close(closed)
		prev = closed
	}
	return prev, sync.OnceFunc(func() {
		close(mine)
		o.mu.Lock()
		if o.last[tp] == mine {
			delete(o.last, tp)
		}
		o.mu.Unlock()
	})
}

// produceTopic sends one topic's partitions and fills their answers.
func (s *Service) produceTopic(ctx context.Context, acks int8, timeout time.Duration, topic string, parts []produce.PartitionRecords, out *kmsg.ProduceResponseTopic) {
	results, err := s.producer.ProduceRecords(ctx, topic, acks, timeout, parts)
	for j := range out.Partitions {
		p := &out.Partitions[j]
		e := err
		if err == nil {
			e = results[j].Err
			p.BaseOffset, p.LogStartOffset = results[j].BaseOffset, results[j].LogStartOffset
		}
		if e == nil {
			continue
		}
		p.BaseOffset, p.LogStartOffset = -1, -1
		switch {
		case errors.Is(e, produce.ErrMetadataUnavailable):
			p.ErrorCode = int16(protocol.LeaderNotAvailable)
		default:
			p.ErrorCode = codeOf(e)
		}
		msg := protocol.MessageOf(e)
		p.ErrorMessage = &msg
		if p.ErrorCode == int16(protocol.NotLeaderOrFollower) {
			s.leaderHint(topic, p)
		}
	}
}

// leaderHint names the partition's Kafka leader in a NOT_LEADER_OR_FOLLOWER
// answer (KIP-951, Produce v10+): the client retries there without a
// metadata round trip.
func (s *Service) leaderHint(topic string, p *kmsg.ProduceResponseTopicPartition) {
	snap := s.cache.Snapshot()
	if snap == nil {
		return
	}
	t, ok := snap.Topic(topic)
	if !ok || int(p.Partition) >= len(t.Partitions) {
		return
	}
	if f, ok := snap.KafkaLeader(topic, p.Partition); ok {
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = f.ID, t.Partitions[p.Partition].LeaderEpoch
	}
}

// produceReply finishes a produce answer: none for acks 0, the node
// endpoints of the leaders named in hints (v10+), the quota throttle.
func (s *Service) produceReply(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, throttle time.Duration) kafka.Reply {
	if r.Acks == 0 {
		return kafka.Reply{None: true, Throttle: throttle}
	}
	resp.ThrottleMillis = int32(throttle / time.Millisecond)
	if snap := s.cache.Snapshot(); snap != nil && r.Version >= 10 {
		named := map[int32]bool{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.CurrentLeader.LeaderID >= 0 {
					named[p.CurrentLeader.LeaderID] = true
				}
			}
		}
		for _, b := range kafka.Brokers(snap) {
			if named[b.NodeID] {
				pb := kmsg.NewProduceResponseBroker()
				pb.NodeID, pb.Host, pb.Port, pb.Rack = b.NodeID, b.Host, b.Port, b.Rack
				resp.Brokers = append(resp.Brokers, pb)
			}
		}
	}
	return kafka.Reply{Msg: resp, Throttle: throttle}
}

// chargeProduce counts a produce request's bytes against its client's
// produce quota and returns how long the client should wait (Kafka's
// throttle: the request is served, the connection then rests).
func (s *Service) chargeProduce(c *kafka.Conn, n int) time.Duration {
	rate := s.cache.Quota(clientID(c)).ProduceBytesPerSec
	if rate <= 0 {
		return 0
	}
	key := "produce\x00" + clientID(c)
	s.quotas.Charge(key, rate, n)
	if wait := s.quotas.Admit(key, rate); wait > 0 {
		s.producer.Metrics().QuotaThrottled.WithLabelValues("produce").Inc()
		return wait
	}
	return 0
}

// clientID is the connection's client id, cut to the longest a quota names.
func clientID(c *kafka.Conn) string {
	id := c.ClientID()
	if len(id) > cluster.MaxClientIDLen {
		id = id[:cluster.MaxClientIDLen]
	}
	return id
}
