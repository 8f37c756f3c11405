package ops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/record"
)

// post sends a body with a content type and returns the status and body.
func post(t *testing.T, url, ctype string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestFrontendRejectsBadInput: malformed JSON and msgpack bodies, batches
// with a bad CRC, unknown topics, oversized bodies and too many records each
// get their 4xx with a reason, and the frontend keeps serving.
func TestFrontendRejectsBadInput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1, Extra: map[string][]string{
		"frontend": {"-max-body-bytes", "65536", "-max-records", "100", "-max-in-flight-bytes", "1048576"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "strict", 1, 1)
	url := c.FrontendURL() + "/v1/topics/strict/records"

	b := record.NewBuilder(record.CodecNone)
	b.Append(record.Record{Value: []byte("hello"), Timestamp: 1})
	good, _ := b.Build()
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff // a payload byte: the CRC no longer matches
	many := make([]map[string]string, 101)
	for i := range many {
		many[i] = map[string]string{"value": "x"}
	}
	manyJSON, _ := json.Marshal(map[string]any{"records": many})
	for _, tc := range []struct {
		name, url, ctype string
		body             []byte
		status           int
		reason           string
	}{
		{"malformed JSON", url, "application/json", []byte(`{"records":[{"value":`), 400, "malformed"},
		{"records not a list", url, "application/json", []byte(`{"records":7}`), 400, "records"},
		{"malformed msgpack", url, "application/msgpack", []byte{0x81, 0xa7, 'r', 'e', 'c', 'o', 'r', 'd', 's', 0xc1}, 400, "malformed"},
		{"malformed batches body", url, frontendapi.ContentTypeBatches, []byte{0x91, 0x92, 0x00}, 400, "batches"},
		{"batch with a bad CRC", url, frontendapi.ContentTypeBatches, frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{{Partition: 0, Batch: bad}}), 400, "CRC"},
		{"unknown topic", c.FrontendURL() + "/v1/topics/nope/records", "application/json", []byte(`{"records":[{"value":"x"}]}`), 404, "nope"},
		{"unknown content type", url, "text/plain", []byte(`x`), 400, "content type"},
		{"too many records", url, "application/json", manyJSON, 413, "records"},
	} {
		status, body := post(t, tc.url, tc.ctype, tc.body)
		if status != tc.status || !strings.Contains(strings.ToLower(body), strings.ToLower(tc.reason)) || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: HTTP %d %s; want %d with a reason mentioning %q", tc.name, status, body, tc.status, tc.reason)
		}
	}
	// An oversized body is refused from its Content-Length, before it is read:
	// only the first 8 KiB, which the server reads ahead of its handler, are
	// sent here (the frontend then closes the connection).
	if status, body := headersOnly(t, url, 70000, 8<<10); status != 413 || !strings.Contains(body, "large") {
		t.Errorf("oversized body: HTTP %d %s; want 413 with a reason", status, body)
	}
	// Still serving: a good JSON body and a good batch are stored.
	if status, body := post(t, url, "application/json", []byte(`{"records":[{"value":"ok"}]}`)); status != 200 || !strings.Contains(body, `"offset":0`) {
		t.Fatalf("good JSON after the bad ones: %d %s", status, body)
	}
	status, body := post(t, url, frontendapi.ContentTypeBatches, frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{{Partition: 0, Batch: good}}))
	if status != 200 || !strings.Contains(body, `"base_offset":1`) {
		t.Fatalf("good batch after the bad ones: %d %s", status, body)
	}
	stored := itest.ReadValues(t, ctx, c, "strict", 1)[0]
	if len(stored) != 2 || stored[0] != "ok" || stored[1] != "hello" {
		t.Fatalf("stored %q, want only the two good records", stored)
	}
}

// headersOnly sends a POST's headers announcing length body bytes and only
// the first sent bytes of the body, and returns the answer.
func headersOnly(t *testing.T, rawURL string, length, sent int) (int, string) {
	t.Helper()
	u, err := neturl.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.RequestURI(), u.Host, length, strings.Repeat("x", sent))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// rssBytes is a process's resident set size from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestFrontendOverloadIsBounded: with a small in-flight budget, a flood of
