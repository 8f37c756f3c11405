// Package storageclient is the client side of the storage protocol: a connection
// that pipelines many requests (matched to responses by correlation id) and a
// pool of connections keyed by node address. Frontends, followers, the SDK and
// sluicectl use it to talk to storage nodes.
//
// Invariants: requests written on one Conn reach the server in the order Call
// was entered (writes are serialised), so two produce requests for the same
// partition sent one after the other on one Conn are appended in that order;
// every Call returns, with a response or an error, once the connection fails
// or the context ends.
package storageclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
)

// ErrClosed is returned by calls on a closed or failed connection; it wraps as
// a NETWORK_EXCEPTION so callers treat it as retriable.
var ErrClosed = &protocol.Error{Code: protocol.NetworkException, Message: "connection closed"}

// Result is a response's header and its raw payload.
type Result struct {
	Header  protocol.ResponseHeader
	Payload []byte

	buf *[]byte // the pooled frame buffer Payload aliases, or nil
}

// Release hands the payload's buffer back to the connection's pool; Payload
// must not be used afterwards. Calling it is optional (an unreleased buffer is
// garbage collected) but saves an allocation per response on hot paths such
// as consumers and followers.
func (r *Result) Release() {
	if r.buf != nil {
		putBuf(r.buf)
		r.buf, r.Payload = nil, nil
	}
}

// bufPool holds frame buffers handed out to callers with large payloads.
var bufPool sync.Pool

func getBuf(n int) []byte {
	if p, ok := bufPool.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]byte, n, protocol.GrowCap(n))
}

func putBuf(p *[]byte) { bufPool.Put(p) }

type pending struct {
	resp protocol.Body
	done chan struct{}
	res  Result
	err  error
}

// Conn is one client connection to a storage node. It is safe for concurrent use.
type Conn struct {
	nc       net.Conn
	clientID string

	wmu    sync.Mutex // serialises writes and guards enc and nextID
	enc    *protocol.Encoder
	nextID uint32

	mu      sync.Mutex          // guards pending and err
	pending map[uint32]*pending // in-flight calls by correlation id
	err     error               // set once the connection failed

	done chan struct{} // closed when the reader goroutine exits
}

// Dial connects to a storage node.
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	return DialTLS(ctx, addr, clientID, nil)
}

