package console

import (
	"log/slog"

	"go.uber.org/fx"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/frontend/internal/metacache"
)

// Module provides the *Console. It needs a Config, the *metacache.Cache, a
// *groups.Client and a *shares.Client of the offsets service and the
// service.Identity; it opens a
// storage connection pool of its own (so that a storage node slow to answer
// the console never delays produce or fetch connections), closed on stop.
func Module() fx.Option {
	return fx.Module("console", fx.Provide(newForFx))
}

// params are what the console is built from.
type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Cache     *metacache.Cache
	Groups    *groups.Client
	Shares    *shares.Client
	Identity  service.Identity
	TLS       service.TLSClient
	Log       *slog.Logger
}

func newForFx(p params) (*Console, error) {
	pool := storageclient.NewPoolTLS("sluice-frontend/"+p.Identity.NodeID+"/console", p.TLS.Config)
	c, err := New(p.Config, Sources{Metadata: p.Cache, Replicas: pool, Groups: p.Groups, Shares: p.Shares}, p.Log.With("component", "console"))
	if err != nil {
		_ = pool.Close()
		return nil, err
	}
	p.Lifecycle.Append(fx.StopHook(func() { _ = pool.Close() }))
	return c, nil
}
