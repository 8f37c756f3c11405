package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
)

// describeProducers answers DescribeProducers: each partition's leader
// lists the producers its log remembers. A client needs READ on the topic,
// as in Kafka. The log keeps neither a producer's last timestamp nor its
// coordinator's epoch: both are answered -1.
func (s *Service) describeProducers(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DescribeProducersRequest)
	resp := kmsg.NewPtrDescribeProducersResponse()
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(r.Topics))
	type ask struct {
		topic string
		out   *kmsg.DescribeProducersResponseTopicPartition
	}
	var asks []ask
	for i, rt := range r.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewDescribeProducersResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		allowed := s.broker.Allowed(c, cluster.OpConsume, rt.Topic)
		for j, p := range rt.Partitions {
			rp := &out.Partitions[j]
			*rp = kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			switch {
			case !allowed:
				rp.ErrorCode = int16(protocol.TopicAuthorizationFailed)
			case !s.knownTopic(rt.Topic, []int32{p}):
				rp.ErrorCode = int16(protocol.UnknownTopicOrPartition)
			default:
				asks = append(asks, ask{rt.Topic, rp})
			}
		}
	}
	return kafka.Reply{Async: func() kafka.Reply {
		forEach(asks, func(a ask) {
			var dr protocol.DescribeProducersResponse
			req := &protocol.DescribeProducersRequest{Topic: a.topic, Partition: a.out.Partition}
			if a.out.ErrorCode = s.atLeader(c.Context(), a.topic, a.out.Partition, protocol.APIDescribeProducers, req, &dr); a.out.ErrorCode != 0 {
				return
			}
			for _, p := range dr.Producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = p.ProducerID, int32(p.Epoch), p.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1, p.CurrentTxnStartOffset
				a.out.ActiveProducers = append(a.out.ActiveProducers, ap)
			}
		})
		return kafka.Reply{Msg: resp}
	}}
}
