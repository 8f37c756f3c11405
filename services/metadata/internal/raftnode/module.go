package raftnode

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// Params are what the fx constructor needs.
type Params struct {
	fx.In

	Lifecycle fx.Lifecycle
	Config    Config
	FSM       *fsm.FSM
	Log       *slog.Logger
	Metrics   prometheus.Registerer
	Ready     *service.Readiness
}

// Module provides the *Node, started and stopped with the application, with
// its metrics and its readiness check ("raft").
func Module() fx.Option {
	return fx.Module("raftnode", fx.Provide(provide))
}

func provide(p Params) (*Node, error) {
	n, err := New(p.Config, p.FSM, p.Log.With("component", "raft"))
	if err != nil {
		return nil, err
	}
	if err := n.RegisterMetrics(p.Metrics); err != nil {
		_ = n.Stop()
		return nil, err
	}
	p.Ready.Add("raft", n.Ready)
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { return n.Start() },
		OnStop:  func(context.Context) error { return n.Stop() },
	})
	return n, nil
}
