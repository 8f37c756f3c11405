package kafkaapi

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// fetchPart is one partition of a fetch, with its answer.
type fetchPart struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	maxBytes  int32
	isolation int8
	leader    *cluster.Node // the storage leader, when known
	out       *kafka.FetchPartition
	res       storageclient.Result // the proxied records' buffer
}

// fetch answers Fetch. Partitions a client may read from their storage
// leader's Kafka listener (v11+, KIP-392) are checked with a one-batch fetch
// without waiting and answered with the leader as preferred read replica;
// the others are read through this frontend.
func (s *Service) fetch(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	principal, _ := c.Principal()
	r, session, refused := s.sessions.Begin(req.(*kmsg.FetchRequest), principal)
	if refused != nil {
		return *refused
	}
	body := &kafka.FetchBody{Version: r.Version}
	plan := &fetchPlan{s: s, c: c, r: r, snap: s.cache.Snapshot()}
	for _, rt := range r.Topics {
		ft := kafka.FetchTopic{Topic: rt.Topic, TopicID: rt.TopicID, Partitions: make([]kafka.FetchPartition, len(rt.Partitions))}
		for i, rp := range rt.Partitions {
			ft.Partitions[i] = kafka.NewFetchPartition(rp.Partition)
		}
		body.Topics = append(body.Topics, ft)
		plan.topic(&rt, body.Topics[len(body.Topics)-1].Partitions)
	}
	probe, proxy, internal := plan.probe, plan.proxy, plan.internal
	wait := time.Duration(r.MaxWaitMillis) * time.Millisecond
	if len(probe)+len(proxy) > 0 {
		s.readOffsetsLog(ctx, c, internal, 0, int(r.MaxBytes)) // the data partitions' wait is the answer's
	} else {
		s.readOffsetsLog(ctx, c, internal, wait, int(r.MaxBytes))
	}
	s.probe(ctx, probe)
	s.proxy(ctx, proxy, wait, int(r.MinBytes), int(r.MaxBytes))
	session.Finish(body)
	body.Encode()
	return kafka.Reply{Body: body}
}

// fetchPlan sorts a fetch's partitions: those answered at once (with an
// error), the offsets log's, and the data partitions probed at their
// leaders (v11+: the answer can name the leader as the preferred replica)
// or read through this frontend.
type fetchPlan struct {
	s            *Service
	c            *kafka.Conn
	r            *kmsg.FetchRequest
	snap         *cluster.Snapshot
	probe, proxy []*fetchPart
	internal     []*offsetsLogPart
}

// topic sorts a topic's partitions, whose answers are outs.
func (p *fetchPlan) topic(rt *kmsg.FetchRequestTopic, outs []kafka.FetchPartition) {
	offsetsLog := kafka.IsOffsetsLog(p.snap, &rt.Topic, rt.TopicID)
	var topic *cluster.Topic
	switch {
	case p.r.Version >= 13:
		topic, _ = kafka.TopicByID(p.snap, rt.TopicID)
	case p.snap != nil:
		topic, _ = p.snap.Topic(rt.Topic)
	}
	for i := range rt.Partitions {
		if offsetsLog {
			p.offsetsLogPartition(&rt.Partitions[i], &outs[i])
		} else {
			p.partition(topic, &rt.Partitions[i], &outs[i])
		}
	}
}

// offsetsLogPartition sorts a partition of the offsets log.
func (p *fetchPlan) offsetsLogPartition(rp *kmsg.FetchRequestTopicPartition, out *kafka.FetchPartition) {
	switch {
	case !p.s.broker.Allowed(p.c, cluster.OpConsume, groups.OffsetsLogTopic):
		out.ErrorCode = int16(protocol.TopicAuthorizationFailed)
	case rp.Partition < 0 || rp.Partition >= groups.OffsetsLogPartitions:
		out.ErrorCode = int16(protocol.UnknownTopicOrPartition)
	default:
		p.internal = append(p.internal, &offsetsLogPart{partition: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, out: out})
	}
}

// partition sorts a partition of topic (nil: not in the cluster).
func (p *fetchPlan) partition(topic *cluster.Topic, rp *kmsg.FetchRequestTopicPartition, out *kafka.FetchPartition) {
	r := p.r
	switch {
	case topic == nil && r.Version >= 13:
		out.ErrorCode = int16(protocol.UnknownTopicID)
	case topic == nil:
		out.ErrorCode = int16(protocol.UnknownTopicOrPartition)
	case !p.s.broker.Allowed(p.c, cluster.OpConsume, topic.Name):
		out.ErrorCode = int16(protocol.TopicAuthorizationFailed)
	case rp.Partition < 0 || int(rp.Partition) >= len(topic.Partitions):
		out.ErrorCode = int16(protocol.UnknownTopicOrPartition)
	case r.ReplicaID >= 0 || r.ReplicaState.ID >= 0:
		out.ErrorCode = int16(protocol.NotLeaderOrFollower) // replication is among storage nodes
	default:
		fp := &fetchPart{topic: topic.Name, partition: rp.Partition, offset: rp.FetchOffset, epoch: rp.CurrentLeaderEpoch,
			maxBytes: rp.PartitionMaxBytes, isolation: r.IsolationLevel, out: out}
		if r.Version < 9 {
			fp.epoch = -1
		}
		if n, ok := p.snap.Node(topic.Partitions[rp.Partition].Leader); ok && n.Alive && n.KafkaAddr != "" {
			fp.leader = n
		}
		if r.Version >= 11 && fp.leader != nil {
			p.probe = append(p.probe, fp)
		} else {
			p.proxy = append(p.proxy, fp)
		}
	}
}

