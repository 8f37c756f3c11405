package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/partitioner"
	"github.com/sluicemq/sluice/libs/protocol"
)

func TestProduceJSONEndToEnd(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2})
	e.md.AddTopic("orders", 1, 2, 1) // partitions 0 and 2 on node 1, 1 on node 2
	key := "customer-42"
	kp := int32(partitioner.ForKey([]byte(key), 3))
	body := fmt.Sprintf(`{"records":[
		{"key":%q,"value":"first","headers":{"h":"x"}},
		{"value":"to p1","partition":1,"timestamp":1700000000000},
		{"key":%q,"value_b64":"AAE="},
		{"value":"keyless a"},
		{"value":"keyless b"}
	]}`, key, key)
	r := e.produceJSON(t, "orders", "?acks=all", body)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Error("no request id in the answer")
	}
	var got offsets
	r.json(t, &got)
	if len(got.Offsets) != 5 {
		t.Fatalf("answer %s", r.body)
	}
	for i, o := range got.Offsets {
		if o.Offset == nil || o.ErrorCode != 0 {
			t.Fatalf("record %d failed: %s", i, r.body)
		}
	}
	// Keyed records: murmur2, consecutive offsets in request order.
	if got.Offsets[0].Partition != kp || got.Offsets[2].Partition != kp {
		t.Fatalf("keyed records on %d and %d, want %d", got.Offsets[0].Partition, got.Offsets[2].Partition, kp)
	}
	if got.Offsets[1].Partition != 1 {
		t.Fatalf("explicit partition: %d", got.Offsets[1].Partition)
	}
	// Keyless records share one partition within the request.
	if got.Offsets[3].Partition != got.Offsets[4].Partition || *got.Offsets[4].Offset != *got.Offsets[3].Offset+1 {
		t.Fatalf("keyless records split: %s", r.body)
	}
	// The leader of the keyed partition holds the records, in order, with
	// their bytes and headers.
	leader := e.nodes[0]
	if kp == 1 {
		leader = e.nodes[1]
	}
	var vals []string
	for _, a := range leader.Appended("orders", kp) {
		if a.Req.Acks != protocol.AcksAll {
			t.Errorf("acks %d", a.Req.Acks)
		}
		for _, rec := range a.Records {
			vals = append(vals, string(rec.Value))
			if string(rec.Key) != key && !strings.HasPrefix(string(rec.Value), "keyless") {
				t.Errorf("key %q", rec.Key)
			}
		}
	}
	joined := strings.Join(vals, ",")
	if !strings.Contains(joined, "first,\x00\x01") {
		t.Fatalf("partition %d holds %q", kp, joined)
	}
	p1 := e.nodes[1].Appended("orders", 1)
	if len(p1) == 0 || p1[0].Records[0].Timestamp != 1700000000000 {
		t.Fatalf("partition 1 on node 2: %+v", p1)
	}
	if testutil.ToFloat64(e.producer.Metrics().Requests.WithLabelValues("200")) != 1 {
		t.Error("request not counted")
	}
}

func TestProduceMsgpack(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("bin", 1)
	var buf bytes.Buffer
	if err := msgpack.NewEncoder(&buf).Encode(map[string]any{"records": []any{
		map[string]any{"key": []byte{0, 1}, "value": []byte{0xff, 0xfe}, "headers": map[string]any{"h": []byte{9}}},
		map[string]any{"value": "text", "partition": 0},
	}}); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, http.MethodPost, "/v1/topics/bin/records?acks=leader", "application/msgpack", buf.Bytes())
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var got offsets
	r.json(t, &got)
	if len(got.Offsets) != 2 || *got.Offsets[0].Offset != 0 || *got.Offsets[1].Offset != 1 {
		t.Fatalf("answer %s", r.body)
	}
	a := e.nodes[0].Appended("bin", 0)
	if len(a) != 1 || a[0].Req.Acks != protocol.AcksLeader || !bytes.Equal(a[0].Records[0].Value, []byte{0xff, 0xfe}) ||
		!bytes.Equal(a[0].Records[0].Headers[0].Value, []byte{9}) || string(a[0].Records[1].Value) != "text" {
		t.Fatalf("appended %+v", a)
	}
}

