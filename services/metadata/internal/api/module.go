package api

import (
	"context"
	"log/slog"

	"go.uber.org/fx"

	"github.com/sluicemq/sluice/services/metadata/internal/controller"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// Params are what the fx constructor needs.
type Params struct {
	fx.In

	Lifecycle  fx.Lifecycle
	Config     Config
	Node       *raftnode.Node
	FSM        *fsm.FSM
	Controller *controller.Controller
	Log        *slog.Logger
}

// Module provides the *Server, serving from OnStart to OnStop.
func Module() fx.Option {
	return fx.Module("api", fx.Provide(provide))
}

func provide(p Params) (*Server, error) {
	s, err := New(p.Config, p.Node, p.FSM, p.Controller, p.Log.With("component", "api"))
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error { s.Start(); return nil },
		OnStop:  s.Stop,
	})
	return s, nil
}
