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
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/server/zerocopy"
)

// Conn is one client connection. Its requests are read and handled one at a
// time on the connection's goroutine, so the fields below need no lock but
// where noted; a handler may finish its answer on another goroutine
// (Reply.Async), and answers are written in request order.
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

	// Answers finished on other goroutines (Reply.Async) wait in slots for
	// the writer, in request order; queued counts those not written yet,
	// and the read loop writes an answer itself only when none is.
	slots     chan *slot
	queued    atomic.Int64
	muteUntil atomic.Int64   // unix nanos: a throttled answer mutes reading until then
	work      sync.WaitGroup // the writer and the async parts of answers

	localsMu sync.Mutex // guards locals
	locals   map[any]any
}

// slot is an answer in the connection's queue.
type slot struct {
	h       Header
	reply   Reply
	done    chan struct{} // closed once reply is final
	release func()        // frees the request's frame and budget once answered
}

// maxQueued bounds the answers a connection has pending (read but not
// written): past it the connection reads nothing more until one is written.
const maxQueued = 8

// Local returns the connection's value for key, made by create on first
// use; it lives as long as the connection. Safe for concurrent use.
func (c *Conn) Local(key any, create func() any) any {
	c.localsMu.Lock()
	defer c.localsMu.Unlock()
	if c.locals == nil {
		c.locals = map[any]any{}
	}
	v, ok := c.locals[key]
	if !ok {
		v = create()
		c.locals[key] = v
	}
	return v
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

// Context ends when the connection closes or the server stops: the async
// part of an answer (Reply.Async) runs under it.
func (c *Conn) Context() context.Context { return c.ctx }

// ClientID is the client id of the request being served.
func (c *Conn) ClientID() string { return c.clientID }

// Remote is the client's address.
func (c *Conn) Remote() string { return c.remote }

// Host is the client's address without its port, as ACLs name hosts.
func (c *Conn) Host() string {
	if host, _, err := net.SplitHostPort(c.remote); err == nil {
		return host
	}
	return c.remote
}

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

// serve reads and answers requests until the connection ends, then waits
// for the writer and the async parts of answers.
func (c *Conn) serve() {
	defer func() {
		c.close()
		c.work.Wait()
	}()
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
		if !c.rest() {
			return
		}
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
	// The frame is reused once the request is answered: handlers use the
	// bytes it holds (produce records, SASL tokens) until their answer is
	// final, async part included.
	fp := getFrame(n)
	release := func() {
		putFrame(fp)
		c.s.mem.Release(int64(n))
	}
	frame := (*fp)[:n]
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
	if _, err := io.ReadFull(c.nc, frame); err != nil {
		release()
		c.s.refused("truncated")
		c.s.logBad("kafka request cut short; closing the connection", "remote", c.remote, "size", n, "err", err)
		return false
	}
	h, req, route, bad := c.s.decode(frame, c.authenticated)
	c.clientID = h.ClientID
	var reply Reply
	switch {
	case bad != nil && bad.answerVersions:
		// KIP-511: the v0 format, with the versions this broker speaks.
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ErrorCode, resp.ApiKeys = 35, c.s.apis // UNSUPPORTED_VERSION
		h.Flexible, h.Version = false, 0
		reply = Reply{Msg: resp}
	case bad != nil:
		release()
		c.s.refused(bad.reason)
		c.s.logBad(bad.msg+"; closing the connection", append([]any{"remote", c.remote}, bad.args...)...)
		return false
	default:
		c.s.metrics.Requests.WithLabelValues(h.Name()).Inc()
		c.s.metrics.RequestBytes.WithLabelValues(h.Name()).Add(float64(n))
		reply = c.guard(h, func() Reply { return route.Handle(c.ctx, c, req) })
	}
	if reply.Async == nil && c.queued.Load() == 0 {
		ok := c.write(&h, reply) && !reply.Close
		release()
		c.mute(reply.Throttle)
		return ok
	}
	return c.enqueue(&slot{h: h, reply: reply, done: make(chan struct{}), release: release})
}

// enqueue queues an answer for the writer, starting its async part; false
// when the connection ended meanwhile.
func (c *Conn) enqueue(s *slot) bool {
	if c.slots == nil {
		c.slots = make(chan *slot, maxQueued)
		c.work.Add(1)
		go c.writer()
	}
	if async := s.reply.Async; async != nil {
		c.work.Add(1)
		go func() {
			defer c.work.Done()
			defer close(s.done)
			s.reply = c.guard(s.h, async)
		}()
	} else {
		close(s.done)
	}
	c.queued.Add(1)
	select {
	case c.slots <- s:
		return true
	case <-c.ctx.Done():
		<-s.done
		s.discard()
		return false
	}
}

// writer writes the queued answers in request order until the connection
// ends; then it frees what is left.
func (c *Conn) writer() {
	defer c.work.Done()
	for {
		select {
		case s := <-c.slots:
			select {
			case <-s.done:
			case <-c.ctx.Done():
				<-s.done
				s.discard()
				continue
			}
			ok := c.write(&s.h, s.reply) && !s.reply.Close
			s.release()
			c.mute(s.reply.Throttle)
			c.queued.Add(-1)
			if !ok {
				c.close()
			}
		case <-c.ctx.Done():
			for {
				select {
				case s := <-c.slots:
					<-s.done
					s.discard()
				default:
					return
				}
			}
		}
	}
}

// discard frees an answer that will not be written.
func (s *slot) discard() {
	if s.reply.Body != nil {
		s.reply.Body.Release()
	}
	s.release()
}

// mute keeps the connection from reading for d after a throttled answer
// (KIP-219).
func (c *Conn) mute(d time.Duration) {
	if d > 0 {
		c.muteUntil.Store(time.Now().Add(d).UnixNano())
	}
}

// rest waits out a mute before the next request is read; false when the
// connection ended meanwhile.
func (c *Conn) rest() bool {
	wait := time.Until(time.Unix(0, c.muteUntil.Load()))
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// guard runs a handler or the async part of its answer, turning a panic
// into a closed connection and a log line: a bug met by one request must
// not take the process down.
func (c *Conn) guard(h Header, answer func() Reply) (reply Reply) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("kafka handler panicked; closing the connection", "remote", c.remote, "api", h.Name(), "panic", fmt.Sprint(r))
			reply = Reply{None: true, Close: true}
		}
	}()
	return answer()
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

// frames are request buffers by size class: class k holds buffers of
// minFrame<<k bytes. A produce request of a megabyte allocated and zeroed for
// each request cost the frontend a fifth of its CPU.
var frames [22]sync.Pool

const minFrame = 4 << 10

// frameClass returns the class whose buffers hold n bytes.
func frameClass(n int) int {
	k := 0
	for size := minFrame; size < n; size <<= 1 {
		k++
	}
	return k
}

// getFrame returns a buffer of at least n bytes.
func getFrame(n int) *[]byte {
	k := frameClass(n)
	if k >= len(frames) {
		b := make([]byte, n)
		return &b
	}
	if b, ok := frames[k].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, minFrame<<k)
	return &b
}

// putFrame hands a buffer of getFrame back.
func putFrame(b *[]byte) {
	if k := frameClass(cap(*b)); k < len(frames) && minFrame<<k == cap(*b) {
		frames[k].Put(b)
	}
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