func TestProducePerRecordErrorForBadPartition(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1, 1)
	r := e.produceJSON(t, "t", "", `{"records":[{"value":"a","partition":0},{"value":"b","partition":7},{"value":"c","partition":1},{"value":"d","partition":0}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	want := `{"offsets":[{"partition":0,"offset":0},{"partition":7,"error_code":3,"error":"UNKNOWN_TOPIC_OR_PARTITION: partition 7 does not exist (the topic has 2)"},{"partition":1,"offset":0},{"partition":0,"offset":1}]}`
	if string(r.body) != want {
		t.Fatalf("answer\n%s\nwant\n%s", r.body, want)
	}
}

func TestProduceRetriesOnNotLeader(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2})
	e.md.AddTopic("moving", 1)
	// The first attempt reaches node 1 just as leadership moves to node 2.
	e.nodes[0].SetReject(func(req *protocol.ProduceRequest, attempt int) error {
		if attempt == 1 {
			e.md.SetLeader("moving", 0, 2)
		}
		return protocol.NotLeaderOrFollower.Err("partition %d moved", req.Partition)
	})
	testkit.WaitFor(t, 5*time.Second, "topic in the cache", func() bool { _, ok := e.cache.Route("moving"); return ok })
	r := e.produceJSON(t, "moving", "", `{"records":[{"value":"1"},{"value":"2"},{"value":"3"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if string(r.body) != `{"offsets":[{"partition":0,"offset":0},{"partition":0,"offset":1},{"partition":0,"offset":2}]}` {
		t.Fatalf("answer %s", r.body)
	}
	if e.nodes[0].Attempts("moving", 0) != 1 || len(e.nodes[0].Appended("moving", 0)) != 0 {
		t.Fatal("old leader appended or was retried")
	}
	a := e.nodes[1].Appended("moving", 0)
	if len(a) != 1 || len(a[0].Records) != 3 || string(a[0].Records[2].Value) != "3" {
		t.Fatalf("new leader holds %+v", a)
	}
	if n := testutil.ToFloat64(e.producer.Metrics().Retries); n != 1 {
		t.Fatalf("%v retries counted", n)
	}
}

func TestProduceStorageDownIsPerRecordError(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.Retries = 1 }})
	e.md.AddTopic("t", 1)
	e.nodes[0].Close()
	r := e.produceJSON(t, "t", "", `{"records":[{"value":"a"}]}`)
	var got offsets
	r.json(t, &got)
	if r.status != http.StatusOK || got.Offsets[0].ErrorCode != int16(protocol.NetworkException) {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

func TestProduceUnknownTopic(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	r := e.produceJSON(t, "nope", "", `{"records":[{"value":"a"}]}`)
	if r.status != http.StatusNotFound || r.errBody(t).ErrorCode != int16(protocol.UnknownTopicOrPartition) {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	// Created a moment ago (through metadata directly): found by the refresh.
	e.md.AddTopic("fresh", 1)
	if r := e.produceJSON(t, "fresh", "", `{"records":[{"value":"a"}]}`); r.status != http.StatusOK {
		t.Fatalf("fresh topic: %d %s", r.status, r.body)
	}
	e.md.SetDown(true)
	if r := e.produceJSON(t, "other", "", `{"records":[{"value":"a"}]}`); r.status != http.StatusServiceUnavailable {
		t.Fatalf("metadata down: %d %s", r.status, r.body)
	}
}

func TestProduceOversizedBody(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, http: func(c *Config) { c.MaxBodyBytes = 2048 }})
	e.md.AddTopic("t", 1)
	big := `{"records":[{"value":"` + strings.Repeat("x", 4096) + `"}]}`
	r := e.produceJSON(t, "t", "", big)
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if eb := r.errBody(t); eb.ErrorCode != int16(protocol.RecordListTooLarge) || !strings.Contains(eb.Error, "2048") {
		t.Fatalf("error %+v", eb)
	}
	if testutil.ToFloat64(e.producer.Metrics().Requests.WithLabelValues("413")) != 1 {
		t.Error("413 not counted")
	}
	// The server still serves.
	if r := e.produceJSON(t, "t", "", `{"records":[{"value":"a"}]}`); r.status != http.StatusOK {
		t.Fatalf("after 413: %d %s", r.status, r.body)
	}
}

func TestProduceTooManyRecords(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, produce: func(c *produceConfig) { c.MaxRecords = 2 }})
	e.md.AddTopic("t", 1)
	r := e.produceJSON(t, "t", "", `{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}`)
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.errBody(t).Error, "more than 2 records") {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

func TestProduceBadRequests(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	for _, tc := range []struct {
		name, path, ct, body string
		code                 protocol.Code
		reason               string
	}{
		{"bad json", "/v1/topics/t/records", "application/json", `{"records":[`, protocol.InvalidRequest, "malformed produce body"},
		{"missing value", "/v1/topics/t/records", "application/json", `{"records":[{"key":"k"}]}`, protocol.InvalidRequest, "record 0: value is missing"},
		{"bad base64", "/v1/topics/t/records", "application/json", `{"records":[{"value_b64":"@@"}]}`, protocol.InvalidRequest, "not valid base64"},
		{"both values", "/v1/topics/t/records", "application/json", `{"records":[{"value":"a","value_b64":"YQ=="}]}`, protocol.InvalidRequest, "both given"},
		{"content type", "/v1/topics/t/records", "text/plain", `{"records":[{"value":"a"}]}`, protocol.InvalidRequest, "unsupported content type"},
		{"bad msgpack", "/v1/topics/t/records", "application/msgpack", `{"records":[]}`, protocol.InvalidRequest, "must be a map"},
		{"acks", "/v1/topics/t/records?acks=2", "application/json", `{"records":[{"value":"a"}]}`, protocol.InvalidRequiredAcks, "acks \"2\""},
		{"topic name", "/v1/topics/bad%20name/records", "application/json", `{"records":[{"value":"a"}]}`, protocol.InvalidTopic, "may hold only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, http.MethodPost, tc.path, tc.ct, []byte(tc.body))
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if eb := r.errBody(t); eb.ErrorCode != int16(tc.code) || !strings.Contains(eb.Error, tc.reason) {
				t.Fatalf("error %+v, want code %d saying %q", eb, tc.code, tc.reason)
			}
		})
	}
}