// DialTLS connects to a storage node over TLS with cfg (plain TCP when cfg
// is nil). The server name is the address's host unless cfg sets one.
func DialTLS(ctx context.Context, addr, clientID string, cfg *tls.Config) (*Conn, error) {
	var d net.Dialer
	var nc net.Conn
	var err error
	if cfg != nil {
		nc, err = (&tls.Dialer{NetDialer: &d, Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, &protocol.Error{Code: protocol.NetworkException, Message: fmt.Sprintf("dial %s: %v", addr, err)}
	}
	tcp := nc
	if tc, ok := nc.(*tls.Conn); ok {
		tcp = tc.NetConn()
	}
	if tc, ok := tcp.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &Conn{nc: nc, clientID: clientID, enc: protocol.NewEncoder(), pending: map[uint32]*pending{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// Addr returns the remote address.
func (c *Conn) Addr() string { return c.nc.RemoteAddr().String() }

// Call sends a request with an optional raw payload and waits for its response,
// decoding the body into resp (which may be nil). A response with an error code
// is returned as a *protocol.Error together with the Result.
func (c *Conn) Call(ctx context.Context, key protocol.APIKey, req protocol.Body, payload []byte, resp protocol.Body) (Result, error) {
	p := &pending{resp: resp, done: make(chan struct{})}
	id, err := c.send(key, req, payload, p)
	if err != nil {
		return Result{}, err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return p.res, p.err
		}
		return p.res, p.res.Header.Err()
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if !waiting {
			// The reader already took the call and is decoding into resp:
			// wait for it, so resp is not written after Call returns.
			<-p.done
			p.res.Release()
		} else if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// No answer in time: the peer or the path to it may be gone
			// without a reset (a cut link leaves TCP retransmitting for
			// minutes). Drop the connection so the next call redials, as
			// Kafka clients do on request.timeout.ms.
			c.fail(fmt.Errorf("no response within the request deadline"))
		}
		return Result{}, &protocol.Error{Code: protocol.RequestTimedOut, Message: ctx.Err().Error()}
	}
}

func (c *Conn) send(key protocol.APIKey, req protocol.Body, payload []byte, p *pending) (uint32, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nextID++
	if c.nextID == 0 {
		c.nextID++ // 0 is the connection-level error's
	}
	id := c.nextID
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.pending[id] = p
	c.mu.Unlock()
	h := protocol.RequestHeader{APIKey: key, Version: 0, CorrelationID: id, ClientID: c.clientID}
	prefix, err := c.enc.Request(&h, req, len(payload))
	if err == nil {
		_ = c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		bufs := net.Buffers{prefix}
		if len(payload) > 0 {
			bufs = append(bufs, payload)
		}
		_, err = bufs.WriteTo(c.nc)
	}
	if err != nil {
		c.fail(fmt.Errorf("write: %w", err))
		return 0, c.Err()
	}
	return id, nil
}

// Err returns the error that broke the connection, or nil while it works.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; in-flight calls fail with ErrClosed.
func (c *Conn) Close() error {
	c.fail(nil)
	<-c.done
	return nil
}

// fail marks the connection broken, closes the socket and fails every pending call.
func (c *Conn) fail(cause error) {
	c.mu.Lock()
	if c.err == nil {
		var pe *protocol.Error
		switch {
		case cause == nil:
			c.err = ErrClosed
		case errors.As(cause, &pe):
			c.err = pe
		default:
			c.err = &protocol.Error{Code: protocol.NetworkException, Message: cause.Error()}
		}
	}
	err := c.err
	ps := c.pending
	c.pending = map[uint32]*pending{}
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, p := range ps {
		p.err = err
		close(p.done)
	}
}

func (c *Conn) readLoop() {
	defer close(c.done)
	fr := protocol.NewFrameReader(c.nc, 0)
	fr.Alloc = getBuf
	dec := protocol.NewDecoder()
	for {
		frame, err := fr.Next()
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		var h protocol.ResponseHeader
		if err := dec.Response(frame, &h); err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		p := c.pending[h.CorrelationID]
		delete(c.pending, h.CorrelationID)
		c.mu.Unlock()
		if p == nil {
			if h.CorrelationID == 0 && h.ErrorCode != protocol.None {
				// A connection-level error (a refused connection, a frame the
				// server could not read): it closes the connection, and the
				// calls in flight fail with its reason.
				c.fail(&protocol.Error{Code: h.ErrorCode, Message: "the server closed the connection: " + h.ErrorMessage})
				return
			}
			continue // the caller gave up; drop the response
		}
		if p.resp != nil && h.ErrorCode == protocol.None {
			p.err = dec.Body(p.resp)
		} else if err := dec.Body(nopBody{}); err != nil {
			p.err = err
		}
		p.res = Result{Header: h, Payload: dec.Payload()}
		if len(p.res.Payload) > 0 {
			buf := frame[:cap(frame)]
			p.res.buf = &buf
			fr.Detach() // the caller keeps the frame buffer until Release
		}
		close(p.done)
	}
}

// nopBody skips a body the caller did not ask to decode.
type nopBody struct{}

func (nopBody) EncodeMsgpack(e *msgpackEncoder) error { return nil }
func (nopBody) DecodeMsgpack(d *msgpackDecoder) error { return protocol.SkipValues(d, 1) }

// IsRetriable reports whether err is worth retrying (after a metadata refresh).
func IsRetriable(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code.Retriable()
	}
	return false
}
