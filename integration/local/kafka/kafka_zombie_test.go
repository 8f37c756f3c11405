package kafka

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/txns"
)

// TestKafkaDelayedZombieWrite: under transaction version 2 a produce
// request of a transaction, held back while the transaction ends, is
// refused when it arrives. Two frontends; a transaction writes to
// partition 0 through frontend A; A is paused (SIGSTOP: its sockets take
// the bytes, nothing reads them) while two more produce requests of the
// transaction are sent to it, one to partition 0 (already in the
// transaction: A would not ask the coordinator again) and one to partition
// 1 (not yet in it); the transaction commits through frontend B; A is
// resumed. Both late requests get INVALID_PRODUCER_EPOCH (the commit raised
// the epoch: partition 0 learnt it from its marker, the coordinator refuses
// the add of partition 1), and neither partition holds their records.
func TestKafkaDelayedZombieWrite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, id = "zombie", "zombie-tx"
	itest.CreateTopic(t, ctx, c, topic, 2, 1)

	// One client per frontend, each sending straight to its frontend.
	broker := func(kafkaAddr string) *kgo.Broker {
		cl := itest.FranzClient(t, c, kgo.SeedBrokers(kafkaAddr))
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(kafkaAddr)
		for _, b := range resp.Brokers {
			if b.Host == host && strconv.Itoa(int(b.Port)) == port {
				return cl.Broker(int(b.NodeID))
			}
		}
		t.Fatalf("frontend %s is not among the brokers %+v", kafkaAddr, resp.Brokers)
		return nil
	}
	a, b := broker(c.KafkaAddrs()[0]), broker(c.KafkaAddrs()[1])

	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = kmsg.StringPtr(id), 60000, -1, -1
	ir, err := b.Request(ctx, init)
	if err != nil || ir.(*kmsg.InitProducerIDResponse).ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %+v", err, ir)
	}
	pid, epoch := ir.(*kmsg.InitProducerIDResponse).ProducerID, ir.(*kmsg.InitProducerIDResponse).ProducerEpoch
	produce := func(partition int32, seq int32, value string) *kmsg.ProduceRequest {
		bl := record.NewBuilder(record.CodecNone)
		bl.SetProducer(pid, epoch, seq)
		bl.SetTransactional(true)
		bl.Append(record.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(value)})
		batch, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = 12 // transaction version 2: the produce adds its partition
		req.TransactionID, req.Acks, req.TimeoutMillis = kmsg.StringPtr(id), -1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = partition, append([]byte(nil), batch...)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	code := func(resp kmsg.Response, err error) int16 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if ec := code(a.Request(ctx, produce(0, 0, "first"))); ec != 0 {
		t.Fatalf("the transaction's first produce: %v", protocol.Code(ec))
	}

	fa := c.Proc("frontend")
	if err := c.Pause(fa); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = c.Resume(fa)
		}
	}()
	type late struct {
		resp kmsg.Response
		err  error
	}
	lates := make(chan late, 2)
	for i, part := range []int32{0, 1} {
		req := produce(part, int32(1+i), "zombie")
		go func() {
			resp, err := a.Request(ctx, req)
			lates <- late{resp, err}
		}()
	}
	time.Sleep(300 * time.Millisecond) // both requests are in A's socket buffers

	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 5
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	er, err := b.Request(ctx, end)
	if err != nil || er.(*kmsg.EndTxnResponse).ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %+v", err, er)
	}
	if next := er.(*kmsg.EndTxnResponse).ProducerEpoch; next != epoch+1 {
		t.Fatalf("EndTxn v5 answered epoch %d after %d: version 2 raises it", next, epoch)
	}
	tc := txns.NewClient(c.OffsetsURLs())
	for {
		d, err := tc.Describe(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == "CompleteCommit" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the transaction did not complete: %+v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := c.Resume(fa); err != nil {
		t.Fatal(err)
	}
	resumed = true
	for range 2 {
		l := <-lates
		if ec := code(l.resp, l.err); ec != int16(protocol.InvalidProducerEpoch) {
			p := l.resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].Partition
			t.Fatalf("the late produce to partition %d: %v, want INVALID_PRODUCER_EPOCH", p, protocol.Code(ec))
		}
	}
	rd := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := itest.PollValues(t, ctx, rd, 1, 20*time.Second)
	got = append(got, itest.PollValues(t, ctx, rd, 1, time.Second)...)
	if len(got) != 1 || got[0] != "first" {
		t.Fatalf("read_uncommitted after the late writes: %v, want only the committed record", got)
	}
}
