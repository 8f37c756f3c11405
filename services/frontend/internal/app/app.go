// Package app wires the frontend together as one fx application: the metadata
// client and cache, the storage connection pools (one for produce, one for
// fetches, so that large fetch answers never queue ahead of produce
// acknowledgements on a connection), the producer, the fetcher, the relay to
// the offsets service, the read-only web console and the public HTTP server,
// next to the admin listener of libs/server/service.
//
// Start order follows the dependencies (cache, pools, producer, fetcher, HTTP
// server) and fx stops in reverse: the HTTP server drains first, then the
// producer's accumulator sends what it holds and its goroutines end, then the
// pools close their storage connections and the cache stops its watch. Every
// goroutine the frontend runs belongs to one of these and is waited for on
// stop.
package app

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/server/quota"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/frontend/internal/config"
	"github.com/sluicemq/sluice/services/frontend/internal/console"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
	"github.com/sluicemq/sluice/services/frontend/internal/forward"
	"github.com/sluicemq/sluice/services/frontend/internal/httpapi"
	"github.com/sluicemq/sluice/services/frontend/internal/kafkaapi"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
	"github.com/sluicemq/sluice/services/frontend/internal/txnjoin"
)

// Parse reads flags (and SLUICE_* variables), validates them and returns the
// fx options of a frontend; service.Main adds the service module.
func Parse(args []string) ([]fx.Option, error) {
	c, err := config.Parse(args)
	if err != nil {
		return nil, err
	}
	return Options(c), nil
}

// Options returns the fx options of a frontend with configuration c, without
// service.Module (tests add it, or their own logger and registry).
func Options(c config.Config) []fx.Option {
	return []fx.Option{
		fx.Supply(c, c.Common, c.HTTP, c.Produce, c.Fetch, c.Cache, c.Console, service.Identity{Service: "frontend", NodeID: c.NodeID}),
		Module(),
	}
}

// Module provides the frontend's parts and starts the HTTP server.
func Module() fx.Option {
	return fx.Module("frontend",
		fx.Provide(
			func(c config.Config) *cluster.Client {
				return cluster.NewClientTLS(service.SplitList(c.Metadata), c.TLSClient)
			},
			func(c config.Config) service.TLSClient { return service.TLSClient{Config: c.TLSClient} },
			newPools,
			func(reg prometheus.Registerer) *produce.Metrics { return produce.NewMetrics(reg) },
			newProducer,
			newFetcher,
			newOffsetsRelay,
			func(c config.Config) *groups.Client {
				return groups.NewClientTLS(service.SplitList(c.Offsets), c.TLSClient)
			},
			func(c config.Config) *txns.Client {
				return txns.NewClientTLS(service.SplitList(c.Offsets), c.TLSClient)
			},
			func(c config.Config) *shares.Client {
				return shares.NewClientTLS(service.SplitList(c.Offsets), c.TLSClient)
			},
			// One memory of the partitions added to transactions, for the
			// HTTP API and the Kafka listener.
			func() *txnjoin.Joiner { return &txnjoin.Joiner{} },
			newServer,
			// One set of quota buckets for the HTTP API and the Kafka
			// listener: a client id has one budget on a frontend.
			func() *quota.Limiter { return quota.NewLimiter(nil) },
		),
		metacache.Module(),
		console.Module(),
		fx.Invoke(func(*httpapi.Server) {}, startKafka),
	)
}

// kafkaParams are what the Kafka listener needs.
type kafkaParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Producer  *produce.Producer
	Fetcher   *fetch.Fetcher
	Client    *cluster.Client
	Cache     *metacache.Cache
	Quotas    *quota.Limiter
	Offsets   *groups.Client
	Txns      *txns.Client
	Shares    *shares.Client
	Joiner    *txnjoin.Joiner
	Registry  prometheus.Registerer
	Log       *slog.Logger
	// HTTP orders the listener after the HTTP server: it starts after and
	// stops before it, while the producer still runs.
	HTTP *httpapi.Server
}

