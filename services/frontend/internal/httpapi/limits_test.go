package httpapi

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/protocol"
)

// holdPartition makes node's produce requests wait until the returned
// function is called (deferred by the caller, so the fake can close).
func holdPartition(e *env, node int) (release func()) {
	hold := make(chan struct{})
	e.nodes[node].SetReject(func(*protocol.ProduceRequest, int) error { <-hold; return nil })
	var once bool
	return func() {
		if !once {
			once = true
			close(hold)
		}
	}
}

// holdOneProduce posts body to topic "t" (partition 0 on node 0) and holds
// it in flight, its bytes in the budget, until release; its answer comes on
// the channel.
func holdOneProduce(t *testing.T, e *env, body string) (<-chan reply, func()) {
	t.Helper()
	release := holdPartition(e, 0)
	t.Cleanup(release) // also when the wait below fails
	first := make(chan reply, 1)
	go func() { first <- e.produceJSON(t, "t", "", body) }()
	m := e.producer.Metrics()
	testkit.WaitFor(t, 5*time.Second, "a produce request in flight", func() bool { return testutil.ToFloat64(m.InFlightBytes) == float64(len(body)) })
	return first, release
}

func TestProduceThrottledWhenInFlightBytesFull(t *testing.T) {
	body := `{"records":[{"value":"` + strings.Repeat("x", 40) + `"}]}`
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.MaxInFlightBytes = int64(len(body)) + 10 }})
	e.md.AddTopic("t", 1)
	first, release := holdOneProduce(t, e, body)
	defer release()
	m := e.producer.Metrics()

	r := e.do(t, http.MethodPost, "/v1/topics/t/records", "application/json", []byte(body), "X-Request-Id", "throttled-1")
	eb := r.errBody(t)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" || r.header.Get("X-Request-Id") != "throttled-1" ||
		eb.ErrorCode != int16(protocol.ThrottlingQuotaExceeded) || !strings.Contains(eb.Error, "-max-in-flight-bytes") {
		t.Fatalf("second request: %d %v %s", r.status, r.header, r.body)
	}
	// Batches bodies share the budget.
	b := frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{{Batch: sdkBatch(t, -1, 0, "v")}})
	if r := e.do(t, http.MethodPost, "/v1/topics/t/records", frontendapi.ContentTypeBatches, b); r.status != http.StatusTooManyRequests {
		t.Fatalf("batches body: %d %s", r.status, r.body)
	}
	if n := testutil.ToFloat64(m.Throttled); n != 2 || testutil.ToFloat64(m.Requests.WithLabelValues("429")) != 2 {
		t.Fatalf("throttled counted %v", n)
	}
	release()
	if r := <-first; r.status != http.StatusOK {
		t.Fatalf("first request: %d %s", r.status, r.body)
	}
	if a := e.nodes[0].Appended("t", 0); len(a) != 1 {
		t.Fatalf("%d batches appended, want only the admitted request's", len(a))
	}
	testkit.WaitFor(t, 5*time.Second, "the budget back to empty", func() bool { return testutil.ToFloat64(m.InFlightBytes) == 0 })
	if r := e.produceJSON(t, "t", "", body); r.status != http.StatusOK {
		t.Fatalf("after the burst: %d %s", r.status, r.body)
	}
}

func TestProduceTimeoutAnswers504WithWhatIsKnown(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2, produce: func(c *produceConfig) { c.Timeout = 300 * time.Millisecond }})
	e.md.AddTopic("t", 1, 2) // partition 1 on node 2, which stalls
	release := holdPartition(e, 1)
	defer release()
	start := time.Now()
	r := e.produceJSON(t, "t", "", `{"records":[{"value":"a","partition":0},{"value":"b","partition":1},{"value":"c","partition":0}]}`)
	if r.status != http.StatusGatewayTimeout || time.Since(start) > 3*time.Second {
		t.Fatalf("status %d after %v: %s", r.status, time.Since(start), r.body)
	}
	var got struct {
		ErrorCode int16  `json:"error_code"`
		Error     string `json:"error"`
		offsets
	}
	r.json(t, &got)
	o := got.Offsets
	if got.ErrorCode != int16(protocol.RequestTimedOut) || !strings.Contains(got.Error, "-produce-timeout") || len(o) != 3 {
		t.Fatalf("answer %s", r.body)
	}
	if o[0].Offset == nil || *o[0].Offset != 0 || o[2].Offset == nil || *o[2].Offset != 1 {
		t.Fatalf("acknowledged records lost their offsets: %s", r.body)
	}
	if o[1].Offset != nil || o[1].ErrorCode != int16(protocol.RequestTimedOut) || !strings.Contains(o[1].Error, "outcome unknown") {
		t.Fatalf("stalled record: %s", r.body)
	}

	b := frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{
		{Partition: 1, Batch: sdkBatch(t, -1, 0, "stalls")}, {Partition: 0, Batch: sdkBatch(t, -1, 0, "ok")}, {Partition: 1, Batch: sdkBatch(t, -1, 0, "queued")},
	})
	r = e.do(t, http.MethodPost, "/v1/topics/t/records", frontendapi.ContentTypeBatches, b)
	var ba batchesAnswer
	r.json(t, &ba)
	res := ba.Results
	if r.status != http.StatusGatewayTimeout || ba.ErrorCode != int16(protocol.RequestTimedOut) || len(res) != 3 ||
		res[1].ErrorCode != 0 || res[1].BaseOffset != 2 || !strings.Contains(res[0].Error, "outcome unknown") || !strings.Contains(res[2].Error, "not sent") {
		t.Fatalf("batches: %d %s", r.status, r.body)
	}
}

