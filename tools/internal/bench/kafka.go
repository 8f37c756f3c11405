package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// --protocol kafka: the same runs through the cluster's Kafka listeners with
// franz-go, a Kafka client no one here wrote, so the two paths are measured
// side by side. Producers are kgo clients with the run's acks, idempotence,
// linger, batch size, compression and delivery timeout; consumers are kgo
// members of the run's consumer group (--group), reading from the start
// (consume) or from the partitions' ends before producing (e2e).

// kafkaCodec maps a record codec to franz-go's.
func kafkaCodec(c record.Codec) kgo.CompressionCodec {
	switch c {
	case record.CodecGzip:
		return kgo.GzipCompression()
	case record.CodecSnappy:
		return kgo.SnappyCompression()
	case record.CodecLZ4:
		return kgo.Lz4Compression()
	case record.CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// newKafkaProducer is producer i's franz-go client with the run's settings;
// with --txn-records, transactional under its own transactional id.
func (r *run) newKafkaProducer(i int) (*kgo.Client, error) {
	c := r.cfg
	// The SDK producer's memory bound (records sent but not answered),
	// rather than franz-go's default of 10,000 records: the two paths
	// buffer alike.
	buffer := c.producerConfig().BufferMemory
	opts := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap...), kgo.ClientID("sluice-bench"), kgo.DefaultProduceTopic(c.Topic),
		kgo.MaxBufferedBytes(int(buffer)), kgo.MaxBufferedRecords(1 << 30),
		kgo.ProducerLinger(c.Linger), kgo.ProducerBatchMaxBytes(int32(c.BatchSize)), kgo.ProducerBatchCompression(kafkaCodec(c.Compression)),
		kgo.RecordDeliveryTimeout(c.DeliveryTimeout)}
	switch c.Acks {
	case protocol.AcksAll:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case protocol.AcksLeader:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !c.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if c.TxnRecords > 0 {
		opts = append(opts, kgo.TransactionalID(r.txnID(i)))
	}
	return kgo.NewClient(opts...)
}

// kafkaProducer sends records with one franz-go client until the plan says
// stop or ctx ends, then flushes what is buffered and awaits the outcomes,
// up to drain. It runs on its own goroutine, owned by the run.
//
// With --txn-records it sends in transactions of that many records: it
// flushes each and commits it (the flush and the commit are its commit
// latency, as the SDK's CommitTxn), the last, shorter one at the end.
func (r *run) kafkaProducer(ctx, drain context.Context, i int, cl *kgo.Client, pacer *Pacer, stop func(error)) {
	txn := r.cfg.TxnRecords
	inTxn := 0 // records sent in the open transaction
	end := r.txnCommitter(i, stop, func(c context.Context) error {
		if err := cl.Flush(c); err != nil {
			return err
		}
		return cl.EndTransaction(c, kgo.TryCommit)
	})
	commit := func(c context.Context) bool {
		if !end(c) {
			return false
		}
		inTxn = 0
		return true
	}
	defer func() {
		if inTxn > 0 {
			commit(drain)
		}
		if err := cl.Flush(drain); err != nil && drain.Err() == nil {
			r.stderrf("producer %d: flush: %v", i, err)
		}
		cl.Close()
	}()
	keys := r.cfg.Keys.NewGen(r.seed+uint64(i), i)
	shared := newValue(r.cfg.RecordSize, r.seed+uint64(i))
	lat := r.prod.lats[i]
	size := r.cfg.RecordSize
	// One promise for every record, so that none is allocated per record:
	// the record carries its send time (Timestamp) and whether it counts
	// (Context is countedCtx or warmupCtx).
	promise := func(rec *kgo.Record, err error) {
		m := client.RecordMetadata{Partition: rec.Partition, Offset: rec.Offset, Err: err}
		if err != nil && ctx.Err() != nil && drain.Err() != nil {
			m.Err = errUnanswered
		}
		r.prod.outcome(lat, rec.Timestamp, rec.Context == countedCtx, size, 1, m)
		key := rec.Key
		*rec = kgo.Record{Key: key} // franz-go is done with it: reused, as its docs allow
		records.Put(rec)
	}
	for {
		sentAt, ok := pace(ctx, pacer, 1)
		if !ok {
			return
		}
		n, counted := r.plan.take(sentAt, 1)
		if n == 0 {
			return
		}
		if txn > 0 && inTxn == 0 {
			if err := cl.BeginTransaction(); err != nil {
				stop(fmt.Errorf("producer %d: begin a transaction: %w", i, err))
				return
			}
		}
		value := shared // franz-go keeps the slice until the answer: shared only while never written
		if r.cfg.Mode == ModeE2E {
			value = append([]byte(nil), shared...)
			stamp(value, sentAt)
		}
		rec := records.Get().(*kgo.Record)
		rec.Key = rec.Key[:0]
		if k := keys.Next(); k != nil {
			rec.Key = append(rec.Key, k...)
		}
		rec.Value, rec.Timestamp, rec.Context = value, sentAt, warmupCtx
		if counted {
			rec.Context = countedCtx
		}
		cl.Produce(ctx, rec, promise)
		r.prod.sent.Add(1)
		if txn > 0 {
			if inTxn++; inTxn == txn && !commit(ctx) {
				return
			}
		}
	}
}

// countedCtx and warmupCtx mark a record as counted or sent in the warm-up.
var (
	countedCtx = context.WithValue(context.Background(), countedKey{}, true)
	warmupCtx  = context.WithValue(context.Background(), countedKey{}, false)
)

type countedKey struct{}

// records are franz-go records reused once their promise ran: a franz-go
// producer needs a *Record per record, and allocating (and zeroing) one each
// cost the benchmark a third of its CPU, which the cluster shares.
var records = sync.Pool{New: func() any { return new(kgo.Record) }}

// newKafkaConsumers creates --consumers franz-go members of the run's group
// (Kafka's classic protocol, franz-go's default cooperative-sticky
// assignor), as the SDK's consumers are members of it through the offsets
// service.
func (r *run) newKafkaConsumers() ([]member, error) {
	var out []member
	for i := 0; i < r.cfg.Consumers; i++ {
		m := &kafkaMember{parts: map[int32]*kafkaPart{}}
		// franz-go fetches once per broker at a time and holds one answer
		// until it is polled; the SDK consumer keeps up to Prefetch more 1
		// MiB answers per partition. Fetches of that many MiB per
		// partition buffer alike.
		cc := client.DefaultConsumerConfig()
		perPartition := cc.FetchMaxBytes * int32(1+cc.Prefetch)
		cl, err := kgo.NewClient(kgo.SeedBrokers(r.cfg.Bootstrap...), kgo.ClientID(fmt.Sprintf("sluice-bench-%d", i)),
			kgo.ConsumerGroup(r.cfg.Group), kgo.ConsumeTopics(r.cfg.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(cc.FetchMaxWait), kgo.FetchMaxPartitionBytes(perPartition),
			kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
				m.assigned(cl, r, assigned[r.cfg.Topic])
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) { m.dropped(revoked[r.cfg.Topic]) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) { m.dropped(lost[r.cfg.Topic]) }))
		if err != nil {
			closeConsumers(out)
			return nil, fmt.Errorf("kafka consumer: %w", err)
		}
		m.cl = cl
		out = append(out, m)
	}
	return out, nil
}

