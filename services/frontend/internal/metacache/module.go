package metacache

import (
	"context"
	"log/slog"

	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/server/service"
)

// Module provides the *Cache, started and stopped with the application and
// registered as the "metadata" readiness check. It needs a Config and a
// *cluster.Client.
func Module() fx.Option {
	return fx.Module("metacache", fx.Provide(newForFx))
}

func newForFx(lc fx.Lifecycle, cfg Config, client *cluster.Client, ready *service.Readiness, log *slog.Logger) (*Cache, error) {
	c, err := New(cfg, client, log.With("component", "metacache"))
	if err != nil {
		return nil, err
	}
	ready.Add("metadata", c.Ready)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { c.Start(); return nil },
		OnStop:  func(context.Context) error { c.Stop(); return nil },
	})
	return c, nil
}
