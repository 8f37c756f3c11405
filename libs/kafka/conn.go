package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/zerocopy"
)

// Conn is one client connection. Its requests are served one at a time, on
// the connection's goroutine, so its fields need no lock.
type Conn struct {
	s      *Server
	nc     net.Conn     // the connection (a *tls.Conn under TLS)
	tcp    *net.TCPConn // the socket when plain, for sendfile; nil under TLS
	id     int64
	remote string
	ctx    context.Context
	cancel context.CancelFunc

	clientID                  string // of the request being served
	software, softwareVersion string // from ApiVersions v3+

	// principal is who the connection authenticated as: a SASL user, or a
	// client certificate's common name without SASL; "" is anonymous.
	principal string
	// authenticated: the SASL exchange succeeded (always true without
	// SASL).
	authenticated bool
	sasl          saslState
}

func newConn(s *Server, nc net.Conn, id int64) *Conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &Conn{s: s, nc: nc, id: id, remote: nc.RemoteAddr().String(), ctx: ctx, cancel: cancel,
		authenticated: len(s.cfg.SASLMechanisms) == 0}
	if tc, ok := nc.(*net.TCPConn); ok {
		c.tcp = tc
		_ = tc.SetNoDelay(true)
	}
	context.AfterFunc(ctx, func() { _ = nc.Close() })
	return c
}

// ClientID is the client id of the request being served.
func (c *Conn) ClientID() string { return c.clientID }

// Remote is the client's address.
func (c *Conn) Remote() string { return c.remote }

// Principal is the connection's principal ("" anonymous) and whether one
// authenticated: a SASL user, or a certificate's name without SASL.
func (c *Conn) Principal() (string, bool) { return c.principal, c.principal != "" }

// Log returns a logger naming the connection.
func (c *Conn) Log() *slog.Logger {
	return c.s.log.With("remote", c.remote, "client_id", c.clientID, "principal", c.principal)
}

func (c *Conn) close() {
	c.cancel()
	_ = c.nc.Close()
}

// serve reads and answers requests until the connection ends.
func (c *Conn) serve() {
	defer c.close()
	if tc, ok := c.nc.(*tls.Conn); ok {
		_ = tc.SetDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
		if err := tc.HandshakeContext(c.ctx); err != nil {
			c.s.logBad("kafka TLS handshake failed", "remote", c.remote, "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		if st := tc.ConnectionState(); len(c.s.cfg.SASLMechanisms) == 0 && len(st.PeerCertificates) > 0 {
			c.principal = st.PeerCertificates[0].Subject.CommonName
		}
	}
	var size [4]byte
	for c.ctx.Err() == nil {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if _, err := io.ReadFull(c.nc, size[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
				c.s.log.Debug("kafka connection ended", "remote", c.remote, "err", err)
			}
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if c.sasl.raw && !c.authenticated {
			if n < 0 || n > maxRawToken || !c.rawToken(int(n)) {
				return
			}
			continue
		}
		if n < 10 || int(n) > c.s.cfg.MaxRequestBytes {
			c.s.refused("too_large")
			c.s.logBad("kafka request refused: its size is out of bounds; closing the connection", "remote", c.remote,
				"size", n, "max_request_bytes", c.s.cfg.MaxRequestBytes)
			return
		}
		if !c.request(int(n)) {
			return
		}
	}
}

// maxRawToken bounds a bare SASL token (after a v0 handshake).
const maxRawToken = 64 << 10

// rawToken reads a bare SASL token of n bytes and answers it; false ends the
// connection.
func (c *Conn) rawToken(n int) bool {
	token := make([]byte, n)
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
	if _, err := io.ReadFull(c.nc, token); err != nil {
		return false
	}
	return c.rawSASL(token)
}

// request reads one request of n bytes and answers it; false ends the
// connection.
func (c *Conn) request(n int) bool {
	if err := c.s.mem.Acquire(c.ctx, int64(n)); err != nil {
		return false
	}
	defer c.s.mem.Release(int64(n))
	frame := make([]byte, n)
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
	if _, err := io.ReadFull(c.nc, frame); err != nil {
		c.s.refused("truncated")
		c.s.logBad("kafka request cut short; closing the connection", "remote", c.remote, "size", n, "err", err)
		return false
	}
	h, req, route, bad := c.s.decode(frame, c.authenticated)
	c.clientID = h.ClientID
	if bad != nil {
		if bad.answerVersions {
			// KIP-511: the v0 format, with the versions this broker speaks.
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ErrorCode, resp.ApiKeys = 35, c.s.apis // UNSUPPORTED_VERSION
			h.Flexible, h.Version = false, 0
			return c.write(&h, Reply{Msg: resp})
		}
		c.s.refused(bad.reason)
		c.s.logBad(bad.msg+"; closing the connection", append([]any{"remote", c.remote}, bad.args...)...)
		return false
	}
	c.s.metrics.Requests.WithLabelValues(h.Name()).Inc()
	reply := c.handle(route, req)
	if !c.write(&h, reply) || reply.Close {
		return false
	}
	if reply.Throttle > 0 {
		t := time.NewTimer(reply.Throttle)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}

// refusal is why a request is not served.
type refusal struct {
	reason string // the metric label
	msg    string
	args   []any
	// answerVersions: an ApiVersions request of a version this broker does
	// not speak, answered with the versions it does (KIP-511).
	answerVersions bool
}

// decode parses a request frame: its header, the route serving it and the
// decoded body, or why it is refused (the connection then closes). Before
// a SASL connection authenticated, only ApiVersions and the SASL requests
// pass. It never panics on any input (FuzzDecodeRequest).
func (s *Server) decode(frame []byte, authenticated bool) (Header, kmsg.Request, Route, *refusal) {
	h, body, err := parseHeader(frame)
	if err != nil {
		return h, nil, Route{}, &refusal{reason: "malformed", msg: "kafka request header malformed", args: []any{"err", err}}
	}
	route, ok := s.routes[h.Key]
	switch {
	case !ok:
		return h, nil, route, &refusal{reason: "unknown_api", msg: "kafka request for an API this broker does not serve",
			args: []any{"api_key", h.Key, "api", h.Name(), "version", h.Version, "client_id", h.ClientID}}
	case h.Version < route.Min || h.Version > route.Max:
		return h, nil, route, &refusal{reason: "unsupported_version", msg: "kafka request at a version this broker does not serve",
			args:           []any{"api", h.Name(), "version", h.Version, "min", route.Min, "max", route.Max, "client_id", h.ClientID},
			answerVersions: h.Key == apiVersionsKey}
	case !authenticated && h.Key != apiVersionsKey && h.Key != saslHandshakeKey && h.Key != saslAuthenticateKey:
		return h, nil, route, &refusal{reason: "unauthenticated", msg: "kafka request before SASL authentication", args: []any{"api", h.Name()}}
	}
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return h, nil, route, &refusal{reason: "malformed", msg: "kafka request body malformed", args: []any{"api", h.Name(), "version", h.Version, "err", err}}
	}
	return h, req, route, nil
}

// handle runs a handler, turning a panic into a closed connection and a log
// line: a bug met by one request must not take the process down.
func (c *Conn) handle(route Route, req kmsg.Request) (reply Reply) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("kafka handler panicked; closing the connection", "remote", c.remote, "api", kmsg.NameForKey(req.Key()), "panic", fmt.Sprint(r))
			reply = Reply{None: true, Close: true}
		}
	}()
	return route.Handle(c.ctx, c, req)
}

