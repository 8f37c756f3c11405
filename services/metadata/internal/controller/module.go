package controller

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/service"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// Module provides the *Controller, subscribed to the raft node's leadership
// and started and stopped with the application, with its readiness check
// ("controller": a leader is ready once its controller took over).
func Module() fx.Option {
	return fx.Module("controller", fx.Provide(provide))
}

func provide(lc fx.Lifecycle, cfg Config, n *raftnode.Node, f *fsm.FSM, reg prometheus.Registerer, ready *service.Readiness, log *slog.Logger) (*Controller, error) {
	c, err := New(cfg, n, f, log.With("component", "controller"))
	if err != nil {
		return nil, err
	}
	for _, m := range c.Collectors() {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	n.OnLeadership(c.SetLeader)
	ready.Add("controller", c.Ready)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { c.Start(); return nil },
		OnStop:  func(context.Context) error { c.Stop(); return nil },
	})
	return c, nil
}