// TestConnectionsPerIPLimit: with -max-connections-per-ip 1, a second
// connection from the same address is answered 429 and closed while the
// first stays open; once the first closes, a new one is served.
func TestConnectionsPerIPLimit(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, http: func(c *Config) { c.MaxConnsPerIP = 1 }})
	first, err := net.Dial("tcp", e.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	get := func(c net.Conn) (int, string) {
		t.Helper()
		if _, err := c.Write([]byte("GET /v1/topics/none/partitions/x/records HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		return readAnswer(t, c)
	}
	if status, _ := get(first); status == http.StatusTooManyRequests {
		t.Fatal("the first connection was refused")
	}
	second, err := net.Dial("tcp", e.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if status, body := get(second); status != http.StatusTooManyRequests || !strings.Contains(body, "MaxConnsPerIP") {
		t.Fatalf("second connection: %d %q; want 429", status, body)
	}
	first.Close()
	testkit.WaitFor(t, 5*time.Second, "room for a new connection", func() bool {
		c, err := net.Dial("tcp", e.srv.Addr())
		if err != nil {
			return false
		}
		defer c.Close()
		status, _ := get(c)
		return status != http.StatusTooManyRequests
	})
}

// TestBodiesAreAdmittedBeforeTheyAreRead: the in-flight budget takes a body's
// announced length before the body is read (fasthttp reads ahead only its
// first 8 KiB). With room for two bodies, two clients that sent only their
// bodies' first 8 KiB hold the budget, a third is answered 429 (its body
// dropped as it comes), and the two are served once their bodies come.
func TestBodiesAreAdmittedBeforeTheyAreRead(t *testing.T) {
	const sent = 8 << 10
	body := `{"records":[{"value":"` + strings.Repeat("x", 40000) + `"}]}`
	e := newEnv(t, envOptions{nodes: 1,
		http:    func(c *Config) { c.MaxBodyBytes = len(body) },
		produce: func(c *produceConfig) { c.MaxInFlightBytes = int64(2 * len(body)) }})
	e.md.AddTopic("t", 1)
	headers := fmt.Sprintf("POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", e.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte(headers + body[:sent])); err != nil {
			t.Fatal(err)
		}
		return c
	}
	waiting := []net.Conn{dial(), dial()}
	m := e.producer.Metrics()
	testkit.WaitFor(t, 5*time.Second, "both bodies admitted before they were sent", func() bool { return testutil.ToFloat64(m.InFlightBytes) == float64(2*len(body)) })
	third := dial()
	if _, err := third.Write([]byte(body[sent:])); err != nil {
		t.Fatal(err)
	}
	if status, text := readAnswer(t, third); status != http.StatusTooManyRequests || !strings.Contains(text, "-max-in-flight-bytes") {
		t.Fatalf("third request: %d %s; want 429", status, text)
	}
	for _, c := range waiting {
		if _, err := c.Write([]byte(body[sent:])); err != nil {
			t.Fatal(err)
		}
		if status, text := readAnswer(t, c); status != http.StatusOK {
			t.Fatalf("admitted request: %d %s", status, text)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the budget back to empty", func() bool { return testutil.ToFloat64(m.InFlightBytes) == 0 })
}

// TestChunkedBodies: a chunked body (no Content-Length) is read up to
// -max-body-bytes and served; a longer one is refused with 413.
func TestChunkedBodies(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, http: func(c *Config) { c.MaxBodyBytes = 4096 }})
	e.md.AddTopic("t", 1)
	post := func(body string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+e.srv.Addr()+"/v1/topics/t/records", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = -1 // chunked
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := post(`{"records":[{"value":"a"}]}`); status != http.StatusOK {
		t.Fatalf("small chunked body: %d", status)
	}
	if status := post(`{"records":[{"value":"` + strings.Repeat("x", 5000) + `"}]}`); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over the limit: %d, want 413", status)
	}
	if n := testutil.ToFloat64(e.producer.Metrics().InFlightBytes); n != 0 {
		t.Fatalf("%v bytes left in the budget", n)
	}
}

// TestMultipartBodiesAreLimited: a multipart body is streamed and admitted
// like any other: over -max-body-bytes it gets 413 (fasthttp would otherwise
// read it whole before the handler).
func TestMultipartBodiesAreLimited(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, http: func(c *Config) { c.MaxBodyBytes = 4096 }})
	e.md.AddTopic("t", 1)
	body := "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x\"\r\n\r\n" + strings.Repeat("x", 200_000) + "\r\n--b--\r\n"
	r := e.do(t, http.MethodPost, "/v1/topics/t/records", "multipart/form-data; boundary=b", []byte(body))
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("multipart body of %d bytes: %d %s, want 413", len(body), r.status, r.body)
	}
}

// TestGroupRequestsHaveABudgetOfTheirOwn: with the produce budget full, a
// consumer group's heartbeat through the frontend is still served.
func TestGroupRequestsHaveABudgetOfTheirOwn(t *testing.T) {
	body := `{"records":[{"value":"` + strings.Repeat("x", 40) + `"}]}`
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.MaxInFlightBytes = int64(len(body)) }})
	e.md.AddTopic("t", 1)
	first, release := holdOneProduce(t, e, body)
	defer release()
	if r := e.produceJSON(t, "t", "", body); r.status != http.StatusTooManyRequests {
		t.Fatalf("a second produce: %d, want 429", r.status)
	}
	if r := e.do(t, http.MethodPost, "/v1/groups/g/heartbeat", "application/json", []byte(`{"member_epoch":0,"topics":["t"]}`)); r.status == http.StatusTooManyRequests {
		t.Fatalf("a group heartbeat refused while produce bodies fill their budget: %s", r.body)
	}
	release()
	if r := <-first; r.status != http.StatusOK {
		t.Fatalf("first produce: %d %s", r.status, r.body)
	}
}
