package httpapi

import (
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// headerClientID names the client for quotas (Kafka's client.id); requests
// without it count against the default quota.
const headerClientID = "X-Client-Id"

// clientIDOf returns the request's client id, cut to the longest a quota
// can name.
func clientIDOf(ctx *fasthttp.RequestCtx) string {
	id := ctx.Request.Header.Peek(headerClientID)
	if len(id) > cluster.MaxClientIDLen {
		id = id[:cluster.MaxClientIDLen]
	}
	return string(id)
}

// admitQuota charges n bytes of kind ("produce" or "fetch") to the request's
// client at rate bytes per second and reports whether the request may go on.
// A client already over its quota is answered 429 THROTTLING_QUOTA_EXCEEDED
// with Retry-After, and nothing of its request is served.
func (s *Server) admitQuota(ctx *fasthttp.RequestCtx, kind string, rate int64, n int) bool {
	if rate <= 0 {
		return true
	}
	client := clientIDOf(ctx)
	if wait := s.quotas.Admit(quotaKey(kind, client), rate); wait > 0 {
		s.producer.Metrics().QuotaThrottled.WithLabelValues(kind).Inc()
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		writeError(ctx, fasthttp.StatusTooManyRequests, protocol.ThrottlingQuotaExceeded,
			fmt.Sprintf("client %q is over its %s quota of %d bytes/s on this frontend; nothing of this request was served: retry in %dms",
				client, kind, rate, wait.Milliseconds()))
		return false
	}
	s.quotas.Charge(quotaKey(kind, client), rate, n)
	return true
}

// chargeQuota counts n more bytes of kind against the request's client, for
// a request whose size is known only once served (a fetch).
func (s *Server) chargeQuota(ctx *fasthttp.RequestCtx, kind string, rate int64, n int) {
	s.quotas.Charge(quotaKey(kind, clientIDOf(ctx)), rate, n)
}

// quotaKey keeps a client's produce and fetch buckets apart.
func quotaKey(kind, client string) string { return kind + "\x00" + client }
