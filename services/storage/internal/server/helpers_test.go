package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/libs/tlsconf"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// snapshot places partitions 0..n-1 of topic on node 1 (the leader).
func snapshot(topic string, n int, config map[string]string) *cluster.Snapshot {
	t := cluster.Topic{Name: topic, ReplicationFactor: 1, Config: config}
	for i := 0; i < n; i++ {
		t.Partitions = append(t.Partitions, cluster.Partition{ID: int32(i), Replicas: []int32{1}, Leader: 1, ISR: []int32{1}})
	}
	return &cluster.Snapshot{Version: 1, Nodes: []cluster.Node{{ID: 1, Addr: "x", Alive: true}}, Topics: []cluster.Topic{t}}
}

// startServer runs a node-1 server over dir with the snapshot applied.
func startServer(t testing.TB, dir string, snap *cluster.Snapshot, cfg Config) (*Server, *replica.Manager) {
	t.Helper()
	mgr, err := replica.NewManager(dir, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Apply(snap, true); err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	s, err := New(cfg, mgr, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		_ = mgr.Close()
	})
	return s, mgr
}

func dial(t testing.TB, addr string) *storageclient.Conn {
	t.Helper()
	c, err := storageclient.Dial(context.Background(), addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// batch builds a batch of n records with values "prefix-i" of the given size.
func batch(t testing.TB, n int, prefix string, size int, ts int64) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	for i := 0; i < n; i++ {
		v := make([]byte, size)
		copy(v, prefix+"-"+itoa(i))
		b.Append(record.Record{Key: []byte(prefix), Value: v, Timestamp: ts + int64(i)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func produce(t testing.TB, c *storageclient.Conn, topic string, p int32, acks int8, payload []byte) (protocol.ProduceResponse, error) {
	t.Helper()
	var resp protocol.ProduceResponse
	_, err := c.Call(context.Background(), protocol.APIProduce, &protocol.ProduceRequest{Topic: topic, Partition: p, Acks: acks, TimeoutMs: 5000}, payload, &resp)
	return resp, err
}

func fetch(t testing.TB, c *storageclient.Conn, topic string, p int32, offset int64, maxBytes int32, wait time.Duration) (protocol.FetchResponse, []byte, error) {
	t.Helper()
	var resp protocol.FetchResponse
	res, err := c.Call(context.Background(), protocol.APIFetch, &protocol.FetchRequest{Topic: topic, Partition: p, Offset: offset, MaxBytes: maxBytes,
		MaxWaitMs: int32(wait.Milliseconds()), MinBytes: 1, ReplicaID: -1}, nil, &resp)
	return resp, res.Payload, err
}

// values decodes the records of fetched bytes.
func values(t testing.TB, payload []byte, from int64) (offsets []int64, vals []string) {
	t.Helper()
	it := record.NewIterator(payload)
	it.SetStartOffset(from)
	for it.Next() {
		r := it.Record()
		offsets = append(offsets, r.Offset)
		vals = append(vals, string(r.Value))
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return offsets, vals
}

// waitHW polls ListOffsets(latest) until the high watermark reaches want.
func waitHW(t testing.TB, c *storageclient.Conn, topic string, p int32, want int64) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() error {
		var lr protocol.ListOffsetsResponse
		_, err := c.Call(context.Background(), protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: topic, Partition: p, Timestamp: protocol.TimestampLatest, CurrentLeaderEpoch: -1}, nil, &lr)
		if err != nil || lr.Offset < want {
			return fmt.Errorf("high watermark stuck at %d (want %d): %v", lr.Offset, want, err)
		}
		return nil
	})
}

// appendVisible appends directly to a replica's log, flushes, and moves its
// high watermark, as a produce with acks=all would.
func appendVisible(t testing.TB, r *replica.Replica, payload []byte) {
	t.Helper()
	info, err := r.Log.Append(payload, r.State().LeaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Log.WaitFlushed(context.Background(), info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	r.Progressed()
}

// testTLS writes a development CA and certificates for 127.0.0.1 (as make
// certs does) and returns their directory, the node's server configuration
// (client certificates required) and its client configuration.
func testTLS(tb testing.TB) (dir string, server, client *tls.Config) {
	tb.Helper()
	dir = tb.TempDir()
	if err := tlsconf.Generate(dir, []string{"127.0.0.1"}, time.Hour); err != nil {
		tb.Fatal(err)
	}
	server, client, err := tlsconf.Files{CertFile: filepath.Join(dir, tlsconf.NodeCertFile), KeyFile: filepath.Join(dir, tlsconf.NodeKeyFile),
		CAFile: filepath.Join(dir, tlsconf.CAFile)}.Load()
	if err != nil {
		tb.Fatal(err)
	}
	return dir, server, client
}