// write sends a reply; false when the connection broke.
func (c *Conn) write(h *Header, r Reply) bool {
	if r.None {
		if r.Body != nil {
			r.Body.Release()
		}
		return true
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if r.Msg != nil {
		r.Msg.SetVersion(h.Version)
		bp := bufs.Get().(*[]byte)
		defer bufs.Put(bp)
		b := append((*bp)[:0], 0, 0, 0, 0)
		b = appendResponseHeader(b, h)
		b = r.Msg.AppendTo(b)
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		*bp = b
		if _, err := c.nc.Write(b); err != nil {
			return false
		}
		return true
	}
	defer r.Body.Release()
	head := make([]byte, 4, 16)
	head = appendResponseHeader(head, h)
	binary.BigEndian.PutUint32(head, uint32(len(head)-4+r.Body.Len()))
	w := &Writer{c: c, pending: head}
	if err := r.Body.WriteBody(w); err != nil {
		c.s.log.Warn("kafka response body failed; closing the connection", "remote", c.remote, "err", err)
		return false
	}
	return w.Flush() == nil
}

// bufs are response buffers.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Writer writes a Body to its connection. The response's size and header
// are held back and go out with the body's first bytes.
type Writer struct {
	c       *Conn
	pending []byte
}

// Write writes p whole (after what is held back).
func (w *Writer) Write(p []byte) error {
	bufs := net.Buffers{w.pending, p}
	w.pending = nil
	_, err := bufs.WriteTo(w.c.nc)
	return err
}

// WriteMore is Write telling the kernel more data follows at once (a
// sendfile), so the bytes leave in one segment with it; under TLS it is
// Write.
func (w *Writer) WriteMore(p []byte) error {
	if w.c.tcp == nil {
		return w.Write(p)
	}
	b := append(w.pending, p...)
	w.pending = nil
	return zerocopy.WriteMore(w.c.tcp, b)
}

// Flush writes what is held back.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	return w.Write(nil)
}

// Stream returns the connection for writers that need an io.Writer (the
// TLS path of a file range), once what is held back went out.
func (w *Writer) Stream() io.Writer {
	_ = w.Flush()
	return w.c.nc
}

// TCP returns the plain socket, for sendfile after a WriteMore; nil under
// TLS, where bytes must go through Write.
func (w *Writer) TCP() *net.TCPConn { return w.c.tcp }
