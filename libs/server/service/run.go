package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicemq/sluice/libs/server/version"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
)

// Identity names the running service in logs and metrics.
type Identity struct {
	Service string
	NodeID  string
}

// NewLogger builds the one structured logger of a process.
func NewLogger(c Common, id Identity) *slog.Logger {
	lvl, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if c.LogFormat == "text" {
		h = slog.NewTextHandler(os.Stderr, opts)
	} else {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	l := slog.New(h).With("service", id.Service)
	if id.NodeID != "" {
		l = l.With("node", id.NodeID)
	}
	return l
}

// Module provides the logger, the metrics registry, readiness and the admin
// server, started and stopped with the application. It needs Common and Identity.
func Module() fx.Option {
	return fx.Module("service",
		fx.Provide(
			NewLogger,
			NewRegistry,
			func(r *prometheus.Registry) prometheus.Registerer { return r },
			NewReadiness,
			func(lc fx.Lifecycle, c Common, reg *prometheus.Registry, ready *Readiness, log *slog.Logger) (*Admin, error) {
				a, err := NewAdmin(c.AdminAddr, c.Pprof, reg, ready, log)
				if err != nil {
					return nil, err
				}
				lc.Append(fx.Hook{
					OnStart: func(context.Context) error { a.Start(); return nil },
					OnStop:  a.Stop,
				})
				return a, nil
			},
		),
		fx.Invoke(func(*Admin) {}),
	)
}

// Main parses the command line with parse, exits 2 with a message naming the
// flag when it fails, and otherwise runs the fx application built from the
// returned options until SIGINT or SIGTERM.
//
// "NAME -version" prints the build (version.String) instead;
// "NAME healthcheck" instead asks the running process's admin listener for
// its readiness (see HealthCheck), for container health checks.
func Main(name string, parse func(args []string) ([]fx.Option, error)) {
	if len(os.Args) > 1 && os.Args[1] == HealthCheckCommand {
		os.Exit(HealthCheck(os.Args[2:], os.Stderr))
	}
	if version.Asked(os.Args[1:]) {
		fmt.Println(version.String(name))
		os.Exit(0)
	}
	opts, err := parse(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	opts = append(opts, Module(), fx.WithLogger(func(l *slog.Logger) fxevent.Logger {
		fl := &fxevent.SlogLogger{Logger: l}
		fl.UseLogLevel(slog.LevelDebug)
		return fl
	}))
	app := fx.New(opts...)
	if err := app.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	app.Run()
	if err := app.Err(); err != nil {
		os.Exit(1)
	}
}
