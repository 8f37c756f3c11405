package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// sdkBatch builds a batch as the SDK does; pid < 0 leaves it non-idempotent.
func sdkBatch(t *testing.T, pid int64, seq int32, values ...string) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	if pid >= 0 {
		b.SetProducer(pid, 0, seq)
	}
	for _, v := range values {
		b.Append(record.Record{Timestamp: 1700000000000, Value: []byte(v)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

func (e *env) produceBatches(t *testing.T, topic string, batches ...frontendapi.PartitionBatch) (reply, frontendapi.BatchesResponse) {
	t.Helper()
	r := e.do(t, http.MethodPost, "/v1/topics/"+topic+"/records", frontendapi.ContentTypeBatches, frontendapi.AppendBatches(nil, batches))
	var br frontendapi.BatchesResponse
	if r.status == http.StatusOK || r.status == http.StatusGatewayTimeout {
		r.json(t, &br)
		if len(br.Results) != len(batches) {
			t.Fatalf("%d results for %d batches: %s", len(br.Results), len(batches), r.body)
		}
	}
	return r, br
}

func values(a []fakeAppended) string {
	var vs []string
	for _, x := range a {
		for _, r := range x.Records {
			vs = append(vs, string(r.Value))
		}
	}
	return strings.Join(vs, ",")
}

func TestProduceBatchesEndToEnd(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2})
	e.md.AddTopic("sdk", 1, 2)
	r, br := e.produceBatches(t, "sdk",
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, -1, 0, "a", "b")},
		frontendapi.PartitionBatch{Partition: 1, Batch: sdkBatch(t, -1, 0, "x")},
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, -1, 0, "c")},
		frontendapi.PartitionBatch{Partition: 9, Batch: sdkBatch(t, -1, 0, "lost")},
	)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	want := `{"results":[{"partition":0,"base_offset":0},{"partition":1,"base_offset":0},{"partition":0,"base_offset":2},` +
		`{"partition":9,"base_offset":-1,"error_code":3,"error":"UNKNOWN_TOPIC_OR_PARTITION: partition 9 does not exist (the topic has 2)"}]}`
	if string(r.body) != want {
		t.Fatalf("answer\n%s\nwant\n%s", r.body, want)
	}
	if got := values(e.nodes[0].Appended("sdk", 0)); got != "a,b,c" {
		t.Fatalf("partition 0 holds %s", got)
	}
	if got := values(e.nodes[1].Appended("sdk", 1)); got != "x" || br.Results[1].ErrorCode != 0 {
		t.Fatalf("partition 1 holds %s", got)
	}
	if a := e.nodes[0].Appended("sdk", 0); len(a) != 2 || a[0].Req.Acks != protocol.AcksAll {
		t.Fatalf("one storage request per batch: %+v", a)
	}
}

func TestProduceBatchesRefusesCorruptBatch(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1, 1)
	bad := sdkBatch(t, -1, 0, "flipped")
	bad[len(bad)-1] ^= 0xff // passes the header checks, fails the CRC
	r, _ := e.produceBatches(t, "t",
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, -1, 0, "fine")},
		frontendapi.PartitionBatch{Partition: 0, Batch: bad},
	)
	if body := string(r.body); r.status != http.StatusBadRequest || !strings.Contains(body, "CRC") || !strings.Contains(body, `"error_code":2`) {
		t.Fatalf("corrupt batch: HTTP %d %s; want 400 CORRUPT_RECORD naming the CRC", r.status, r.body)
	}
	if n := e.nodes[0].Attempts("t", 0); n != 0 {
		t.Fatalf("%d produce requests reached the leader: a body with a corrupt batch is refused whole", n)
	}
}

func TestProduceBatchesRefusedWhole(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	good := sdkBatch(t, -1, 0, "v")
	badMagic := append([]byte(nil), good...)
	badMagic[16] = 0
	for _, tc := range []struct {
		name   string
		body   []byte
		code   protocol.Code
		reason string
	}{
		{"not msgpack", []byte("{}"), protocol.InvalidRequest, "malformed batches body"},
		{"no batches", frontendapi.AppendBatches(nil, nil), protocol.InvalidRequest, "no batch"},
		{"bad magic", frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{{Batch: good}, {Batch: badMagic}}), protocol.CorruptRecord, "batch 1"},
		{"truncated", frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{{Batch: good[:len(good)-3]}}), protocol.CorruptRecord, "truncated"},
	} {
		r := e.do(t, http.MethodPost, "/v1/topics/t/records", frontendapi.ContentTypeBatches, tc.body)
		if eb := r.errBody(t); r.status != http.StatusBadRequest || eb.ErrorCode != int16(tc.code) || !strings.Contains(eb.Error, tc.reason) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if n := e.nodes[0].Attempts("t", 0); n != 0 {
		t.Fatalf("%d batches sent from refused bodies", n)
	}
}

