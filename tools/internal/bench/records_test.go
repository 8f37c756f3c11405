package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
)

func TestStamp(t *testing.T) {
	v := newValue(20, 1)
	at := time.Unix(1_700_000_000, 123456789)
	stamp(v, at)
	if got, ok := stampOf(v); !ok || got != at.UnixNano() {
		t.Fatalf("stamp %d, %v", got, ok)
	}
	if _, ok := stampOf(v[:7]); ok {
		t.Fatal("a 7-byte value holds no stamp")
	}
}

func TestJSONBody(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	j := &jsonBody{keys: KeySpec{Kind: KeysFixed, N: 2}.NewGen(0, 0), value: newValue(10, 1)}
	var body struct {
		Records []struct {
			Key       *string `json:"key"`
			Value     string  `json:"value"`
			ValueB64  string  `json:"value_b64"`
			Timestamp int64   `json:"timestamp"`
		} `json:"records"`
	}
	if err := json.Unmarshal(j.build(3, at), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Records) != 3 || *body.Records[0].Key != "key-0" || *body.Records[2].Key != "key-0" ||
		body.Records[1].Value != string(j.value) || body.Records[1].Timestamp != at.UnixMilli() {
		t.Fatalf("%+v", body)
	}
	// e2e values are binary (the stamp): value_b64. Keyless: no key field.
	e := &jsonBody{keys: noKeys{}, value: newValue(12, 1), e2e: true}
	body.Records = nil
	if err := json.Unmarshal(e.build(1, at), &body); err != nil {
		t.Fatal(err)
	}
	v, err := base64.StdEncoding.DecodeString(body.Records[0].ValueB64)
	if err != nil || len(v) != 12 || body.Records[0].Key != nil {
		t.Fatalf("%+v %v", body.Records[0], err)
	}
	if s, _ := stampOf(v); s != at.UnixNano() {
		t.Fatalf("stamp %d, want %d", s, at.UnixNano())
	}
}

// newTestRun is a run with what the outcome paths need.
func newTestRun(mode string) *run {
	r := &run{cfg: Config{Mode: mode, Topic: "t", RecordSize: 10}}
	r.prod.failures = &r.failures
	r.prod.lats = []*Latencies{NewLatencies()}
	return r
}

func TestPostRecordsRetriesThrottlingAndCountsOutcomes(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if req.URL.Query().Get("acks") != "all" || !strings.HasPrefix(string(b), `{"records":[`) {
			http.Error(w, "bad request", 400)
			return
		}
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error_code":89,"error":"THROTTLING_QUOTA_EXCEEDED: full"}`)
			return
		}
		fmt.Fprint(w, `{"offsets":[{"partition":0,"offset":7},{"partition":1,"error_code":19,"error":"NOT_ENOUGH_REPLICAS: 1 of 3"},{"partition":0,"offset":8}]}`)
	}))
	defer srv.Close()
	ans, err := postRecords(context.Background(), srv.Client(), srv.URL+"/v1/topics/t/records?acks=all", []byte(`{"records":[]}`), 3, time.Now().Add(5*time.Second))
	if err != nil || calls.Load() != 2 {
		t.Fatalf("calls %d, %v", calls.Load(), err)
	}
	r := newTestRun(ModeProduce)
	r.jsonOutcomes(r.prod.lats[0], time.Now(), true, ans)
	if r.prod.counted.Load() != 2 || r.prod.bytes.Load() != 20 || r.failures.Count() != 1 ||
		!strings.Contains(r.failures.Errors()[0].Error, "NOT_ENOUGH_REPLICAS") || r.prod.lats[0].Summary().Count != 2 {
		t.Fatalf("counted %d bytes %d failures %v", r.prod.counted.Load(), r.prod.bytes.Load(), r.failures.Errors())
	}

	// A request refused whole for good fails at once, without retries.
	calls.Store(0)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprint(w, `{"error_code":18,"error":"RECORD_LIST_TOO_LARGE: more than 10000 records"}`)
	}))
	defer bad.Close()
	if _, err := postRecords(context.Background(), bad.Client(), bad.URL, []byte("{}"), 3, time.Now().Add(5*time.Second)); err == nil ||
		err.Error() != "RECORD_LIST_TOO_LARGE: more than 10000 records" || calls.Load() != 1 {
		t.Fatalf("calls %d, %v", calls.Load(), err)
	}
}

