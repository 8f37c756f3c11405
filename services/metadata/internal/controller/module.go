package controller

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// Module provides the *Controller, subscribed to the raft node's leadership
// and started and stopped with the application, with its readiness check
// ("controller": a leader is ready once its controller took over).
func Module() fx.Option {
	return fx.Module("controller", fx.Provide(provide))
}

// params is what the controller is built from.
type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Node      *raftnode.Node
	FSM       *fsm.FSM
	Registry  prometheus.Registerer
	Readiness *service.Readiness
	Log       *slog.Logger
}

func provide(p params) (*Controller, error) {
	c, err := New(p.Config, p.Node, p.FSM, p.Log.With("component", "controller"))
	if err != nil {
		return nil, err
	}
	for _, m := range c.Collectors() {
		if err := p.Registry.Register(m); err != nil {
			return nil, err
		}
	}
	p.Node.OnLeadership(c.SetLeader)
	p.Readiness.Add("controller", c.Ready)
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { c.Start(); return nil },
		OnStop:  func(context.Context) error { c.Stop(); return nil },
	})
	return c, nil
}
