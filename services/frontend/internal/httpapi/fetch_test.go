package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

func TestFetchThroughTheFrontend(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	r := e.produceJSON(t, "t", "", `{"records":[
		{"key":"k1","value":"hello","headers":{"h":"x"},"timestamp":1700000000000},
		{"value_b64":"AP8=","timestamp":1700000000001},
		{"key_b64":"/w==","value":null,"timestamp":1700000000002}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0", "", nil)
	want := `{"records":[` +
		`{"offset":0,"timestamp":1700000000000,"key":"k1","value":"hello","headers":{"h":"x"}},` +
		`{"offset":1,"timestamp":1700000000001,"key":null,"value_b64":"AP8="},` +
		`{"offset":2,"timestamp":1700000000002,"key_b64":"/w==","value":null}` +
		`],"next_offset":3,"high_watermark":3,"last_stable_offset":3}`
	if r.status != http.StatusOK || string(r.body) != want || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s\nwant %s", r.status, r.body, want)
	}
	r = e.do(t, http.MethodGet, "/v1/topics/t/partitions/0/records?offset=1&max_bytes=1&max_wait_ms=0", "", nil, "Accept", "application/msgpack")
	var m struct {
		Records []struct {
			Offset int64  `msgpack:"offset"`
			Value  []byte `msgpack:"value"`
		} `msgpack:"records"`
		NextOffset int64 `msgpack:"next_offset"`
	}
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/msgpack" || msgpack.Unmarshal(r.body, &m) != nil {
		t.Fatalf("msgpack: %d %q", r.status, r.body)
	}
	if len(m.Records) != 2 || m.Records[0].Offset != 1 || !bytes.Equal(m.Records[0].Value, []byte{0, 0xff}) || m.NextOffset != 3 {
		t.Fatalf("msgpack answer %+v", m)
	}
	// At the end: an empty answer once max_wait_ms passes.
	start := time.Now()
	r = e.do(t, http.MethodGet, "/v1/topics/t/partitions/0/records?offset=latest&max_wait_ms=50", "", nil)
	if r.status != http.StatusOK || string(r.body) != `{"records":[],"next_offset":3,"high_watermark":3,"last_stable_offset":3}` || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("at the end: %d %s after %v", r.status, r.body, time.Since(start))
	}
}

func TestFetchBadRequests(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	if r := e.produceJSON(t, "t", "", `{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}`); r.status != http.StatusOK {
		t.Fatal(r.status)
	}
	e.nodes[0].SetLogStart("t", 0, 1)
	for _, tc := range []struct {
		path   string
		status int
		code   protocol.Code
		reason string
	}{
		{"/v1/topics/t/partitions/0/records", 400, protocol.InvalidRequest, "offset is missing"},
		{"/v1/topics/t/partitions/x/records?offset=0", 400, protocol.InvalidRequest, `partition "x"`},
		{"/v1/topics/t/partitions/0/records?offset=-1", 400, protocol.InvalidRequest, "not a non-negative number"},
		{"/v1/topics/t/partitions/0/records?offset=0&max_bytes=0", 400, protocol.InvalidFetchSize, "max_bytes"},
		{"/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=soon", 400, protocol.InvalidRequest, "max_wait_ms"},
		{"/v1/topics/t/partitions/0/records?offset=0&isolation=serializable", 400, protocol.InvalidRequest, "isolation"},
		{"/v1/topics/bad%20name/partitions/0/records?offset=0", 400, protocol.InvalidTopic, "may hold only"},
		{"/v1/topics/nope/partitions/0/records?offset=0", 404, protocol.UnknownTopicOrPartition, "unknown topic"},
		{"/v1/topics/t/partitions/1/records?offset=0", 404, protocol.UnknownTopicOrPartition, "partition 1 does not exist"},
		{"/v1/topics/t/partitions/0/records?offset=0", 404, protocol.OffsetOutOfRange, "log start offset is 1 and its end (high watermark) 3"},
		{"/v1/topics/t/partitions/0/records?offset=7", 404, protocol.OffsetOutOfRange, "offset 7 is outside"},
	} {
		r := e.do(t, http.MethodGet, tc.path, "", nil)
		if eb := r.errBody(t); r.status != tc.status || eb.ErrorCode != int16(tc.code) || !strings.Contains(eb.Error, tc.reason) {
			t.Errorf("%s: %d %s, want %d %v saying %q", tc.path, r.status, r.body, tc.status, tc.code, tc.reason)
		}
	}
	// Caps lower values instead of refusing them.
	if r := e.do(t, http.MethodGet, "/v1/topics/t/partitions/0/records?offset=1&max_bytes=999999999&max_wait_ms=999999", "", nil); r.status != http.StatusOK {
		t.Fatalf("capped: %d %s", r.status, r.body)
	}
}

func TestStopEndsFetchLongPolls(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	done := make(chan reply, 1)
	go func() {
		done <- e.do(t, http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=30000", "", nil)
	}()
	testkit.WaitFor(t, 5*time.Second, "the long-poll on the node", func() bool { return e.nodes[0].Fetches("t", 0) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("answer %d %s", r.status, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fetch still open after stop")
	}
}