func TestOutcomeWarmupAndFailures(t *testing.T) {
	r := newTestRun(ModeProduce)
	lat := r.prod.lats[0]
	r.prod.outcome(lat, time.Now(), false, 10, 1, client.RecordMetadata{Partition: 0, Offset: 1})
	r.prod.outcome(lat, time.Now(), true, 10, 1, client.RecordMetadata{Partition: 0, Offset: 2})
	r.prod.outcome(lat, time.Now(), false, 10, 1, client.RecordMetadata{Err: fmt.Errorf("boom")})
	if r.prod.warmup.Load() != 1 || r.prod.counted.Load() != 1 || r.failures.Count() != 1 || r.prod.acked() != 2 || lat.Summary().Count != 1 {
		t.Fatalf("warmup %d counted %d failed %d", r.prod.warmup.Load(), r.prod.counted.Load(), r.failures.Count())
	}
}

func consumerRecs(p int32, offsets ...int64) []polled {
	var out []polled
	for _, o := range offsets {
		out = append(out, polled{partition: p, offset: o})
	}
	return out
}

func TestTracker(t *testing.T) {
	tr := newTracker([]int64{10, 0})
	tr.acked(0, 10)
	tr.acked(0, 11)
	tr.acked(1, 0)
	tr.acked(5, 0) // a partition the run does not know: ignored
	tr.consumed(consumerRecs(0, 10))
	tr.consumed(consumerRecs(1, 0))
	tr.consumed(consumerRecs(0, 11)) // everything consumed, but producing goes on
	select {
	case <-tr.done:
		t.Fatal("done while producing")
	default:
	}
	tr.acked(0, 12)
	tr.producingEnded()
	if got := tr.unconsumed(); got != 1 || tr.startOf(0) != 12 || tr.startOf(1) != 1 {
		t.Fatalf("unconsumed %d, start %d %d", got, tr.startOf(0), tr.startOf(1))
	}
	tr.consumed(consumerRecs(0, 12))
	select {
	case <-tr.done:
	default:
		t.Fatal("not done once every acknowledged record was consumed")
	}
	if tr.unconsumed() != 0 {
		t.Fatal(tr.unconsumed())
	}
}

func TestCountE2E(t *testing.T) {
	r := newTestRun(ModeE2E)
	r.plan = &plan{warmupEnd: t0}
	r.cons.lats = []*Latencies{NewLatencies()}
	warm, late := newValue(16, 1), newValue(16, 2)
	stamp(warm, t0.Add(-time.Second))
	stamp(late, t0.Add(time.Second))
	recs := []polled{{value: warm}, {value: late}, {value: []byte("short")}}
	r.countE2E(recs, t0.Add(1500*time.Millisecond), r.cons.lats[0])
	s := r.cons.lats[0].Summary()
	if r.cons.counted.Load() != 1 || r.cons.warmup.Load() != 2 || r.cons.bytes.Load() != 16 || s.Count != 1 || !near(s.P50, 500, 0.002) {
		t.Fatalf("counted %d warm %d latency %+v", r.cons.counted.Load(), r.cons.warmup.Load(), s)
	}
}

func TestConsumingClaim(t *testing.T) {
	cs := &consuming{limit: 5, reached: make(chan struct{})}
	for _, want := range []int64{3, 2, 0} {
		if got := cs.claim(3); got != want {
			t.Fatalf("claim: %d, want %d", got, want)
		}
	}
	select {
	case <-cs.reached:
	default:
		t.Fatal("limit reached but not signalled")
	}
	if (&consuming{}).claim(7) != 7 {
		t.Fatal("no limit")
	}
}