// kafkaMember is a franz-go group member.
type kafkaMember struct {
	cl *kgo.Client

	mu    sync.Mutex // guards parts: the group's callbacks and poll write, states reads
	parts map[int32]*kafkaPart
}

// kafkaPart is a partition a kafkaMember owns.
type kafkaPart struct {
	pos, hw int64
	known   bool // pos is an offset, not "the start" until a fetch says where it is
}

// assigned records partitions given to the member; in e2e they start where
// the tracker says (the partitions' ends before producing), whatever the
// group committed.
func (m *kafkaMember) assigned(cl *kgo.Client, r *run, ps []int32) {
	at := map[int32]kgo.EpochOffset{}
	m.mu.Lock()
	for _, p := range ps {
		part := &kafkaPart{hw: -1}
		if r.tracker != nil {
			part.pos, part.known = r.tracker.startOf(p), true
			at[p] = kgo.EpochOffset{Epoch: -1, Offset: part.pos}
		}
		m.parts[p] = part
	}
	m.mu.Unlock()
	if len(at) > 0 {
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{r.cfg.Topic: at})
	}
}

func (m *kafkaMember) dropped(ps []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		delete(m.parts, p)
	}
}

func (m *kafkaMember) poll(ctx context.Context) ([]polled, error) {
	fs := m.cl.PollFetches(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, fe := range fs.Errors() {
		if !errors.Is(fe.Err, context.Canceled) {
			return nil, fmt.Errorf("fetch %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
	}
	out := make([]polled, 0, fs.NumRecords())
	m.mu.Lock()
	defer m.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for _, rec := range p.Records {
			out = append(out, polled{partition: rec.Partition, offset: rec.Offset, value: rec.Value})
		}
		part := m.parts[p.Partition]
		if part == nil {
			return // revoked meanwhile
		}
		part.hw = p.HighWatermark
		switch n := len(p.Records); {
		case n > 0:
			part.pos = p.Records[n-1].Offset + 1
		case !part.known:
			part.pos = p.LogStartOffset
		}
		part.known = true
	})
	return out, nil
}

func (m *kafkaMember) states() []partState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]partState, 0, len(m.parts))
	for p, part := range m.parts {
		out = append(out, partState{partition: p, pos: part.pos, hw: part.hw, known: part.known})
	}
	return out
}

func (m *kafkaMember) close(context.Context) { m.cl.Close() }
