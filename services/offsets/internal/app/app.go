// Package app wires the offsets service: configuration from flags, the bbolt
// store and the HTTP API, as one fx application.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/service"
	"github.com/sluicemq/sluice/services/offsets/internal/api"
	"github.com/sluicemq/sluice/services/offsets/internal/store"
)

// Config is the offsets service's configuration.
type Config struct {
	Common   service.Common
	ID       string
	HTTPAddr string
	DataDir  string
}

// Parse reads flags and SLUICE_* variables and returns the fx options.
func Parse(args []string) ([]fx.Option, error) {
	var c Config
	fs := service.NewFlagSet("sluice-offsets")
	c.Common.Register(fs, "127.0.0.1:7081")
	fs.String(&c.ID, "id", "1", "this replica's id (for logs)")
	fs.String(&c.HTTPAddr, "http-addr", "127.0.0.1:7080", "listen address of the offsets API")
	fs.String(&c.DataDir, "data-dir", "./data/offsets", "directory holding the offsets bbolt file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := c.Common.Validate(); err != nil {
		return nil, err
	}
	if err := service.ValidateAddr("http-addr", c.HTTPAddr); err != nil {
		return nil, err
	}
	if c.DataDir == "" {
		return nil, fmt.Errorf("flag -data-dir: empty")
	}
	return []fx.Option{fx.Supply(c, c.Common, service.Identity{Service: "offsets", NodeID: c.ID}), Module()}, nil
}

// Module provides the store and the API server.
func Module() fx.Option {
	return fx.Module("offsets",
		fx.Provide(newStore, newServer),
		fx.Invoke(func(*api.Server) {}),
	)
}

func newStore(lc fx.Lifecycle, c Config) (*store.Store, error) {
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("flag -data-dir: %w", err)
	}
	st, err := store.Open(filepath.Join(c.DataDir, "offsets.db"))
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(st.Close))
	return st, nil
}

func newServer(lc fx.Lifecycle, c Config, st *store.Store, log *slog.Logger) (*api.Server, error) {
	s, err := api.New(c.HTTPAddr, st, log)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  s.Stop,
	})
	return s, nil
}
