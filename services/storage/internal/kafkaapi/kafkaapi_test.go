package kafkaapi

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/dev/testkit/kafkatest"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
	"github.com/sluicemq/sluice/services/storage/internal/server"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// model is the node's cluster model as a fixed snapshot (the membership
// that watches metadata is the node's wiring, not the listener's).
type model struct{ snap *cluster.Snapshot }

func (m model) Snapshot() *cluster.Snapshot { return m.snap }
func (m model) Refresh(context.Context) (*cluster.Snapshot, error) {
	return m.snap, nil
}

// storageEnv is a storage node (node 1) leading both partitions of topic
// "t" on a real data directory: its storage-protocol server, to write
// records as a frontend does, and its Kafka listener, with a franz-go
// client sending requests to the listener itself.
type storageEnv struct {
	conn   *storageclient.Conn
	broker *kgo.Broker
	id     [16]byte
}

func newStorageEnv(t *testing.T) *storageEnv {
	t.Helper()
	topic := cluster.Topic{Name: "t", ID: "000102030405060708090a0b0c0d0e0f", ReplicationFactor: 1, Config: map[string]string{}}
	for i := range 2 {
		topic.Partitions = append(topic.Partitions, cluster.Partition{ID: int32(i), Replicas: []int32{1}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}})
	}
	snap := &cluster.Snapshot{Version: 1, Nodes: []cluster.Node{{ID: 1, Addr: "x", Alive: true}}, Topics: []cluster.Topic{topic}}
	mgr, err := replica.NewManager(t.TempDir(), 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Apply(snap, true); err != nil {
		t.Fatal(err)
	}
	scfg := server.DefaultConfig()
	scfg.Addr = "127.0.0.1:0"
	srv, err := server.New(scfg, mgr, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	md := fakecluster.NewMetadata(snap.Nodes...)
	t.Cleanup(md.Close)
	svc, err := New(Config{Listener: kafka.DefaultConfig("127.0.0.1:0"), MaxFetchWait: time.Second}, Deps{Replicas: mgr, Model: model{snap},
		Admin: cluster.NewClient([]string{md.URL()}), Quotas: srv.Quotas(), Metrics: server.NewMetrics(nil), KafkaMetrics: kafka.NewMetrics(nil), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop the listener: %v", err)
		}
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop the server: %v", err)
		}
		_ = mgr.Close()
	})
	e := &storageEnv{id: kafka.TopicID(&topic)}
	if e.conn, err = storageclient.Dial(context.Background(), srv.Addr(), "test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.conn.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(svc.Addr()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e.broker = cl.SeedBrokers()[0]
	return e
}

// produce writes values to t-partition through the storage protocol.
func (e *storageEnv) produce(t *testing.T, partition int32, values ...string) {
	t.Helper()
	payload := testkit.Batch(t, values...)
	var resp protocol.ProduceResponse
	if _, err := e.conn.Call(context.Background(), protocol.APIProduce, &protocol.ProduceRequest{Topic: "t", Partition: partition,
		Acks: protocol.AcksAll, TimeoutMs: 5000}, payload, &resp); err != nil {
		t.Fatal(err)
	}
}

// request sends req to the listener and returns its answer.
func (e *storageEnv) request(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	return kafkatest.Request(t, e.broker, req)
}

// fetch reads t-partition from offset over Kafka: the partition's answer
// and the values it carries.
func (e *storageEnv) fetch(t *testing.T, partition int32, offset int64) (kmsg.FetchResponseTopicPartition, []string) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 0, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "t", e.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	fp := e.request(t, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	return fp, testkit.Values(t, fp.RecordBatches)
}

// TestStorageListenerServesReads: the storage node's Kafka listener reads
// the records the node leads (by topic id), answers a fetch past the log
// end OFFSET_OUT_OF_RANGE and a partition it has not
// UNKNOWN_TOPIC_OR_PARTITION, and gives the log's offsets to ListOffsets
// and OffsetForLeaderEpoch.
func TestStorageListenerServesReads(t *testing.T) {
	e := newStorageEnv(t)
	e.produce(t, 0, "a", "b", "c")
	if fp, values := e.fetch(t, 0, 0); fp.ErrorCode != 0 || fp.HighWatermark != 3 || len(values) != 3 || values[0] != "a" || values[2] != "c" {
		t.Fatalf("fetch of t-0 from 0: error %d, high watermark %d, values %v", fp.ErrorCode, fp.HighWatermark, values)
	}
	if fp, values := e.fetch(t, 0, 2); fp.ErrorCode != 0 || len(values) == 0 || values[len(values)-1] != "c" {
		t.Fatalf("fetch of t-0 from 2: error %d, values %v", fp.ErrorCode, values)
	}
	if fp, _ := e.fetch(t, 0, 10); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch past the log end: error %d, want OFFSET_OUT_OF_RANGE", fp.ErrorCode)
	}
	if fp, _ := e.fetch(t, 7, 0); fp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("fetch of a partition the node does not have: error %d, want UNKNOWN_TOPIC_OR_PARTITION", fp.ErrorCode)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	for _, ts := range []int64{-1, -2} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = ts
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	lr := e.request(t, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	if len(lr) != 2 || lr[0].ErrorCode != 0 || lr[0].Offset != 3 || lr[1].ErrorCode != 0 || lr[1].Offset != 0 {
		t.Errorf("ListOffsets latest and earliest of t-0: %+v", lr)
	}

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.CurrentLeaderEpoch, op.LeaderEpoch = -1, 1
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	er := e.request(t, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if er.ErrorCode != 0 || er.EndOffset != 3 || er.LeaderEpoch != 1 {
		t.Errorf("OffsetForLeaderEpoch of epoch 1 of t-0: %+v, want end offset 3 at epoch 1", er)
	}
}

// TestStorageListenerSendsProducesToTheFrontends: a storage node
// advertises Produce but does not take records over Kafka (frontends
// lead): each partition is NOT_LEADER_OR_FOLLOWER, and nothing is written.
func TestStorageListenerSendsProducesToTheFrontends(t *testing.T) {
	e := newStorageEnv(t)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testkit.Batch(t, "x")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := e.request(t, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.BaseOffset != -1 {
		t.Fatalf("a produce at a storage node: error %d, base offset %d; want NOT_LEADER_OR_FOLLOWER", p.ErrorCode, p.BaseOffset)
	}
	if fp, values := e.fetch(t, 0, 0); fp.ErrorCode != 0 || len(values) != 0 {
		t.Fatalf("the refused produce wrote %v", values)
	}
}