// concurrent requests gets 429s with Retry-After, the frontend's memory stays
// bounded, and every record it accepted is stored.
//
// The flood comes in rounds: 16 clients send the same ready-made body at one
// signal, so their bodies reach the frontend together and overlap in its
// handler whatever else the machine is doing (clients that each build their
// body and send when ready drifted apart on a loaded machine and never
// overlapped). Rounds go on until both answers were seen, within a deadline.
func TestFrontendOverloadIsBounded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Extra: map[string][]string{
		"frontend": {"-max-body-bytes", "1048576", "-max-in-flight-bytes", "2097152"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: "flood", Partitions: 3, ReplicationFactor: 3, Config: map[string]string{"min.insync.replicas": "2"}})
	fe := c.Proc("frontend")
	rss0 := rssBytes(t, fe.Pid())

	var recs []map[string]string
	for i := 0; i < 2000; i++ {
		recs = append(recs, map[string]string{"value": strings.Repeat("v", 300)})
	}
	body, err := json.Marshal(map[string]any{"records": recs})
	if err != nil {
		t.Fatal(err)
	}
	const clients = 16
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	var throttled, accepted atomic.Int64
	var mu sync.Mutex
	stored := map[string]bool{} // partition/offset of every accepted record
	var peak atomic.Int64
	send := func() {
		resp, err := hc.Post(c.FrontendURL()+"/v1/topics/flood/records?acks=all", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(data), `"error_code":89`) {
				t.Errorf("429 without Retry-After or reason: %s", data)
			}
			throttled.Add(1)
		case http.StatusOK:
			var r itest.ProduceReply
			if err := json.Unmarshal(data, &r); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, o := range r.Offsets {
				if o.ErrorCode == 0 {
					stored[fmt.Sprintf("%d/%d", o.Partition, o.Offset)] = true
				}
			}
			mu.Unlock()
			accepted.Add(1)
		default:
			t.Errorf("HTTP %d: %s", resp.StatusCode, data)
			return
		}
		if rss := rssBytes(t, fe.Pid()); rss > peak.Load() {
			peak.Store(rss)
		}
	}
	const minRounds = 3
	deadline := time.Now().Add(90 * time.Second)
	rounds := 0
	for ; rounds < minRounds || throttled.Load() == 0 || accepted.Load() == 0; rounds++ {
		if time.Now().After(deadline) || t.Failed() {
			break
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < clients; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				send()
			}()
		}
		close(start)
		wg.Wait()
	}
	t.Logf("%d rounds: accepted %d requests, throttled %d; frontend RSS %d MiB before, peak %d MiB", rounds, accepted.Load(), throttled.Load(), rss0>>20, peak.Load()>>20)
	if throttled.Load() == 0 || accepted.Load() == 0 {
		t.Fatalf("accepted %d, throttled %d: want both under this load", accepted.Load(), throttled.Load())
	}
	// 16 requests of ~0.7 MB each in flight would be ~11 MB of bodies; the
	// 2 MiB budget admits 2 at a time. Bounded means far below what an
	// unbounded frontend would hold (every request's body and batches).
	if peak.Load() > rss0+128<<20 {
		t.Fatalf("frontend RSS grew from %d to %d MiB", rss0>>20, peak.Load()>>20)
	}
	got := itest.ReadValues(t, ctx, c, "flood", 3)
	total := 0
	for p, vals := range got {
		for off := range vals {
			delete(stored, fmt.Sprintf("%d/%d", p, off))
		}
		total += len(vals)
	}
	if len(stored) != 0 {
		t.Fatalf("%d acknowledged records are not in the log", len(stored))
	}
	t.Logf("stored %d records", total)
}

// TestFrontendHTTPConsumeAndGroupRelay: a client that cannot reach storage
// nodes reads records and uses group offsets through the frontend alone.
func TestFrontendHTTPConsumeAndGroupRelay(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "web", 1, 1)
	itest.ProduceValues(t, c, "web", "w", 10)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(c.FrontendURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	var page struct {
		Records []struct {
			Offset int64  `json:"offset"`
			Value  string `json:"value"`
		} `json:"records"`
		NextOffset    int64 `json:"next_offset"`
		HighWatermark int64 `json:"high_watermark"`
	}
	status, body := get("/v1/topics/web/partitions/0/records?offset=4&max_wait_ms=100")
	if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil || len(page.Records) != 6 ||
		page.Records[0].Offset != 4 || page.Records[0].Value != "w-4" || page.NextOffset != 10 || page.HighWatermark != 10 {
		t.Fatalf("fetch through the frontend: %d %s", status, body)
	}
	if status, body := get("/v1/topics/web/partitions/0/records?offset=99"); status != 404 || !strings.Contains(body, "OFFSET_OUT_OF_RANGE") {
		t.Fatalf("out of range: %d %s", status, body)
	}
	// Group offsets through the frontend's relay to the offsets service.
	status, body = post(t, c.FrontendURL()+"/v1/groups/web-readers/offsets", "application/json", []byte(`{"offsets":[{"topic":"web","partition":0,"offset":10}]}`))
	if status != 200 {
		t.Fatalf("commit through the frontend: %d %s", status, body)
	}
	if status, body := get("/v1/groups/web-readers"); status != 200 || !strings.Contains(body, `"committed":10`) || !strings.Contains(body, `"lag":0`) {
		t.Fatalf("describe through the frontend: %d %s", status, body)
	}
}
