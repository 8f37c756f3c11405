package server

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/zerocopy"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// conn serves one client connection.
type conn struct {
	s      *Server
	nc     net.Conn        // the connection (a *tls.Conn under TLS)
	tcp    *net.TCPConn    // the socket, for sendfile; nil under TLS
	ctx    context.Context // ends when the connection closes
	cancel context.CancelFunc
	sem    chan struct{}  // one token per request in flight
	wg     sync.WaitGroup // request goroutines (fetch, acks=all waits)

	wmu sync.Mutex // serialises response frames on the socket; guards enc
	enc *protocol.Encoder

	peerOnce sync.Once // sets peer and host
	peer     string    // the client certificate's common name (peerName)
	host     string    // the client's address without its port, as ACLs name hosts
}

func newConn(s *Server, nc net.Conn, tcp *net.TCPConn) *conn {
	if nc != net.Conn(tcp) {
		tcp = nil // TLS: bytes must go through the TLS layer
	}
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{s: s, nc: nc, tcp: tcp, ctx: ctx, cancel: cancel, sem: make(chan struct{}, s.cfg.MaxInFlight), enc: protocol.NewEncoder()}
	// Closing the socket when the context ends unblocks the reader even for a
	// connection accepted while the server was stopping.
	context.AfterFunc(ctx, func() { _ = nc.Close() })
	return c
}

// apiLabel bounds the metric label values: clients choose API keys.
func apiLabel(k protocol.APIKey) string {
	switch k {
	case protocol.APIProduce, protocol.APIFetch, protocol.APIListOffsets, protocol.APIOffsetForLeaderEpoch, protocol.APIDescribeReplicas,
		protocol.APIDeleteRecords, protocol.APIWriteTxnMarker, protocol.APIWriteTxnMarkers, protocol.APIDescribeProducers:
		return k.String()
	}
	return "unknown"
}

func (c *conn) close() {
	c.cancel()
	_ = c.nc.Close()
}

// serve reads requests until the connection ends, then waits for the request
// goroutines it started.
func (c *conn) serve() {
	defer func() {
		c.close()
		c.wg.Wait()
	}()
	fr := protocol.NewFrameReader(c.nc, c.s.cfg.MaxFrameBytes)
	dec := protocol.NewDecoder()
	for {
		frame, err := fr.Next()
		if err != nil {
			if errors.Is(err, protocol.ErrFrameTooLarge) {
				c.writeError(0, protocol.MessageTooLarge, err.Error())
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
				c.s.log.Debug("connection read failed", "remote", c.nc.RemoteAddr().String(), "err", err)
			}
			return
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		var h protocol.RequestHeader
		if err := dec.Request(frame, &h); err != nil {
			c.writeError(0, protocol.MalformedFrame, err.Error())
			return
		}
		c.s.metrics.Requests.WithLabelValues(apiLabel(h.APIKey)).Inc()
		switch h.APIKey {
		case protocol.APIProduce:
			c.produce(&h, dec)
		case protocol.APIFetch:
			c.fetch(&h, dec)
		case protocol.APIListOffsets:
			c.listOffsets(&h, dec)
		case protocol.APIOffsetForLeaderEpoch:
			c.offsetForLeaderEpoch(&h, dec)
		case protocol.APIDescribeReplicas:
			c.describeReplicas(&h, dec)
		case protocol.APIDeleteRecords:
			c.deleteRecords(&h, dec)
		case protocol.APIWriteTxnMarker:
			c.writeTxnMarker(&h, dec)
		case protocol.APIWriteTxnMarkers:
			c.writeTxnMarkers(&h, dec)
		case protocol.APIDescribeProducers:
			c.describeProducers(&h, dec)
		default:
			c.respondErr(&h, protocol.UnknownAPI.Err("api key %d", h.APIKey))
		}
	}
}

// release returns a request's in-flight token.
func (c *conn) release() { <-c.sem }

// goRequest runs the rest of a request in a goroutine owned by the connection.
func (c *conn) goRequest(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// respond writes a response with an optional in-memory payload and releases the
// request's token.
func (c *conn) respond(h *protocol.RequestHeader, body protocol.Body, payload []byte) {
	defer c.release()
	rh := protocol.ResponseHeader{CorrelationID: h.CorrelationID}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	prefix, err := c.enc.Response(&rh, body, len(payload))
	if err != nil {
		c.s.log.Error("encoding response failed", "api", h.APIKey.String(), "err", err)
		c.close()
		return
	}
	c.write(prefix, payload)
}

// respondErr writes an error response for a request and releases its token.
func (c *conn) respondErr(h *protocol.RequestHeader, err error) {
	defer c.release()
	code := CodeFor(err)
	c.s.metrics.Errors.WithLabelValues(apiLabel(h.APIKey), code.String()).Inc()
	c.writeError(h.CorrelationID, code, err.Error())
}

func (c *conn) writeError(corrID uint32, code protocol.Code, msg string) {
	rh := protocol.ResponseHeader{CorrelationID: corrID, ErrorCode: code, ErrorMessage: msg}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	prefix, err := c.enc.Response(&rh, nil, 0)
	if err == nil {
		c.write(prefix, nil)
	}
}

// refuse answers a connection that is not served with a connection-level
// error (correlation id 0) and closes it.
func (c *conn) refuse(code protocol.Code, msg string) {
	c.writeError(0, code, msg)
	c.close()
}

// write sends one frame; the caller holds wmu. A failed write closes the
// connection, since a partial frame cannot be taken back.
func (c *conn) write(prefix, payload []byte) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	bufs := net.Buffers{prefix}
	if len(payload) > 0 {
		bufs = append(bufs, payload)
	}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		c.close()
	}
}

// respondSlice writes a fetch response whose payload is a range of a segment
// file: the header first, straight to the socket, then sendfile.
func (c *conn) respondSlice(h *protocol.RequestHeader, body protocol.Body, sl seglog.Slice, topic, reader string) {
	defer c.release()
	defer sl.Release()
	rh := protocol.ResponseHeader{CorrelationID: h.CorrelationID}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	prefix, err := c.enc.Response(&rh, body, int(sl.Size()))
	if err != nil {
		c.close()
		return
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if sl.Size() == 0 {
		if _, err := c.nc.Write(prefix); err != nil {
			c.close()
		}
		return
	}
	if c.tcp == nil { // TLS: copy the range through the TLS layer
		if err := zerocopy.CopyRange(c.nc, prefix, sl.File(), sl.Pos(), sl.Size()); err != nil {
			c.s.log.Warn("sending fetched records failed; closing connection", "remote", c.nc.RemoteAddr().String(), "err", err)
			c.close()
			return
		}
	} else {
		if err := zerocopy.WriteMore(c.tcp, prefix); err != nil {
			c.close()
			return
		}
		if err := zerocopy.SendFile(c.tcp, sl.File(), sl.Pos(), sl.Size()); err != nil {
			c.s.log.Warn("sendfile failed; closing connection", "remote", c.nc.RemoteAddr().String(), "err", err)
			c.close()
			return
		}
	}
	c.s.metrics.BytesOut.WithLabelValues(topic, reader).Add(float64(sl.Size()))
	c.s.metrics.Fetched.WithLabelValues(topic, reader).Inc()
}
