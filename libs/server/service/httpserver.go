package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"
)

// HTTPServer runs a fasthttp server on a listener, in one goroutine that Stop
// waits for. The metadata, frontend and offsets APIs share it.
type HTTPServer struct {
	srv *fasthttp.Server
	ln  net.Listener
	log *slog.Logger
	wg  sync.WaitGroup // the Serve goroutine
}

// ListenHTTP listens on addr for srv.
func ListenHTTP(addr string, srv *fasthttp.Server, log *slog.Logger) (*HTTPServer, error) {
	return ListenHTTPTLS(addr, srv, log, nil)
}

// ListenHTTPTLS is ListenHTTP serving HTTPS with cfg (nil: plain HTTP).
func ListenHTTPTLS(addr string, srv *fasthttp.Server, log *slog.Logger, cfg *tls.Config) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listener: %w", err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return NewHTTPServer(ln, srv, log), nil
}

// NewHTTPServer serves srv on an existing listener. It sets srv's logger to
// log when srv has none.
func NewHTTPServer(ln net.Listener, srv *fasthttp.Server, log *slog.Logger) *HTTPServer {
	if srv.Logger == nil {
		srv.Logger = FasthttpLogger{log}
	}
	srv.CloseOnShutdown = true
	return &HTTPServer{srv: srv, ln: ln, log: log}
}

// Addr returns the listen address.
func (h *HTTPServer) Addr() string { return h.ln.Addr().String() }

// Start serves in a goroutine that Stop waits for.
func (h *HTTPServer) Start() {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if err := h.srv.Serve(h.ln); err != nil && !errors.Is(err, net.ErrClosed) {
			h.log.Error("http server stopped", "err", err)
		}
	}()
	h.log.Info("http listener started", "addr", h.Addr())
}

// Stop stops accepting, lets requests in progress finish until ctx ends, and
// waits for the Serve goroutine. Callers with long-polls end them first.
func (h *HTTPServer) Stop(ctx context.Context) error {
	err := h.srv.ShutdownWithContext(ctx)
	if err != nil {
		err = fmt.Errorf("http shutdown: %w", err)
	}
	_ = h.ln.Close() // Serve may not have run; closing twice is harmless
	h.wg.Wait()
	return err
}

// FasthttpLogger routes fasthttp's own log lines (mostly connection errors
// caused by clients) to the service's logger at debug level.
type FasthttpLogger struct{ Log *slog.Logger }

// Printf implements fasthttp.Logger.
func (l FasthttpLogger) Printf(format string, args ...any) {
	l.Log.Debug("http: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}