// TestProduceBatchesIdempotentResend: the leader appends a batch but its
// answer is lost with the connection; the frontend resends, and the leader
// answers the duplicate with the first offsets, so the log holds it once.
func TestProduceBatchesIdempotentResend(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	e.nodes[0].SetLoseAnswer(func(_ *protocol.ProduceRequest, attempt int) bool { return attempt == 2 })
	_, br := e.produceBatches(t, "t",
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, 7, 0, "a", "b")},
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, 7, 2, "c")},
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, 7, 3, "d")},
	)
	for i, want := range []int64{0, 2, 3} {
		if br.Results[i].ErrorCode != 0 || br.Results[i].BaseOffset != want {
			t.Fatalf("results %+v", br.Results)
		}
	}
	if got := values(e.nodes[0].Appended("t", 0)); got != "a,b,c,d" || e.nodes[0].Attempts("t", 0) != 4 {
		t.Fatalf("log holds %s after %d attempts", got, e.nodes[0].Attempts("t", 0))
	}
}

func TestProduceBatchesFollowLeader(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2})
	e.md.AddTopic("moving", 1)
	e.nodes[0].SetReject(func(req *protocol.ProduceRequest, attempt int) error {
		if attempt == 1 {
			e.md.SetLeader("moving", 0, 2)
		}
		return protocol.NotLeaderOrFollower.Err("moved")
	})
	testkit.WaitFor(t, 5*time.Second, "topic in the cache", func() bool { _, ok := e.cache.Route("moving"); return ok })
	_, br := e.produceBatches(t, "moving",
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, -1, 0, "1")},
		frontendapi.PartitionBatch{Partition: 0, Batch: sdkBatch(t, -1, 0, "2")},
	)
	if br.Results[0].BaseOffset != 0 || br.Results[1].BaseOffset != 1 || br.Results[1].ErrorCode != 0 {
		t.Fatalf("results %+v", br.Results)
	}
	if got := values(e.nodes[1].Appended("moving", 0)); got != "1,2" || e.nodes[0].Attempts("moving", 0) != 1 {
		t.Fatalf("new leader holds %s; old leader tried %d times", got, e.nodes[0].Attempts("moving", 0))
	}
}

func TestBatchesAnswerShape(t *testing.T) {
	b, _ := json.Marshal(batchesAnswer{ErrorCode: 7, Error: "late", BatchesResponse: frontendapi.BatchesResponse{Results: []frontendapi.BatchResult{{Partition: 1, BaseOffset: 4}}}})
	if string(b) != `{"error_code":7,"error":"late","results":[{"partition":1,"base_offset":4}]}` {
		t.Fatalf("%s", b)
	}
}

// TestProduceBatchesTransactional: a transactional batch outside a
// transactional request is refused whole before it reaches a leader
// (nothing would end the transaction it opens), as is a records body that
// names a transactional id.
func TestProduceBatchesTransactional(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	e.md.AddTopic("t", 1)
	b := record.NewBuilder(record.CodecNone)
	b.SetProducer(7, 0, 0)
	b.SetTransactional(true)
	b.Append(record.Record{Timestamp: 1700000000000, Value: []byte("v")})
	txnBatch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	body := frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{{Batch: sdkBatch(t, 3, 0, "plain")}, {Batch: txnBatch}})
	r := e.do(t, http.MethodPost, "/v1/topics/t/records", frontendapi.ContentTypeBatches, body)
	if eb := r.errBody(t); r.status != http.StatusBadRequest || eb.ErrorCode != int16(protocol.InvalidRecord) || !strings.Contains(eb.Error, "transactional_id") {
		t.Fatalf("transactional batch without transactional_id: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodPost, "/v1/topics/t/records?transactional_id=tx", "application/json", []byte(`[{"value":"v"}]`))
	if eb := r.errBody(t); r.status != http.StatusBadRequest || eb.ErrorCode != int16(protocol.InvalidRequest) || !strings.Contains(eb.Error, "batches body") {
		t.Fatalf("records body with transactional_id: %d %s", r.status, r.body)
	}
	if n := e.nodes[0].Attempts("t", 0); n != 0 {
		t.Fatalf("%d batches sent from refused bodies", n)
	}
}
