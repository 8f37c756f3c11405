package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// ProduceReply is the frontend's answer to a produce over HTTP.
type ProduceReply struct {
	Offsets []struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		ErrorCode int16  `json:"error_code"`
		Error     string `json:"error"`
	} `json:"offsets"`
}

// PostJSON posts body as JSON to url (a produce) and returns the reply; an
// error or a status other than 200 fails the test.
func PostJSON(t *testing.T, url string, body any) ProduceReply {
	t.Helper()
	r, err := TryPost(context.Background(), url, body)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return r
}

// TryPost posts body as JSON to url (a produce) and returns the reply, or
// an error for a failure or a status other than 200 (load during failures).
func TryPost(ctx context.Context, url string, body any) (ProduceReply, error) {
	var r ProduceReply
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return r, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	return r, json.Unmarshal(data, &r)
}

// ProduceOne sends one record to partition 0 with acks=all and returns its
// error code (0 on success).
func ProduceOne(ctx context.Context, url, topic, value string) (int16, error) {
	reply, err := TryPost(ctx, url+"/v1/topics/"+topic+"/records?acks=all",
		map[string]any{"records": []map[string]any{{"value": value, "partition": 0}}})
	if err != nil {
		return 0, err
	}
	if len(reply.Offsets) != 1 {
		return 0, nil
	}
	return reply.Offsets[0].ErrorCode, nil
}

// Backlog is what FillBacklog writes: PerPartition records of Size bytes to
// each of a topic's first Partitions partitions.
type Backlog struct {
	Partitions, PerPartition, Size int
}

// FillBacklog writes what backlog says to topic, each partition's records
// straight to its leader, in batches of 1000.
func FillBacklog(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, backlog Backlog) {
	t.Helper()
	partitions, perPartition, size := backlog.Partitions, backlog.PerPartition, backlog.Size
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("backlog")
	defer pool.Close()
	value := make([]byte, size)
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		addr, err := meta.Leader(ctx, topic, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pool.Get(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(p int32) {
			defer wg.Done()
			b := record.NewBuilder(record.CodecNone)
			var resp protocol.ProduceResponse
			for sent := 0; sent < perPartition; sent += 1000 {
				b.Reset()
				for i := 0; i < 1000; i++ {
					b.Append(record.Record{Value: value, Timestamp: time.Now().UnixMilli()})
				}
				batch, err := b.Build()
				if err != nil {
					t.Error(err)
					return
				}
				req := &protocol.ProduceRequest{Topic: topic, Partition: p, Acks: protocol.AcksLeader, TimeoutMs: 10000}
				if _, err := conn.Call(ctx, protocol.APIProduce, req, batch, &resp); err != nil {
					t.Error(err)
					return
				}
			}
		}(int32(p))
	}
	wg.Wait()
}

// ProduceValues sends records with values prefix-0..prefix-(n-1) through the
// frontend with acks=all and returns the values.
func ProduceValues(t *testing.T, c *localcluster.Cluster, topic, prefix string, n int) []string {
	t.Helper()
	return ProduceInRequests(t, c, topic, prefix, n, 500)
}

// ProduceInRequests is ProduceValues with perRequest records per request.
func ProduceInRequests(t *testing.T, c *localcluster.Cluster, topic, prefix string, n, perRequest int) []string {
	t.Helper()
	var values []string
	for start := 0; start < n; start += perRequest {
		var recs []map[string]string
		for i := start; i < min(start+perRequest, n); i++ {
			v := fmt.Sprintf("%s-%d", prefix, i)
			values = append(values, v)
			recs = append(recs, map[string]string{"key": v, "value": v})
		}
		r := PostJSON(t, c.FrontendURL()+"/v1/topics/"+topic+"/records?acks=all", map[string]any{"records": recs})
		for _, o := range r.Offsets {
			if o.ErrorCode != 0 {
				t.Fatalf("produce: %s", o.Error)
			}
		}
	}
	return values
}

// ReadValues reads every partition of topic back from the local cluster.
func ReadValues(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions int) map[int32][]string {
	t.Helper()
	return loadcheck.ReadValues(t, ctx, c.MetadataURLs(), topic, partitions)
}

// QuietProducer is an SDK producer to frontends with a 2 ms linger and a
// 5 s request timeout.
func QuietProducer(t *testing.T, frontends []string) *client.Producer {
	t.Helper()
	cfg := client.DefaultProducerConfig()
	cfg.Frontends = frontends
	cfg.Linger = 2 * time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
