package replica

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

func snap(version uint64, topics ...cluster.Topic) *cluster.Snapshot {
	return &cluster.Snapshot{Version: version, Topics: topics}
}

func topic(name string, replicas ...[]int32) cluster.Topic {
	t := cluster.Topic{Name: name, ReplicationFactor: len(replicas[0]), Config: map[string]string{"segment.bytes": "4096"}}
	for i, r := range replicas {
		t.Partitions = append(t.Partitions, cluster.Partition{ID: int32(i), Replicas: r, Leader: r[0], ISR: r})
	}
	return t
}

func TestApplyOpensAndDeletesReplicas(t *testing.T) {
	dir := t.TempDir()
	// A directory left from a topic deleted while the node was down.
	if err := os.MkdirAll(filepath.Join(dir, "gone-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(dir, 2, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Node 2 holds a-1 (leader) and b-0 (follower), not a-0.
	if err := m.Apply(snap(1, topic("a", []int32{1}, []int32{2, 1}), topic("b", []int32{1, 2})), true); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get("a", 0); protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("a-0: %v", err)
	}
	a1, err := m.Get("a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a1.CheckLeader(2); err != nil {
		t.Fatal(err)
	}
	b0, err := m.Get("b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b0.CheckLeader(2); protocol.CodeOf(err) != protocol.NotLeaderOrFollower {
		t.Fatalf("follower accepted leadership check: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stray directory kept: %v", err)
	}
	// Topic b deleted: its log directory goes.
	if err := m.Apply(snap(2, topic("a", []int32{1}, []int32{2, 1})), true); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get("b", 0); err == nil {
		t.Fatal("deleted topic still served")
	}
	if _, err := os.Stat(filepath.Join(dir, "b-0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deleted topic's directory kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a-1")); err != nil {
		t.Fatalf("live replica directory: %v", err)
	}
}

func TestParseDirName(t *testing.T) {
	for name, want := range map[string]Key{"orders-0": {"orders", 0}, "my-topic-12": {"my-topic", 12}} {
		if k, ok := parseDirName(name); !ok || k != want {
			t.Errorf("%s: %v %v", name, k, ok)
		}
	}
	for _, bad := range []string{"orders", "-1", "orders-x", "lost+found"} {
		if _, ok := parseDirName(bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestRecreatedTopicGetsAFreshLog(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(dir, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	old := topic("t", []int32{1})
	old.ID = "id-1"
	if err := m.Apply(snap(1, old), true); err != nil {
		t.Fatal(err)
	}
	r, _ := m.Get("t", 0)
	if _, err := r.Log.Append(testBatch(t), 0); err != nil {
		t.Fatal(err)
	}
	// Deleted and created again between two snapshots this node saw.
	fresh := topic("t", []int32{1})
	fresh.ID = "id-2"
	if err := m.Apply(snap(3, fresh), true); err != nil {
		t.Fatal(err)
	}
	r, _ = m.Get("t", 0)
	if r.Log.EndOffset() != 0 {
		t.Fatalf("recreated topic sees %d old records", r.Log.EndOffset())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// The same holds for a directory found on disk at start-up.
	if _, err := checkTopicID(filepath.Join(dir, "t-0"), "id-2"); err != nil {
		t.Fatal(err)
	}
	if stale, err := checkTopicID(filepath.Join(dir, "t-0"), "id-3"); err != nil || !stale {
		t.Fatalf("stale %v err %v", stale, err)
	}
}

func TestApplyNeverDeletesAssignedOrUnconfirmedData(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(dir, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tp := topic("t", []int32{1})
	if err := m.Apply(snap(1, tp), true); err != nil {
		t.Fatal(err)
	}
	r, _ := m.Get("t", 0)
	if _, err := r.Log.Append(testBatch(t), 0); err != nil {
		t.Fatal(err)
	}
	// A config key this node does not know (a newer metadata service): an
	// error, but the partition and its data stay.
	odd := topic("t", []int32{1})
	odd.Config["future.key"] = "1"
	if err := m.Apply(snap(2, odd), true); err == nil {
		t.Fatal("unknown config key accepted silently")
	}
	if r, err := m.Get("t", 0); err != nil || r.Log.EndOffset() != 1 {
		t.Fatalf("partition after a config it cannot read: %v", err)
	}
	// A snapshot without the topic that is not known to be current deletes nothing.
	if err := m.Apply(snap(3), false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get("t", 0); err != nil {
		t.Fatalf("unconfirmed snapshot deleted a replica: %v", err)
	}
}

func TestEmptyTopicIDFileIsRewrittenNotTrusted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A crash left the id file empty.
	if err := os.WriteFile(filepath.Join(dir, topicIDFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stale, err := checkTopicID(dir, "abc")
	if err != nil || stale {
		t.Fatalf("stale %v err %v", stale, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000000.log")); err != nil {
		t.Fatalf("data deleted on an empty id file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, topicIDFile)); string(b) != "topic_id: abc\n" {
		t.Fatalf("id file %q", b)
	}
}

// TestFsyncsCountDeletedReplicas: the node's fsync count includes what
// deleted replicas' logs did, so the exported counter never goes back.
func TestFsyncsCountDeletedReplicas(t *testing.T) {
	m, err := NewManager(t.TempDir(), 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Apply(snap(1, topic("a", []int32{1}), topic("b", []int32{1})), true); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		r, err := m.Get(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		info, err := r.Log.Append(testBatch(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Log.WaitFlushed(context.Background(), info.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	before := m.Fsyncs()
	if before < 2 {
		t.Fatalf("%d fsyncs after two flushed appends", before)
	}
	if err := m.Apply(snap(2, topic("a", []int32{1})), true); err != nil {
		t.Fatal(err)
	}
	if after := m.Fsyncs(); after < before {
		t.Fatalf("fsync count went back from %d to %d when b was deleted", before, after)
	}
}

// TestCollectorExportsLogs: the collector reports each partition's segments,
// size, offsets, high watermark and role as the log has them, and counts the
// segments retention deleted.
func TestCollectorExportsLogs(t *testing.T) {
	m, err := NewManager(t.TempDir(), 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tp := topic("a", []int32{1})
	tp.Config["retention.bytes"] = "8192"
	if err := m.Apply(snap(1, tp), true); err != nil {
		t.Fatal(err)
	}
	r, err := m.Get("a", 0)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 3000)
	for i := 0; i < 10; i++ { // about one 4 KiB segment each
		b := record.NewBuilder(record.CodecNone)
		b.Append(record.Record{Value: big, Timestamp: 1})
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Log.Append(append([]byte(nil), batch...), 0); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(m))
	values := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
				out[mf.GetName()] = v
			}
		}
		return out
	}
	got := values()
	if got["sluice_storage_log_segments"] != float64(r.Log.Segments()) || got["sluice_storage_log_segments"] < 5 ||
		got["sluice_storage_log_end_offset"] != 10 || got["sluice_storage_log_start_offset"] != 0 ||
		got["sluice_storage_log_size_bytes"] != float64(r.Log.Size()) || got["sluice_storage_partition_leader"] != 1 ||
		got["sluice_storage_retention_deleted_segments_total"] != 0 {
		t.Fatalf("before retention: %v", got)
	}
	r.Log.SetHighWatermark(r.Log.EndOffset()) // retention keeps what is not committed
	m.RunRetention(time.Now())
	after := values()
	if after["sluice_storage_retention_deleted_segments_total"] < 1 || after["sluice_storage_log_start_offset"] <= 0 ||
		after["sluice_storage_log_segments"] >= got["sluice_storage_log_segments"] {
		t.Fatalf("after retention: %v (before %v)", after, got)
	}
}
