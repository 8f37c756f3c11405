package kafkaapi

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/dev/testkit/kafkatest"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/server/quota"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
	"github.com/sluicemq/sluice/services/frontend/internal/txnjoin"
)

// kafkaEnv is the frontend's Kafka listener on 127.0.0.1:0 in front of fake
// storage nodes (real sockets, the storage protocol), a fake metadata
// service and a fake offsets service, with a franz-go client that sends
// requests to the listener itself (no routing by metadata): the handlers'
// answers as a Kafka client reads them.
type kafkaEnv struct {
	md      *fakecluster.Metadata
	nodes   []*fakecluster.Storage
	offsets *fakecluster.Offsets
	svc     *Service
	broker  *kgo.Broker
}

func newKafkaEnv(t *testing.T, nodes int) *kafkaEnv {
	t.Helper()
	e := &kafkaEnv{}
	var ns []cluster.Node
	e.nodes, ns = fakecluster.StartStorages(t, nodes)
	e.md = fakecluster.NewMetadata(ns...)
	t.Cleanup(e.md.Close)
	meta := cluster.NewClient([]string{e.md.URL()})
	mcfg := metacache.DefaultConfig()
	mcfg.WatchWait = 2 * time.Second
	cache, err := metacache.New(mcfg, meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	cache.Start()
	t.Cleanup(cache.Stop)

	pool := storageclient.NewPool("test-frontend")
	t.Cleanup(func() { _ = pool.Close() })
	pcfg := produce.DefaultConfig()
	pcfg.Timeout, pcfg.RetryBackoff, pcfg.MaxRetryBackoff, pcfg.UnknownTopicMaxAge = 2*time.Second, 5*time.Millisecond, 20*time.Millisecond, 0
	producer, err := produce.NewProducer(pcfg, cache, produce.PoolSender{Pool: pool}, meta, produce.NewMetrics(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	fcfg := fetch.DefaultConfig()
	fcfg.Timeout, fcfg.RetryBackoff, fcfg.UnknownTopicMaxAge = 2*time.Second, 5*time.Millisecond, 0
	fetcher, err := fetch.New(fcfg, cache, pool)
	if err != nil {
		t.Fatal(err)
	}
	e.offsets = fakecluster.NewOffsets("g")
	t.Cleanup(e.offsets.Close)
	offs := []string{e.offsets.URL()}

	cfg := Config{Listener: kafka.DefaultConfig("127.0.0.1:0"), Heartbeat: time.Second}
	log := slog.New(slog.DiscardHandler)
	member := NewMember(meta, "test-frontend", "127.0.0.1:0", "", time.Second, log)
	e.svc, err = New(cfg, Deps{Cache: cache, Producer: producer, Fetcher: fetcher, Meta: meta, Groups: groups.NewClient(offs), Txns: txns.NewClient(offs),
		Shares: shares.NewClient(offs), Joiner: &txnjoin.Joiner{}, Member: member, Quotas: quota.NewLimiter(time.Now), Metrics: kafka.NewMetrics(nil), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.svc.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.svc.Addr()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e.broker = cl.SeedBrokers()[0]
	return e
}

// addTopic adds a topic with an id, of one partition per leader, and waits
// until the listener's cluster model has it.
func (e *kafkaEnv) addTopic(t *testing.T, name string, leaders ...int32) [16]byte {
	t.Helper()
	e.md.AddTopic(name, leaders...)
	id := fmt.Sprintf("%032x", len(name)*7919+int(leaders[0]))
	e.md.Update(func(s *cluster.Snapshot) {
		for i := range s.Topics {
			if s.Topics[i].Name == name {
				s.Topics[i].ID = id
			}
		}
	})
	testkit.WaitFor(t, 10*time.Second, "the listener's model to have topic "+name, func() bool {
		snap := e.svc.cache.Snapshot()
		if snap == nil {
			return false
		}
		tp, ok := snap.Topic(name)
		return ok && tp.ID == id
	})
	tp, _ := e.svc.cache.Snapshot().Topic(name)
	return kafka.TopicID(tp)
}

// request sends req to the listener and returns its answer.
func (e *kafkaEnv) request(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	return kafkatest.Request(t, e.broker, req)
}
