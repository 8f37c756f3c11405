package httpapi

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// Request bodies. The server streams them (fasthttp's StreamRequestBody):
// the handler runs once the headers and at most the body's first 8 KiB are
// in, so a budget admits a body before it takes memory: produce bodies the
// in-flight budget (-max-in-flight-bytes), the other routes' bodies one of
// their own (otherBodiesFactor bodies of -max-body-bytes), so a produce
// flood cannot refuse a consumer group's heartbeat. With -require-auth the
// token is checked first: a client without one holds no budget. A body that
// does not fit is read through a small buffer and dropped, then answered
// 429, so no number of clients sending bodies at once can make the frontend
// hold more than the budgets plus each connection's buffers.

// errBodyTooLarge: a chunked body ran past -max-body-bytes while being read.
var errBodyTooLarge = errors.New("request body too large")

// bodyBufs recycles the buffers bodies are read into.
var bodyBufs sync.Pool // *[]byte

// admitBody takes the request's body into the in-flight budget and reads it:
// the bytes its Content-Length announces, or -max-body-bytes for a chunked
// body (the unused part given back once it is read), are taken before a byte
// of it is read. It answers the request itself and returns ok false when the
// body is too large (413), does not fit (429) or cannot be read (408, 400).
// release gives the bytes and the buffer back; the caller calls it once the
// handler is done with the body.
func (s *Server) admitBody(ctx *fasthttp.RequestCtx) (release func(), ok bool) {
	stream := ctx.RequestBodyStream()
	length := ctx.Request.Header.ContentLength()
	if stream == nil || length == 0 {
		return func() {}, true
	}
	max := s.cfg.MaxBodyBytes
	if length > max {
		s.refuseTooLarge(ctx)
		return nil, false
	}
	held := length
	if length < 0 { // chunked: its length shows only once read
		held = max
	}
	produces := isProduce(ctx)
	budget := s.otherBodies
	if produces {
		budget = s.bodies
	}
	if !budget.TryAcquire(held) {
		// The body is read and dropped before the answer: a connection
		// closed on an unread body is reset, and a client still sending
		// would lose the answer with it.
		discard(stream, max)
		limit := fmt.Sprintf("%d times -max-body-bytes for requests other than produce", otherBodiesFactor)
		if produces {
			limit = "-max-in-flight-bytes"
		}
		s.countProduce(ctx, fasthttp.StatusTooManyRequests)
		ctx.Response.Header.Set("Retry-After", "1")
		service.WriteCode(ctx, protocol.ThrottlingQuotaExceeded,
			fmt.Sprintf("this frontend is serving %d bytes of requests and this one (%d bytes) would pass its limit of %d (%s); nothing of it was done: retry after a pause or through another frontend",
				budget.InUse(), held, budget.Max(), limit))
		return nil, false
	}
	buf, err := readBody(stream, length, max)
	if err != nil {
		budget.Release(held)
		switch {
		case errors.Is(err, errBodyTooLarge):
			s.refuseTooLarge(ctx)
		case isTimeout(err):
			service.WriteStatus(ctx, fasthttp.StatusRequestTimeout, protocol.RequestTimedOut, "request body not read in time")
		default:
			service.WriteCode(ctx, protocol.InvalidRequest, "cannot read the request body: "+err.Error())
		}
		return nil, false
	}
	if n := len(*buf); n < held {
		budget.Release(held - n)
		held = n
	}
	ctx.Request.SetBodyRaw(*buf)
	return func() {
		budget.Release(held)
		bodyBufs.Put(buf)
	}, true
}

// readBody reads a body of length bytes (-1: chunked, at most max) from r
// into a recycled buffer.
func readBody(r io.Reader, length, max int) (*[]byte, error) {
	buf, _ := bodyBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	if length >= 0 {
		if cap(*buf) < length {
			*buf = make([]byte, length)
		}
		*buf = (*buf)[:length]
		if _, err := io.ReadFull(r, *buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > max {
			return nil, errBodyTooLarge
		}
		if errors.Is(err, io.EOF) {
			*buf = b
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// discardBufs recycles the buffers bodies are dropped through.
var discardBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// discard reads and drops a body of at most max bytes (more is left unread:
// the server then closes the connection).
func discard(r io.Reader, max int) {
	buf := discardBufs.Get().(*[]byte)
	defer discardBufs.Put(buf)
	_, _ = io.CopyBuffer(io.Discard, io.LimitReader(r, int64(max)+1), *buf)
}

// refuseTooLarge answers 413 for a body over -max-body-bytes.
func (s *Server) refuseTooLarge(ctx *fasthttp.RequestCtx) {
	s.countProduce(ctx, fasthttp.StatusRequestEntityTooLarge)
	service.WriteCode(ctx, protocol.RecordListTooLarge,
		fmt.Sprintf("request body larger than %d bytes (-max-body-bytes)", s.cfg.MaxBodyBytes))
}

// bodyBudget is the producer's in-flight budget; a server without a producer
// (tests of other routes) gets one of unbounded size.
func bodyBudget(p *produce.Producer) *produce.Budget {
	if p == nil {
		return produce.NewBudget(math.MaxInt64, nil)
	}
	return p.Budget()
}

// otherBodiesFactor sizes the budget of the routes other than produce: room
// for this many bodies of -max-body-bytes at once.
const otherBodiesFactor = 4

// isProduce reports whether the request is a produce (POST
// /v1/topics/{topic}/records).
func isProduce(ctx *fasthttp.RequestCtx) bool {
	return strings.HasSuffix(string(ctx.Path()), suffixRecords) && string(ctx.Method()) == fasthttp.MethodPost
}

// countProduce counts a produce request answered before its handler ran.
func (s *Server) countProduce(ctx *fasthttp.RequestCtx, status int) {
	if s.producer != nil && isProduce(ctx) {
		s.producer.Metrics().Requests.WithLabelValues(strconv.Itoa(status)).Inc()
	}
}
