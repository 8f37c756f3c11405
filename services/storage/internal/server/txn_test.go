package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// txnBatch builds a transactional producer's batch of n records valued
// "<prefix>-i".
func txnBatch(t testing.TB, pid int64, seq int32, n int, prefix string) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	b.SetProducer(pid, 0, seq)
	b.SetTransactional(true)
	for i := range n {
		b.Append(record.Record{Value: []byte(prefix + "-" + itoa(i)), Timestamp: 1})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// markVisible appends a transaction marker to a replica's log as its
// coordinator would, and makes it visible.
func markVisible(t testing.TB, r *replica.Replica, pid int64, typ record.ControlType) {
	t.Helper()
	info, err := r.Log.AppendMarker(pid, 0, record.Marker{Type: typ}, r.State().LeaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Log.WaitFlushed(context.Background(), info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	r.Progressed()
}

func fetchAt(t testing.TB, c *storageclient.Conn, offset int64, isolation int8) (protocol.FetchResponse, []string) {
	t.Helper()
	var resp protocol.FetchResponse
	res, err := c.Call(context.Background(), protocol.APIFetch, &protocol.FetchRequest{Topic: "t", Offset: offset, MaxBytes: 1 << 20,
		MaxWaitMs: 0, ReplicaID: -1, CurrentLeaderEpoch: -1, FlushedOffset: -1, Isolation: isolation}, nil, &resp)
	if err != nil {
		t.Fatal(err)
	}
	it := record.NewIterator(res.Payload)
	it.SetStartOffset(offset)
	if isolation == protocol.ReadCommitted {
		it.SetAborted(resp.Aborted)
	}
	var vals []string
	for it.Next() {
		vals = append(vals, string(it.Record().Value))
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return resp, vals
}

// TestFetchReadCommitted: over the storage protocol, a read_committed fetch
// stops at the last stable offset and lists the aborted transactions of
// what it read, so the reader drops them; read_uncommitted sees every
// record; both are told the LSO; ListOffsets(latest) is the LSO at
// read_committed and the high watermark otherwise; and the LSO moves on
// when the open transaction commits.
func TestFetchReadCommitted(t *testing.T) {
	s, mgr := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	r, err := mgr.Leader("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	appendVisible(t, r, txnBatch(t, 1, 0, 2, "committed")) // 0-1
	appendVisible(t, r, txnBatch(t, 2, 0, 2, "aborted"))   // 2-3
	markVisible(t, r, 1, record.ControlCommit)             // 4
	markVisible(t, r, 2, record.ControlAbort)              // 5
	appendVisible(t, r, batch(t, 1, "plain", 7, 1))        // 6
	appendVisible(t, r, txnBatch(t, 3, 0, 2, "open"))      // 7-8
	appendVisible(t, r, batch(t, 1, "after", 7, 1))        // 9
	c := dial(t, s.Addr())

	resp, vals := fetchAt(t, c, 0, protocol.ReadCommitted)
	want := []string{"committed-0", "committed-1", "plain-0"}
	if !slices.Equal(vals, want) || resp.LastStableOffset != 7 || resp.HighWatermark != 10 ||
		!slices.Equal(resp.Aborted, []protocol.AbortedTxn{{ProducerID: 2, FirstOffset: 2}}) {
		t.Fatalf("read_committed: %q, LSO %d, HW %d, aborted %v; want %q, LSO 7, HW 10, producer 2 from 2",
			vals, resp.LastStableOffset, resp.HighWatermark, resp.Aborted, want)
	}
	if resp, vals := fetchAt(t, c, 6, protocol.ReadCommitted); !slices.Equal(vals, want[2:]) || len(resp.Aborted) != 0 {
		t.Fatalf("read_committed from 6: %q, aborted %v", vals, resp.Aborted)
	}
	if resp, vals := fetchAt(t, c, 7, protocol.ReadCommitted); len(vals) != 0 || resp.LastStableOffset != 7 {
		t.Fatalf("read_committed at the LSO: %q, LSO %d", vals, resp.LastStableOffset)
	}
	resp, vals = fetchAt(t, c, 0, protocol.ReadUncommitted)
	if len(vals) != 8 || resp.LastStableOffset != 7 || resp.Aborted != nil {
		t.Fatalf("read_uncommitted: %q, LSO %d, aborted %v", vals, resp.LastStableOffset, resp.Aborted)
	}
	waitHW(t, c, "t", 0, 10)
	for isolation, want := range map[int8]int64{protocol.ReadUncommitted: 10, protocol.ReadCommitted: 7} {
		var lr protocol.ListOffsetsResponse
		_, err := c.Call(context.Background(), protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: "t", Timestamp: protocol.TimestampLatest,
			CurrentLeaderEpoch: -1, Isolation: isolation}, nil, &lr)
		if err != nil || lr.Offset != want {
			t.Fatalf("ListOffsets(latest) at isolation %d: %d, %v; want %d", isolation, lr.Offset, err, want)
		}
	}

	// The SDK's partition reader at read_committed reads what the fetch
	// allows and drops the aborted transaction.
	meta := fakecluster.NewMetadata(cluster.Node{ID: 1, Addr: s.Addr(), Alive: true})
	defer meta.Close()
	meta.AddTopic("t", 1)
	pool := storageclient.NewPool("test")
	defer pool.Close()
	reader := client.NewPartitionReader(client.NewMetadata(client.NewAdmin([]string{meta.URL()})), pool, "t", 0, 0,
		client.ReaderConfig{Isolation: protocol.ReadCommitted, MaxWait: time.Millisecond})
	var got []string
	for range 3 {
		recs, err := reader.Fetch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			got = append(got, string(rec.Value))
		}
	}
	if !slices.Equal(got, want) || reader.LastStableOffset() != 7 || reader.Offset() != 7 {
		t.Fatalf("SDK reader at read_committed: %q, LSO %d, offset %d; want %q, 7, 7", got, reader.LastStableOffset(), reader.Offset(), want)
	}

	markVisible(t, r, 3, record.ControlCommit) // 10
	testkit.Eventually(t, 5*time.Second, func() error {
		if resp, vals = fetchAt(t, c, 6, protocol.ReadCommitted); resp.LastStableOffset != 11 {
			return fmt.Errorf("after the commit: %q (LSO %d), want LSO 11", vals, resp.LastStableOffset)
		}
		return nil
	})
	if want := []string{"plain-0", "open-0", "open-1", "after-0"}; !slices.Equal(vals, want) {
		t.Fatalf("after the commit: %q (LSO %d), want %q", vals, resp.LastStableOffset, want)
	}
}

func writeMarker(t testing.TB, c *storageclient.Conn, pid int64, epoch int16, commit bool) (protocol.WriteTxnMarkerResponse, error) {
	t.Helper()
	var resp protocol.WriteTxnMarkerResponse
	_, err := c.Call(context.Background(), protocol.APIWriteTxnMarker, &protocol.WriteTxnMarkerRequest{Topic: "t", ProducerID: pid,
		ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: 1, TimeoutMs: 5000}, nil, &resp)
	return resp, err
}

// TestWriteTxnMarker: the coordinator's marker API appends the marker once
// the partition's replicas have it, ending the transaction for
// read_committed readers; a marker of a fenced epoch is refused with
// INVALID_PRODUCER_EPOCH; a produced control batch is INVALID_RECORD.
func TestWriteTxnMarker(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, txnBatch(t, 4, 0, 3, "txn")); err != nil {
		t.Fatal(err)
	}
	if resp, vals := fetchAt(t, c, 0, protocol.ReadCommitted); len(vals) != 0 || resp.LastStableOffset != 0 {
		t.Fatalf("before the marker: %q, LSO %d", vals, resp.LastStableOffset)
	}
	m, err := writeMarker(t, c, 4, 1, true) // version 2: the next epoch
	if err != nil || m.Offset != 3 {
		t.Fatalf("marker: %+v, %v", m, err)
	}
	if resp, vals := fetchAt(t, c, 0, protocol.ReadCommitted); len(vals) != 3 || resp.LastStableOffset != 4 {
		t.Fatalf("after the marker: %q, LSO %d", vals, resp.LastStableOffset)
	}
	if _, err := writeMarker(t, c, 4, 0, false); protocol.CodeOf(err) != protocol.InvalidProducerEpoch {
		t.Fatalf("stale marker: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, txnBatch(t, 4, 0, 3, "zombie")); protocol.CodeOf(err) != protocol.InvalidProducerEpoch {
		t.Fatalf("late write of the ended transaction: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	marker, err := record.BuildMarker(4, 1, record.Marker{Type: record.ControlCommit}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, marker); protocol.CodeOf(err) != protocol.InvalidRecord {
		t.Fatalf("produced control batch: %v, want INVALID_RECORD", err)
	}
}

// TestWriteTxnMarkers: the coordinator's batched marker API appends the
// markers of several transactions, each partition's in one append in the
// request's order, and answers each marker: its offset, or its own
// refusal (a partition the node does not have, a fenced epoch) without
// failing the others.
func TestWriteTxnMarkers(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 2, nil), DefaultConfig())
	c := dial(t, s.Addr())
	for _, p := range []struct {
		pid       int64
		partition int32
	}{{4, 0}, {5, 0}, {6, 1}} {
		if _, err := produce(t, c, "t", p.partition, protocol.AcksAll, txnBatch(t, p.pid, 0, 2, "txn")); err != nil {
			t.Fatal(err)
		}
	}
	call := func(ms ...protocol.TxnMarker) []protocol.TxnMarkerResult {
		t.Helper()
		var resp protocol.WriteTxnMarkersResponse
		if _, err := c.Call(context.Background(), protocol.APIWriteTxnMarkers, &protocol.WriteTxnMarkersRequest{Markers: ms, TimeoutMs: 5000}, nil, &resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) != len(ms) {
			t.Fatalf("%d results for %d markers", len(resp.Results), len(ms))
		}
		return resp.Results
	}
	res := call(
		protocol.TxnMarker{Topic: "t", Partition: 0, ProducerID: 4, ProducerEpoch: 1, Commit: true},
		protocol.TxnMarker{Topic: "t", Partition: 1, ProducerID: 6, ProducerEpoch: 1},
		protocol.TxnMarker{Topic: "t", Partition: 0, ProducerID: 5, ProducerEpoch: 1, Commit: true},
		protocol.TxnMarker{Topic: "gone", Partition: 0, ProducerID: 7, ProducerEpoch: 1},
	)
	// t-0 holds 4 records (offsets 0-3): its two markers follow at 4 and 5;
	// t-1 holds 2: its marker is at 2.
	for i, want := range []int64{4, 2, 5} {
		if res[i].Err != nil || res[i].Offset != want {
			t.Fatalf("marker %d: %+v, want offset %d", i, res[i], want)
		}
	}
	if protocol.CodeOf(res[3].Err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("marker of a partition the node lacks: %+v, want UNKNOWN_TOPIC_OR_PARTITION", res[3])
	}
	if resp, vals := fetchAt(t, c, 0, protocol.ReadCommitted); len(vals) != 4 || resp.LastStableOffset != 6 {
		t.Fatalf("t-0 after the markers: %q, LSO %d", vals, resp.LastStableOffset)
	}
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, txnBatch(t, 8, 0, 1, "txn")); err != nil {
		t.Fatal(err)
	}
	res = call(
		protocol.TxnMarker{Topic: "t", Partition: 0, ProducerID: 4, ProducerEpoch: 0}, // fenced: epoch 1 ended it
		protocol.TxnMarker{Topic: "t", Partition: 0, ProducerID: 8, ProducerEpoch: 1, Commit: true},
	)
	if protocol.CodeOf(res[0].Err) != protocol.InvalidProducerEpoch {
		t.Fatalf("fenced marker: %+v, want INVALID_PRODUCER_EPOCH", res[0])
	}
	if res[1].Err != nil || res[1].Offset != 7 {
		t.Fatalf("the marker beside the fenced one: %+v, want offset 7", res[1])
	}
}
