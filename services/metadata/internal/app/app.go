package app

import (
	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/api"
	"github.com/sluicemq/sluice/services/metadata/internal/controller"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// Name is the binary's and the service's name.
const Name = "sluice-metadata"

// Config is the whole service's configuration.
type Config struct {
	Common     service.Common
	Raft       raftnode.Config
	API        api.Config
	Controller controller.Config
}

// DefaultConfig returns the flag defaults.
func DefaultConfig() Config {
	return Config{
		Common:     service.Common{AdminAddr: "127.0.0.1:7072", LogLevel: "info", LogFormat: "json"},
		Raft:       raftnode.DefaultConfig(),
		API:        api.DefaultConfig(),
		Controller: controller.DefaultConfig(),
	}
}

// Validate checks every component.
func (c Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if err := c.Raft.Validate(); err != nil {
		return err
	}
	if err := c.API.Validate(); err != nil {
		return err
	}
	return c.Controller.Validate()
}

// Parse is service.Main's parse function: flags to fx options.
func Parse(args []string) ([]fx.Option, error) {
	cfg, err := ParseConfig(args)
	if err != nil {
		return nil, err
	}
	return Options(cfg), nil
}

// Options returns the service's fx options for cfg, without service.Module
// (service.Main adds it; tests add it themselves).
func Options(cfg Config) []fx.Option {
	return []fx.Option{
		fx.Supply(cfg.Common, service.Identity{Service: Name, NodeID: cfg.Raft.ID}, cfg.Raft, cfg.API, cfg.Controller),
		fsm.Module(),
		raftnode.Module(),
		controller.Module(),
		api.Module(),
		fx.Invoke(func(*api.Server, *controller.Controller) {}),
	}
}
