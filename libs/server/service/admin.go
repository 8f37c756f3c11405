package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Readiness collects named checks behind /readyz. A service is ready when every
// check passes; /readyz lists the failing ones.
type Readiness struct {
	mu     sync.Mutex
	checks map[string]func() error // guarded by mu
}

// NewReadiness returns an empty Readiness (ready).
func NewReadiness() *Readiness { return &Readiness{checks: map[string]func() error{}} }

// Add registers a check; it must be cheap and must not block.
func (r *Readiness) Add(name string, check func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[name] = check
}

// Check runs every check and returns the failures joined, or nil.
func (r *Readiness) Check() error {
	r.mu.Lock()
	names := make([]string, 0, len(r.checks))
	for n := range r.checks {
		names = append(names, n)
	}
	checks := make([]func() error, 0, len(names))
	sort.Strings(names)
	for _, n := range names {
		checks = append(checks, r.checks[n])
	}
	r.mu.Unlock()
	var errs []error
	for i, c := range checks {
		if err := c(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", names[i], err))
		}
	}
	return errors.Join(errs...)
}

// Admin is the admin HTTP server of a service.
type Admin struct {
	ln  net.Listener
	srv *http.Server
	mux *http.ServeMux
	log *slog.Logger
	wg  sync.WaitGroup
}

// NewAdmin listens on addr and serves health, readiness, metrics and, when
// enabled, pprof. Start must be called to serve.
func NewAdmin(addr string, pprofOn bool, reg *prometheus.Registry, ready *Readiness, log *slog.Logger) (*Admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if err := ready.Check(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: " + strings.ReplaceAll(err.Error(), "\n", "; ") + "\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return &Admin{ln: ln, mux: mux, log: log, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr returns the listener's address.
func (a *Admin) Addr() string { return a.ln.Addr().String() }

// Handle adds a route to the admin server; call before Start.
func (a *Admin) Handle(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

// Start serves in a goroutine that Stop waits for.
func (a *Admin) Start() {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("admin server stopped", "err", err)
		}
	}()
	a.log.Info("admin listener started", "addr", a.Addr())
}

// Stop shuts the server down and waits for its goroutine.
func (a *Admin) Stop(ctx context.Context) error {
	err := a.srv.Shutdown(ctx)
	a.wg.Wait()
	return err
}

// NewRegistry returns a Prometheus registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