// probe fetches one batch of each partition from its leader without
// waiting: an error (offset out of range, stale epoch, leader moved) is the
// answer; otherwise the client is sent to the leader (preferred read
// replica) with the partition's offsets, and the batch is dropped.
func (s *Service) probe(ctx context.Context, parts []*fetchPart) {
	forEach(parts, func(fp *fetchPart) {
		var resp protocol.FetchResponse
		req := &protocol.FetchRequest{Topic: fp.topic, Partition: fp.partition, Offset: fp.offset, MaxBytes: 1, MaxWaitMs: 0,
			MinBytes: 0, ReplicaID: -1, CurrentLeaderEpoch: fp.epoch, FlushedOffset: -1, Isolation: fp.isolation}
		res, err := s.fetcher.AtLeader(ctx, fp.topic, fp.partition, protocol.APIFetch, req, &resp)
		res.Release()
		fp.fill(&resp, err)
		if err == nil {
			fp.out.PreferredReadReplica = fp.leader.ID
		}
	})
}

// proxy reads the partitions through this frontend: first without waiting;
// when that gives fewer than minBytes, again with the request's wait, the
// first answer with records ending the others' wait. maxBytes bounds the
// answer's records (the first partition's are always sent whole).
func (s *Service) proxy(ctx context.Context, parts []*fetchPart, wait time.Duration, minBytes, maxBytes int) {
	if len(parts) == 0 {
		return
	}
	s.proxyPass(ctx, parts, 0, nil)
	got := 0
	for _, fp := range parts {
		got += len(fp.res.Payload)
	}
	if got < max(minBytes, 1) && wait > 0 {
		var empty []*fetchPart
		for _, fp := range parts {
			if fp.out.ErrorCode == 0 && len(fp.res.Payload) == 0 {
				fp.res.Release()
				empty = append(empty, fp)
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		s.proxyPass(wctx, empty, wait, cancel)
		cancel()
	}
	budget := maxBytes
	for i, fp := range parts {
		n := len(fp.res.Payload)
		if n == 0 {
			fp.res.Release()
			continue
		}
		if i > 0 && n > budget {
			fp.res.Release()
			continue // over the response's max bytes: the client asks again
		}
		budget -= n
		fp.out.Records = &proxied{res: fp.res}
	}
}

// proxyPass fetches every partition concurrently with the given wait; done,
// when set, is called once the first partition brings records.
func (s *Service) proxyPass(ctx context.Context, parts []*fetchPart, wait time.Duration, done func()) {
	var once sync.Once
	forEach(parts, func(fp *fetchPart) {
		var resp protocol.FetchResponse
		req := &protocol.FetchRequest{Topic: fp.topic, Partition: fp.partition, Offset: fp.offset, MaxBytes: max(fp.maxBytes, 1),
			MaxWaitMs: int32(wait / time.Millisecond), MinBytes: 1, ReplicaID: -1, CurrentLeaderEpoch: fp.epoch, FlushedOffset: -1,
			Isolation: fp.isolation}
		res, err := s.fetcher.AtLeader(ctx, fp.topic, fp.partition, protocol.APIFetch, req, &resp)
		if done != nil && ctx.Err() != nil && err != nil {
			res.Release() // ended by another partition's answer: nothing for this one
			return
		}
		fp.res = res
		fp.fill(&resp, err)
		if err != nil {
			fp.res.Release()
			fp.res = storageclient.Result{}
		}
		if done != nil && len(fp.res.Payload) > 0 {
			once.Do(done)
		}
	})
}

// fill sets a partition's answer from the leader's.
func (fp *fetchPart) fill(resp *protocol.FetchResponse, err error) {
	if err != nil {
		fp.out.ErrorCode = protocol.KafkaOf(err, protocol.DataAnswer)
		return
	}
	fp.out.HighWatermark, fp.out.LastStableOffset, fp.out.LogStartOffset = resp.HighWatermark, resp.LastStableOffset, resp.LogStartOffset
	fp.out.Aborted = resp.Aborted
}

// proxied are records read through the frontend, in the storage client's
// pooled buffer until released.
type proxied struct{ res storageclient.Result }

func (p *proxied) Len() int                      { return len(p.res.Payload) }
func (p *proxied) WriteTo(w *kafka.Writer) error { return w.Write(p.res.Payload) }
func (p *proxied) Release()                      { p.res.Release() }

// runAll runs the asks concurrently and waits (forEach of closures).
func runAll(asks []func()) { forEach(asks, func(ask func()) { ask() }) }

// forEach runs f for every part concurrently and waits: the handlers' one
// fan-out over partitions (a single part runs on the caller's goroutine).
func forEach[P any](parts []P, f func(P)) {
	if len(parts) == 1 {
		f(parts[0])
		return
	}
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Go(func() { f(p) })
	}
	wg.Wait()
}