// startKafka starts the Kafka listener and its registration with metadata,
// unless -kafka-addr is empty.
func startKafka(p kafkaParams) error {
	kc := p.Config.Kafka
	if kc.Listener.Addr == "" {
		p.Log.Info("kafka listener off (-kafka-addr is empty)")
		return nil
	}
	log := p.Log.With("component", "kafka")
	// The name is stable across restarts (the id Kafka clients know comes
	// back) and unique per listener, even for frontends sharing a host.
	name := p.Config.NodeID + "@" + kc.Listener.Advertised()
	member := kafkaapi.NewMember(p.Client, name, kc.Listener.Advertised(), kc.Rack, kc.Heartbeat, log)
	svc, err := kafkaapi.New(kc, kafkaapi.Deps{Cache: p.Cache, Producer: p.Producer, Fetcher: p.Fetcher, Meta: p.Client, Groups: p.Offsets, Txns: p.Txns,
		Shares: p.Shares, Joiner: p.Joiner, Member: member, Quotas: p.Quotas, Metrics: kafka.NewMetrics(p.Registry), Log: log})
	if err != nil {
		return err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { svc.Start(); member.Start(); return nil },
		OnStop: func(ctx context.Context) error {
			member.Stop()
			return svc.Stop(ctx)
		},
	})
	return nil
}

// pools are the frontend's storage connection pools.
type pools struct {
	fx.Out
	Produce *storageclient.Pool `name:"produce"`
	Fetch   *storageclient.Pool `name:"fetch"`
}

func newPools(lc fx.Lifecycle, id service.Identity, t service.TLSClient) pools {
	p := pools{
		Produce: storageclient.NewPoolTLS("sluice-frontend/"+id.NodeID, t.Config),
		Fetch:   storageclient.NewPoolTLS("sluice-frontend/"+id.NodeID+"/fetch", t.Config),
	}
	lc.Append(fx.StopHook(func() { _ = p.Produce.Close(); _ = p.Fetch.Close() }))
	return p
}

// producerParams are what the producer needs.
type producerParams struct {
	fx.In
	Config produce.Config
	Cache  *metacache.Cache
	Pool   *storageclient.Pool `name:"produce"`
	// Client hands out the producer ids of the accumulator's lanes.
	Client  *cluster.Client
	Metrics *produce.Metrics
	Log     *slog.Logger
}

func newProducer(lc fx.Lifecycle, p producerParams) (*produce.Producer, error) {
	pr, err := produce.NewProducer(p.Config, p.Cache, produce.PoolSender{Pool: p.Pool}, p.Client, p.Metrics, p.Log.With("component", "produce"))
	if err != nil {
		return nil, err
	}
	// Stopped after the HTTP server (built later, stopped first), before the
	// pool closes its connections (built earlier).
	lc.Append(fx.StopHook(pr.Close))
	return pr, nil
}

// fetcherParams are what the fetcher needs.
type fetcherParams struct {
	fx.In
	Config fetch.Config
	Cache  *metacache.Cache
	Pool   *storageclient.Pool `name:"fetch"`
}

func newFetcher(p fetcherParams) (*fetch.Fetcher, error) {
	return fetch.New(p.Config, p.Cache, p.Pool)
}

func newOffsetsRelay(lc fx.Lifecycle, c config.Config) *forward.Forwarder {
	f := forward.NewTLS("offsets", service.SplitList(c.Offsets), protocol.NotCoordinator, c.TLSClient)
	lc.Append(fx.StopHook(f.Close))
	return f
}

// serverParams are what the HTTP server needs.
type serverParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    httpapi.Config
	Producer  *produce.Producer
	Fetcher   *fetch.Fetcher
	Client    *cluster.Client
	Offsets   *forward.Forwarder
	Cache     *metacache.Cache
	Console   *console.Console
	Quotas    *quota.Limiter
	Txns      *txns.Client
	Joiner    *txnjoin.Joiner
	Log       *slog.Logger
}

func newServer(p serverParams) (*httpapi.Server, error) {
	d := httpapi.Deps{Producer: p.Producer, Fetcher: p.Fetcher, Admin: p.Client, Offsets: p.Offsets, Cache: p.Cache, Console: p.Console.Serve,
		Quotas: p.Quotas, Txns: p.Txns, Joiner: p.Joiner}
	s, err := httpapi.New(p.Config, d, p.Log.With("component", "http"))
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  s.Stop,
	})
	return s, nil
}