func TestProduceAcksValues(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	for q, want := range map[string]int8{"": -1, "?acks=all": -1, "?acks=-1": -1, "?acks=leader": 1, "?acks=1": 1, "?acks=none": 0, "?acks=0": 0} {
		before := len(e.nodes[0].Appended("t", 0))
		if r := e.produceJSON(t, "t", q, `{"records":[{"value":"a"}]}`); r.status != http.StatusOK {
			t.Fatalf("%q: %d %s", q, r.status, r.body)
		}
		a := e.nodes[0].Appended("t", 0)
		if len(a) != before+1 || a[len(a)-1].Req.Acks != want {
			t.Fatalf("%q: acks %d, want %d", q, a[len(a)-1].Req.Acks, want)
		}
	}
}

func TestRequestIDEchoed(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	r := e.do(t, http.MethodGet, "/v1/nowhere", "", nil, "X-Request-Id", "abc-123")
	if r.header.Get("X-Request-Id") != "abc-123" || r.status != http.StatusNotFound {
		t.Fatalf("status %d id %q", r.status, r.header.Get("X-Request-Id"))
	}
	a := e.do(t, http.MethodGet, "/v1/nowhere", "", nil)
	b := e.do(t, http.MethodGet, "/v1/nowhere", "", nil)
	if a.header.Get("X-Request-Id") == "" || a.header.Get("X-Request-Id") == b.header.Get("X-Request-Id") {
		t.Fatalf("generated ids %q %q", a.header.Get("X-Request-Id"), b.header.Get("X-Request-Id"))
	}
}

func TestAppendOffsetsEscapes(t *testing.T) {
	// The error text is JSON-escaped, whatever it holds.
	r := appendOffsets(nil, []produceResult{{Partition: 1, Err: protocol.InvalidRecord.Err("quote \" and \n newline")}}, nil)
	var v map[string]any
	if err := json.Unmarshal(r, &v); err != nil {
		t.Fatalf("%s: %v", r, err)
	}
}
