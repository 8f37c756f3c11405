package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestQuotas: a client id over its produce or fetch quota gets 429
// THROTTLING_QUOTA_EXCEEDED with Retry-After and nothing of its request is
// served; other client ids, and clients without one (no default quota
// here), are not slowed.
func TestQuotas(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	e.md.Update(func(s *cluster.Snapshot) {
		s.Quotas = []cluster.Quota{{ClientID: "tiny", ProduceBytesPerSec: 1000, FetchBytesPerSec: 100}}
	})
	testkit.WaitFor(t, 5*time.Second, "the quota in the frontend's metadata", func() bool { return e.srv.cache.Quota("tiny").ProduceBytesPerSec == 1000 })
	body := []byte(`{"records":[{"value":"` + strings.Repeat("x", 3000) + `"}]}`)
	produceAs := func(client string) reply {
		return e.do(t, http.MethodPost, "/v1/topics/t/records", "application/json", body, "X-Client-Id", client)
	}
	if r := produceAs("tiny"); r.status != http.StatusOK {
		t.Fatalf("first produce within the burst: %d %s", r.status, r.body)
	}
	r := produceAs("tiny")
	var eb cluster.ErrorBody
	r.json(t, &eb)
	if r.status != http.StatusTooManyRequests || eb.ErrorCode != int16(protocol.ThrottlingQuotaExceeded) || !strings.Contains(eb.Error, `"tiny"`) {
		t.Fatalf("second produce: %d %s", r.status, r.body)
	}
	if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 || secs > 3 {
		t.Fatalf("Retry-After %q after 2 KB over a 1 KB/s quota", r.header.Get("Retry-After"))
	}
	for _, other := range []string{"other", ""} {
		if r := produceAs(other); r.status != http.StatusOK {
			t.Fatalf("client %q: %d %s", other, r.status, r.body)
		}
	}
	m := e.producer.Metrics()
	if got := testutil.ToFloat64(m.QuotaThrottled.WithLabelValues("produce")); got != 1 {
		t.Fatalf("throttled produce requests: %v", got)
	}
	// Only the accepted records were stored: three of four requests.
	fetchAs := func(client string) reply {
		return e.do(t, http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=0", "", nil, "X-Client-Id", client)
	}
	var got struct {
		Records []struct{ Offset int64 } `json:"records"`
	}
	r = fetchAs("tiny")
	r.json(t, &got)
	if r.status != http.StatusOK || len(got.Records) != 3 {
		t.Fatalf("first fetch: %d, %d records: %.200s", r.status, len(got.Records), r.body)
	}
	if r := fetchAs("tiny"); r.status != http.StatusTooManyRequests {
		t.Fatalf("fetch over the quota: %d %.200s", r.status, r.body)
	}
	if r := fetchAs("other"); r.status != http.StatusOK {
		t.Fatalf("another client's fetch: %d", r.status)
	}
	if got := testutil.ToFloat64(m.QuotaThrottled.WithLabelValues("fetch")); got != 1 {
		t.Fatalf("throttled fetches: %v", got)
	}
}
