package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// recordsBody is a JSON produce body of the values, all for partition 0.
func recordsBody(vals ...string) string {
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"value":%q,"partition":0}`, v)
	}
	b.WriteString(`]}`)
	return b.String()
}

// storedAt maps each value a node appended to a partition to its offset.
func storedAt(e *env, node int, topic string, part int32) map[string]int64 {
	at := map[string]int64{}
	for _, a := range e.nodes[node].Appended(topic, part) {
		for i, r := range a.Records {
			at[string(r.Value)] = a.BaseOffset + int64(i)
		}
	}
	return at
}

// histogramOf returns a histogram's sample count and sum.
func histogramOf(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0].GetHistogram()
	return m.GetSampleCount(), m.GetSampleSum()
}

// produceConcurrently sends rounds sequential requests of perRequest records
// from each of clients goroutines (each with its own connection) and returns
// every request's values and answer, by client then round.
func produceConcurrently(t *testing.T, e *env, clients, rounds, perRequest int) ([][][]string, [][]offsets) {
	sent := make([][][]string, clients)
	got := make([][]offsets, clients)
	var wg sync.WaitGroup
	for c := range clients {
		sent[c] = make([][]string, rounds)
		got[c] = make([]offsets, rounds)
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for r := range rounds {
				var vals []string
				for i := range perRequest {
					vals = append(vals, fmt.Sprintf("c%d-r%d-%d", c, r, i))
				}
				sent[c][r] = vals
				resp, err := client.Post(e.url+"/v1/topics/t/records", "application/json", strings.NewReader(recordsBody(vals...)))
				if err != nil {
					t.Errorf("client %d: %v", c, err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Errorf("client %d: %v", c, err)
					return
				}
				if resp.StatusCode != http.StatusOK {
					t.Errorf("client %d round %d: %d %s", c, r, resp.StatusCode, body)
					return
				}
				if err := json.Unmarshal(body, &got[c][r]); err != nil {
					t.Errorf("client %d round %d: %s: %v", c, r, body, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return sent, got
}

// checkOffsets checks that every record's answered offset is where the
// leader stored it, and that each client's records got increasing offsets
// in the order it sent them (records of one request, then its next request).
func checkOffsets(t *testing.T, e *env, sent [][][]string, got [][]offsets) {
	t.Helper()
	at := storedAt(e, 0, "t", 0)
	for c := range sent {
		last := int64(-1)
		for r := range sent[c] {
			o := got[c][r].Offsets
			if len(o) != len(sent[c][r]) {
				t.Fatalf("client %d round %d: %d offsets for %d records", c, r, len(o), len(sent[c][r]))
			}
			for i, v := range sent[c][r] {
				if o[i].Offset == nil || o[i].Partition != 0 {
					t.Fatalf("client %d round %d record %d: %+v", c, r, i, o[i])
				}
				where, ok := at[v]
				if !ok || where != *o[i].Offset {
					t.Fatalf("%s answered at offset %d, stored at %d (%v)", v, *o[i].Offset, where, ok)
				}
				if where <= last {
					t.Fatalf("%s at %d, after offset %d of the client's previous record", v, where, last)
				}
				last = where
			}
		}
	}
}

func TestLingerBatchesConcurrentRequestsToOnePartition(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.Linger = 20 * time.Millisecond }})
	e.md.AddTopic("t", 1)
	const clients, rounds, perRequest = 16, 4, 3
	sent, got := produceConcurrently(t, e, clients, rounds, perRequest)
	checkOffsets(t, e, sent, got)
	batches := e.nodes[0].Attempts("t", 0)
	if batches >= clients*rounds {
		t.Fatalf("%d batches for %d requests: none shared", batches, clients*rounds)
	}
	count, sum := histogramOf(t, e.producer.Metrics().BatchRecords)
	if int(count) != batches || int(sum) != clients*rounds*perRequest {
		t.Fatalf("batch records histogram: %d batches, %v records; the leader got %d batches", count, sum, batches)
	}
	t.Logf("%d requests of %d records in %d batches", clients*rounds, perRequest, batches)
}

func TestLingerZeroSendsOneBatchPerRequest(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.Linger = 0 }})
	e.md.AddTopic("t", 1)
	const clients, rounds, perRequest = 8, 3, 3
	sent, got := produceConcurrently(t, e, clients, rounds, perRequest)
	checkOffsets(t, e, sent, got)
	if n := e.nodes[0].Attempts("t", 0); n != clients*rounds {
		t.Fatalf("%d batches for %d requests", n, clients*rounds)
	}
	for _, a := range e.nodes[0].Appended("t", 0) {
		if len(a.Records) != perRequest || !strings.HasSuffix(string(a.Records[0].Value), "-0") {
			t.Fatalf("a batch that is not one request's: %+v", a.Records)
		}
	}
}

func TestLingerBatchFailureAnswersEveryRequestInIt(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.Linger = 5 * time.Millisecond }})
	e.md.AddTopic("t", 1)
	testkit.WaitFor(t, 5*time.Second, "topic in the cache", func() bool { _, ok := e.cache.Route("t"); return ok })
	// The first batch is held on the leader and then accepted; every later
	// one is refused for good.
	held, hold := make(chan struct{}), make(chan struct{})
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	e.nodes[0].SetReject(func(_ *protocol.ProduceRequest, attempt int) error {
		if attempt == 1 {
			close(held)
			<-hold
			return nil
		}
		return protocol.InvalidRecord.Err("refused by the test")
	})
	first := make(chan reply, 1)
	go func() { first <- e.produceJSON(t, "t", "", recordsBody("first")) }()
	<-held

	// Requests that come meanwhile gather into the partition's next batch.
	const n = 12
	bodies := make([]string, n)
	inFlight := len(recordsBody("first"))
	for i := range bodies {
		bodies[i] = recordsBody(fmt.Sprintf("r%d-a", i), fmt.Sprintf("r%d-b", i))
		inFlight += len(bodies[i])
	}
	answers := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = e.produceJSON(t, "t", "", bodies[i]) })
	}
	m := e.producer.Metrics()
	testkit.WaitFor(t, 5*time.Second, "every request admitted", func() bool { return testutil.ToFloat64(m.InFlightBytes) == float64(inFlight) })
	close(hold)
	wg.Wait()
	if r := <-first; r.status != http.StatusOK {
		t.Fatalf("first request: %d %s", r.status, r.body)
	}
	for i, r := range answers {
		var got offsets
		r.json(t, &got)
		if r.status != http.StatusOK || len(got.Offsets) != 2 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
		for _, o := range got.Offsets {
			if o.Offset != nil || o.ErrorCode != int16(protocol.InvalidRecord) || !strings.Contains(o.Error, "refused by the test") {
				t.Fatalf("request %d: %s", i, r.body)
			}
		}
	}
	if failed := e.nodes[0].Attempts("t", 0) - 1; failed >= n {
		t.Fatalf("%d failed batches for %d requests: none shared", failed, n)
	}
	if a := e.nodes[0].Appended("t", 0); len(a) != 1 {
		t.Fatalf("%d batches appended, want the first only", len(a))
	}
}

func TestLingerSplitsARequestOverTheBatchMax(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.BatchMaxBytes = 1024 }})
	e.md.AddTopic("t", 1)
	var vals []string
	for i := range 60 {
		vals = append(vals, fmt.Sprintf("%02d-%s", i, strings.Repeat("x", 100)))
	}
	r := e.produceJSON(t, "t", "", recordsBody(vals...))
	var got offsets
	r.json(t, &got)
	if r.status != http.StatusOK || len(got.Offsets) != len(vals) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for i, o := range got.Offsets {
		if o.Offset == nil || *o.Offset != int64(i) {
			t.Fatalf("record %d: %+v", i, o)
		}
	}
	appended := e.nodes[0].Appended("t", 0)
	if len(appended) < 6 {
		t.Fatalf("%d batches for 60 records of 103 bytes under 1 KiB", len(appended))
	}
	var order []string
	for _, a := range appended {
		b := record.NewBuilder(record.CodecNone)
		for _, rec := range a.Records {
			b.Append(rec)
			order = append(order, string(rec.Value))
		}
		if b.Size() > 1024 {
			t.Fatalf("a batch of %d bytes, over -batch-max-bytes", b.Size())
		}
	}
	if strings.Join(order, ",") != strings.Join(vals, ",") {
		t.Fatal("the leader holds the records out of request order")
	}
}

func TestLingerTimeoutAnswers504PerRecord(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) {
		c.Timeout = 300 * time.Millisecond
		c.Linger = 20 * time.Millisecond
	}})
	e.md.AddTopic("t", 1)
	release := holdPartition(e, 0)
	defer release()
	// Two requests share a batch the leader never answers in time.
	answers := make([]reply, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = e.produceJSON(t, "t", "", recordsBody(fmt.Sprint(i))) })
	}
	wg.Wait()
	for i, r := range answers {
		var got struct {
			ErrorCode int16 `json:"error_code"`
			offsets
		}
		r.json(t, &got)
		if r.status != http.StatusGatewayTimeout || got.ErrorCode != int16(protocol.RequestTimedOut) || len(got.Offsets) != 1 ||
			got.Offsets[0].ErrorCode != int16(protocol.RequestTimedOut) || !strings.Contains(got.Offsets[0].Error, "outcome unknown") {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	release()
	// The partition works again, and the frontend's budget is empty.
	if r := e.produceJSON(t, "t", "", recordsBody("after")); r.status != http.StatusOK {
		t.Fatalf("after the timeout: %d %s", r.status, r.body)
	}
	testkit.WaitFor(t, 5*time.Second, "the budget back to empty", func() bool { return testutil.ToFloat64(e.producer.Metrics().InFlightBytes) == 0 })
}
