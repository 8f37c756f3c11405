package httpapi

import (
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
)

// headerClientID names the client for quotas (Kafka's client.id); requests
// without it count against the default quota.
const headerClientID = "X-Client-Id"

// clientIDOf returns the request's client id, cut to the longest a quota
// can name.
func clientIDOf(ctx *fasthttp.RequestCtx) string {
	id := ctx.Request.Header.Peek(headerClientID)
	return cluster.QuotaClientID(string(id))
}

// Quota kinds: the metric label and half of a bucket's key.
const (
	quotaProduce = "produce"
	quotaFetch   = "fetch"
)

// clientQuota is a request's byte-rate budget: its client's bucket and rate
// (0: no quota).
type clientQuota struct {
	key  string
	rate int64
}

// admitQuota looks up the quota of kind of the request's client, charges it
// n bytes and reports whether the request may go on; the quota is returned
// for charging what the request turns out to cost (a fetch). A client
// already over its quota is answered 429 THROTTLING_QUOTA_EXCEEDED with
// Retry-After, and nothing of its request is served.
func (s *Server) admitQuota(ctx *fasthttp.RequestCtx, kind string, n int) (clientQuota, bool) {
	client := clientIDOf(ctx)
	q := s.cache.Quota(client)
	rate := q.ProduceBytesPerSec
	if kind == quotaFetch {
		rate = q.FetchBytesPerSec
	}
	if rate <= 0 {
		return clientQuota{}, true
	}
	cq := clientQuota{key: kind + "\x00" + client, rate: rate} // a client's produce and fetch buckets apart
	if wait := s.quotas.Admit(cq.key, rate); wait > 0 {
		s.producer.Metrics().QuotaThrottled.WithLabelValues(kind).Inc()
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		service.WriteCode(ctx, protocol.ThrottlingQuotaExceeded,
			fmt.Sprintf("client %q is over its %s quota of %d bytes/s on this frontend; nothing of this request was served: retry in %dms",
				client, kind, rate, wait.Milliseconds()))
		return cq, false
	}
	s.quotas.Charge(cq.key, rate, n)
	return cq, true
}

// chargeQuota counts n more bytes against a quota admitQuota returned.
func (s *Server) chargeQuota(q clientQuota, n int) { s.quotas.Charge(q.key, q.rate, n) }
