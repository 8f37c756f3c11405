package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/libs/tlsconf"
)

func code(err error) protocol.Code { return protocol.CodeOf(err) }

func TestProduceFetchListOffsets(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 2, nil), DefaultConfig())
	c := dial(t, s.Addr())
	for i, acks := range []int8{protocol.AcksAll, protocol.AcksLeader, protocol.AcksNone} {
		resp, err := produce(t, c, "t", 1, acks, batch(t, 10, "b"+itoa(i), 20, 1000*int64(i+1)))
		if err != nil {
			t.Fatalf("acks %d: %v", acks, err)
		}
		if resp.BaseOffset != int64(10*i) || resp.LastOffset != int64(10*i+9) {
			t.Fatalf("acks %d: offsets %d..%d", acks, resp.BaseOffset, resp.LastOffset)
		}
	}
	// Under the fsync policy the high watermark counts flushed records only;
	// acks=leader and none answered before the flush, so wait for it.
	waitHW(t, c, "t", 1, 30)
	fr, payload, err := fetch(t, c, "t", 1, 15, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	offs, vals := values(t, payload, 15)
	if fr.HighWatermark != 30 || len(offs) != 15 || offs[0] != 15 || !strings.HasPrefix(vals[0], "b1-5") {
		t.Fatalf("fetch: hw %d offsets %v vals %q", fr.HighWatermark, offs, vals)
	}
	for _, tc := range []struct {
		ts, want int64
	}{{protocol.TimestampEarliest, 0}, {protocol.TimestampLatest, 30}, {2005, 15}, {1, 0}, {99999, -1}} {
		var lr protocol.ListOffsetsResponse
		if _, err := c.Call(context.Background(), protocol.APIListOffsets, &protocol.ListOffsetsRequest{Topic: "t", Partition: 1, Timestamp: tc.ts, CurrentLeaderEpoch: -1}, nil, &lr); err != nil {
			t.Fatal(err)
		}
		if lr.Offset != tc.want {
			t.Errorf("list offsets at %d: %d, want %d", tc.ts, lr.Offset, tc.want)
		}
	}
}

func TestErrorsAreCodes(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	good := batch(t, 3, "x", 10, 1)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	cases := []struct {
		name string
		err  func() error
		want protocol.Code
	}{
		{"unknown partition", func() error { _, err := produce(t, c, "t", 7, -1, good); return err }, protocol.UnknownTopicOrPartition},
		{"unknown topic", func() error { _, _, err := fetch(t, c, "nope", 0, 0, 100, 0); return err }, protocol.UnknownTopicOrPartition},
		{"corrupt batch", func() error { _, err := produce(t, c, "t", 0, -1, corrupt); return err }, protocol.CorruptRecord},
		{"truncated batch", func() error { _, err := produce(t, c, "t", 0, -1, good[:len(good)-4]); return err }, protocol.CorruptRecord},
		{"empty produce", func() error { _, err := produce(t, c, "t", 0, -1, nil); return err }, protocol.InvalidRequest},
		{"bad acks", func() error { _, err := produce(t, c, "t", 0, 5, good); return err }, protocol.InvalidRequiredAcks},
		{"offset out of range", func() error { _, _, err := fetch(t, c, "t", 0, 1000, 100, 0); return err }, protocol.OffsetOutOfRange},
		{"zero max bytes", func() error { _, _, err := fetch(t, c, "t", 0, 0, 0, 0); return err }, protocol.InvalidFetchSize},
		{"unknown api", func() error {
			_, err := c.Call(context.Background(), protocol.APIKey(77), &protocol.FetchRequest{}, nil, nil)
			return err
		}, protocol.UnknownAPI},
	}
	for _, tc := range cases {
		if got := code(tc.err()); got != tc.want {
			t.Errorf("%s: code %v, want %v", tc.name, got, tc.want)
		}
	}
	// Nothing bad was appended and the connection still works.
	if resp, err := produce(t, c, "t", 0, -1, good); err != nil || resp.BaseOffset != 0 {
		t.Fatalf("good produce after errors: %+v %v", resp, err)
	}
}

func TestMalformedAndOversizedFramesGetAReason(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxFrameBytes = 4096
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), cfg)
	for name, frame := range map[string][]byte{
		"garbage header": append([]byte{0, 0, 0, 3}, 0xc1, 0xc1, 0xc1),
		"oversized":      binary.BigEndian.AppendUint32(nil, 1<<20),
	} {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		got, err := protocol.NewFrameReader(nc, 0).Next()
		if err != nil {
			t.Fatalf("%s: no response: %v", name, err)
		}
		var h protocol.ResponseHeader
		if err := protocol.NewDecoder().Response(got, &h); err != nil {
			t.Fatal(err)
		}
		if h.ErrorCode != protocol.MalformedFrame && h.ErrorCode != protocol.MessageTooLarge || h.ErrorMessage == "" {
			t.Fatalf("%s: response %+v", name, h)
		}
		nc.Close()
	}
}

func TestFetchLongPollWakesOnAppend(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	fetches := s.metrics.Requests.WithLabelValues(apiLabel(protocol.APIFetch))
	done := make(chan []byte, 1)
	go func() {
		_, payload, err := fetch(t, c, "t", 0, 0, 1<<20, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- payload
	}()
	// Counted as it is read: nothing blocks between there and the wait, so
	// the append below finds the fetch waiting (the answer is checked
	// either way).
	testkit.WaitFor(t, 10*time.Second, "the fetch to reach the server", func() bool { return testutil.ToFloat64(fetches) > 0 })
	if _, err := produce(t, dial(t, s.Addr()), "t", 0, 1, batch(t, 2, "late", 8, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case payload := <-done:
		if offs, _ := values(t, payload, 0); len(offs) != 2 {
			t.Fatalf("long-poll returned %d records", len(offs))
		}
	case <-time.After(8 * time.Second):
		t.Fatal("long-poll fetch did not wake on append")
	}
	// A long-poll with nothing to return answers empty when its wait ends.
	_, payload, err := fetch(t, c, "t", 0, 2, 1<<20, 100*time.Millisecond)
	if err != nil || len(payload) != 0 {
		t.Fatalf("empty long-poll: %d bytes, %v", len(payload), err)
	}
}

func TestPipelinedProducesKeepOrder(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// n produce requests written back to back before any response is read.
	const n = 200
	var out bytes.Buffer
	enc := protocol.NewEncoder()
	for i := 0; i < n; i++ {
		payload := batch(t, 1+i%3, "p"+itoa(i), 4, 1)
		h := protocol.RequestHeader{APIKey: protocol.APIProduce, CorrelationID: uint32(i)}
		prefix, err := enc.Request(&h, &protocol.ProduceRequest{Topic: "t", Acks: protocol.AcksAll, TimeoutMs: 5000}, len(payload))
		if err != nil {
			t.Fatal(err)
		}
		out.Write(prefix)
		out.Write(payload)
	}
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := nc.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	fr := protocol.NewFrameReader(nc, 0)
	dec := protocol.NewDecoder()
	bases := map[uint32]int64{}
	for len(bases) < n {
		frame, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		var h protocol.ResponseHeader
		var resp protocol.ProduceResponse
		if err := dec.Response(frame, &h); err != nil || h.ErrorCode != protocol.None {
			t.Fatalf("response %+v: %v", h, err)
		}
		if err := dec.Body(&resp); err != nil {
			t.Fatal(err)
		}
		bases[h.CorrelationID] = resp.BaseOffset
	}
	// Request i holds 1+i%3 records, so its base offset is the sum before it.
	want := int64(0)
	for i := 0; i < n; i++ {
		if bases[uint32(i)] != want {
			t.Fatalf("request %d appended at %d, want %d: pipelined order broken", i, bases[uint32(i)], want)
		}
		want += int64(1 + i%3)
	}
}

func TestConcurrentFetchesOfOneSegment(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	for i := 0; i < 50; i++ {
		if _, err := produce(t, c, "t", 0, protocol.AcksAll, batch(t, 20, "c"+itoa(i), 100, 1)); err != nil {
			t.Fatal(err)
		}
	}
	_, want, err := fetch(t, c, "t", 0, 0, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			conn := c
			if g%2 == 1 {
				conn = dial(t, s.Addr())
			}
			for k := 0; k < 20; k++ {
				_, got, err := fetch(t, conn, "t", 0, 0, 1<<30, 0)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("fetch %d/%d: %d bytes (want %d), err %v", g, k, len(got), len(want), err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func TestClientSeesConnectionLossAsRetriable(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := produce(t, c, "t", 0, 1, batch(t, 1, "x", 1, 1))
	if !storageclient.IsRetriable(err) {
		t.Fatalf("err %v is not retriable", err)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.NetworkException {
		t.Fatalf("err %v", err)
	}
}

// TestMetricsPerTopic: produce and fetch series carry the topic (and the
// acks, the reader): bytes appended and sent, requests answered, latency
// observations.
func TestMetricsPerTopic(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	b := batch(t, 10, "m", 20, 1000)
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, b); err != nil {
		t.Fatal(err)
	}
	if _, err := produce(t, c, "t", 0, protocol.AcksLeader, batch(t, 5, "n", 20, 2000)); err != nil {
		t.Fatal(err)
	}
	waitHW(t, c, "t", 0, 15)
	if _, _, err := fetch(t, c, "t", 0, 0, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	m := s.metrics
	// The fetch is counted once its records are on the socket, which is
	// after the client may have read them: wait for the count.
	testkit.WaitFor(t, 5*time.Second, "the fetch to be counted", func() bool { return testutil.ToFloat64(m.Fetched.WithLabelValues("t", "consumer")) > 0 })
	if got := testutil.ToFloat64(m.Produced.WithLabelValues("t")); got != 2 {
		t.Errorf("produce requests of t: %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.BytesIn.WithLabelValues("t")); got < float64(len(b)) {
		t.Errorf("produce bytes of t: %v, want at least %d", got, len(b))
	}
	if got := testutil.ToFloat64(m.BytesOut.WithLabelValues("t", "consumer")); got <= 0 {
		t.Errorf("fetch bytes of t to consumers: %v", got)
	}
	if got := testutil.ToFloat64(m.Fetched.WithLabelValues("t", "consumer")); got != 1 {
		t.Errorf("fetch responses of t to consumers: %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.ProduceLatency); n != 2 {
		t.Errorf("%d produce latency series, want 2 (t with acks all and leader)", n)
	}
}

// TestDescribeReplicas: the node lists its replicas of a topic (or of all)
// with role, log range, high watermark, flushed offset and size on disk.
func TestDescribeReplicas(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 2, nil), DefaultConfig())
	c := dial(t, s.Addr())
	b := batch(t, 10, "d", 20, 1000)
	if _, err := produce(t, c, "t", 1, protocol.AcksAll, b); err != nil {
		t.Fatal(err)
	}
	describe := func(topic string) []protocol.ReplicaInfo {
		t.Helper()
		var resp protocol.DescribeReplicasResponse
		if _, err := c.Call(context.Background(), protocol.APIDescribeReplicas, &protocol.DescribeReplicasRequest{Topic: topic}, nil, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Replicas
	}
	got := describe("t")
	want := []protocol.ReplicaInfo{
		{Topic: "t", Partition: 0, Leader: true, LogEndOffset: 0, HighWatermark: 0, FlushedOffset: 0, SizeBytes: 0, CleanableBytes: -1, FirstDirtyOffset: -1},
		{Topic: "t", Partition: 1, Leader: true, LogEndOffset: 10, HighWatermark: 10, FlushedOffset: 10, SizeBytes: int64(len(b)), CleanableBytes: -1, FirstDirtyOffset: -1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replicas of t:\n%+v\nwant\n%+v", got, want)
	}
	if all := describe(""); len(all) != 2 {
		t.Fatalf("all replicas: %+v", all)
	}
	if none := describe("other"); len(none) != 0 {
		t.Fatalf("replicas of a topic the node lacks: %+v", none)
	}
}

// TestConnectionsPerIPLimit: past -max-connections-per-ip a new connection
// is answered with TOO_MANY_CONNECTIONS and closed; the open ones keep
// working, and closing one makes room.
func TestConnectionsPerIPLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConnsPerIP = 2
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), cfg)
	a, b := dial(t, s.Addr()), dial(t, s.Addr())
	for _, c := range []*storageclient.Conn{a, b} {
		if _, err := produce(t, c, "t", 0, protocol.AcksLeader, batch(t, 1, "ok", 10, 1)); err != nil {
			t.Fatal(err)
		}
	}
	third := dial(t, s.Addr())
	_, err := produce(t, third, "t", 0, protocol.AcksLeader, batch(t, 1, "no", 10, 1))
	if protocol.CodeOf(err) != protocol.TooManyConnections || !strings.Contains(err.Error(), "-max-connections-per-ip") {
		t.Fatalf("third connection: %v; want TOO_MANY_CONNECTIONS naming the flag", err)
	}
	if got := testutil.ToFloat64(s.metrics.Rejected); got != 1 {
		t.Fatalf("rejected connections: %v", got)
	}
	if _, err := produce(t, a, "t", 0, protocol.AcksLeader, batch(t, 1, "still", 10, 2)); err != nil {
		t.Fatalf("an admitted connection after the refusal: %v", err)
	}
	_ = b.Close()
	testkit.Eventually(t, 5*time.Second, func() error { // room again once the server saw the close
		c, err := storageclient.Dial(context.Background(), s.Addr(), "test")
		if err == nil {
			_, err = produce(t, c, "t", 0, protocol.AcksLeader, batch(t, 1, "room", 10, 3))
			_ = c.Close()
		}
		return err
	})
}

// TestFetchQuota: a consumer over its client id's fetch quota gets no
// records and how long to wait (Kafka's throttle time); other clients are
// not slowed, and the throttled one is served again once its debt is paid.
func TestFetchQuota(t *testing.T) {
	const rate = 100_000 // bytes per second: a burst of 100 KB
	snap := snapshot("t", 1, nil)
	snap.Quotas = []cluster.Quota{{ClientID: "slow", FetchBytesPerSec: rate}}
	s, _ := startServer(t, t.TempDir(), snap, DefaultConfig())
	producer := dial(t, s.Addr())
	for i := 0; i < 3; i++ {
		if _, err := produce(t, producer, "t", 0, protocol.AcksAll, batch(t, 50, "q", 1000, int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	waitHW(t, producer, "t", 0, 150)
	slow, err := storageclient.Dial(context.Background(), s.Addr(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// Within the burst when asked: served in full, about 50 KB in debt.
	resp, payload, err := fetch(t, slow, "t", 0, 0, 1<<20, 0)
	if err != nil || len(payload) < 150_000 || resp.ThrottleMs != 0 {
		t.Fatalf("first fetch: %d bytes, throttle %d ms, %v", len(payload), resp.ThrottleMs, err)
	}
	resp, payload, err = fetch(t, slow, "t", 0, 0, 1<<20, 10*time.Millisecond)
	if err != nil || len(payload) != 0 || resp.ThrottleMs < 100 || resp.ThrottleMs > 600 {
		t.Fatalf("fetch over the quota: %d bytes, throttle %d ms, %v; want none and a wait of about half a second", len(payload), resp.ThrottleMs, err)
	}
	if resp.HighWatermark != 150 {
		t.Fatalf("throttled answer's high watermark %d", resp.HighWatermark)
	}
	if got := testutil.ToFloat64(s.metrics.QuotaThrottled); got != 1 {
		t.Fatalf("throttled fetches: %v", got)
	}
	if _, payload, err := fetch(t, producer, "t", 0, 0, 1<<20, 0); err != nil || len(payload) < 150_000 {
		t.Fatalf("another client: %d bytes, %v", len(payload), err)
	}
	// Served in full again once the debt is paid (until then each fetch is
	// answered at once, empty, with the time left).
	testkit.Eventually(t, 10*time.Second, func() error {
		if resp, payload, err := fetch(t, slow, "t", 0, 0, 1<<20, 0); err != nil || len(payload) < 150_000 || resp.ThrottleMs != 0 {
			return fmt.Errorf("after the wait: %d bytes, throttle %d ms, %v", len(payload), resp.ThrottleMs, err)
		}
		return nil
	})
}

// TestCorruptDataIsNotServed: a segment damaged on disk while the node was
// down is served up to the damage and not beyond: the fetch that reaches it
// gets KAFKA_STORAGE_ERROR and no bytes.
func TestCorruptDataIsNotServed(t *testing.T) {
	dir := t.TempDir()
	// Segments of 64 KiB indexed every 4 KiB: start-up validates only what
	// follows an older segment's last index entry, not its first batches.
	snap := snapshot("t", 1, map[string]string{cluster.ConfigSegmentBytes: "65536"})
	s, mgr := startServer(t, dir, snap, DefaultConfig())
	c := dial(t, s.Addr())
	for i := 0; i < 400; i++ {
		if _, err := produce(t, c, "t", 0, protocol.AcksAll, batch(t, 5, "c"+itoa(i), 60, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "t-0", "*.log"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	sort.Strings(segs)
	secondBase, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(segs[1]), ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(segs[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 300), 100); err != nil { // inside its first batch
		t.Fatal(err)
	}
	f.Close()

	s2, _ := startServer(t, dir, snap, DefaultConfig())
	c2 := dial(t, s2.Addr())
	waitHW(t, c2, "t", 0, 2000)
	if _, payload, err := fetch(t, c2, "t", 0, 0, 1<<20, 0); err != nil || len(payload) == 0 {
		t.Fatalf("the first, intact segment: %d bytes, %v", len(payload), err)
	}
	_, payload, err := fetch(t, c2, "t", 0, secondBase, 1<<20, 0)
	if protocol.CodeOf(err) != protocol.StorageError || len(payload) != 0 {
		t.Fatalf("fetch over the damage: %d bytes, %v; want KAFKA_STORAGE_ERROR and nothing", len(payload), err)
	}
}

// TestFetchOverTLS: with a TLS listener the fetched bytes (copied through
// the TLS layer instead of sendfile) are the ones the log holds, for fetches
// large and small; a plaintext client is not served.
func TestFetchOverTLS(t *testing.T) {
	cfg := DefaultConfig()
	_, serverTLS, clientTLS := testTLS(t)
	cfg.TLS = serverTLS
	s, mgr := startServer(t, t.TempDir(), snapshot("t", 1, nil), cfg)
	c, err := storageclient.DialTLS(context.Background(), s.Addr(), "tls-test", clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 40; i++ {
		if _, err := produce(t, c, "t", 0, protocol.AcksAll, batch(t, 50, "s"+itoa(i), 200, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitHW(t, c, "t", 0, 2000)
	r, _ := mgr.Get("t", 0)
	for _, maxBytes := range []int32{1, 64 << 10, 1 << 20} {
		_, got, err := fetch(t, c, "t", 0, 0, maxBytes, 0)
		if err != nil {
			t.Fatal(err)
		}
		sl, err := r.Log.Read(0, int(maxBytes), 2000)
		if err != nil {
			t.Fatal(err)
		}
		want, err := sl.ReadAll()
		sl.Release()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("max bytes %d: %d bytes over TLS, %d in the log (%v)", maxBytes, len(got), len(want), err)
		}
	}
	plain, err := storageclient.Dial(context.Background(), s.Addr(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, _, err := fetch(t, plain, "t", 0, 0, 1<<20, 0); err == nil {
		t.Fatal("a plaintext client was served by a TLS listener")
	}
}

// TestAuthorizeByCertificate: with Authorize the client certificate's name
// is the principal: a consume ACL lets it fetch, not produce nor replicate;
// the service name may do everything.
func TestAuthorizeByCertificate(t *testing.T) {
	dir, serverTLS, nodeTLS := testTLS(t)
	if err := tlsconf.IssueClient(dir, "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.TLS = serverTLS
	cfg.Authz = service.CertAuthz{On: true, Services: []string{"sluice-node"}}
	snap := snapshot("t", 1, nil)
	snap.Principals = []cluster.Principal{{Name: "alice", TokenSHA256: strings.Repeat("a", 64)}}
	snap.ACLs = []cluster.ACL{{Principal: "alice", Topic: "t", Operation: cluster.OpConsume}}
	s, _ := startServer(t, t.TempDir(), snap, cfg)
	svc, err := storageclient.DialTLS(context.Background(), s.Addr(), "svc", nodeTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := produce(t, svc, "t", 0, protocol.AcksAll, batch(t, 5, "svc", 10, 1)); err != nil {
		t.Fatalf("the service producing: %v", err)
	}
	aliceTLS, err := tlsconf.ClientFiles(filepath.Join(dir, tlsconf.CAFile), filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := storageclient.DialTLS(context.Background(), s.Addr(), "alice", aliceTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	waitHW(t, svc, "t", 0, 5)
	if _, payload, err := fetch(t, alice, "t", 0, 0, 1<<20, 0); err != nil || len(payload) == 0 {
		t.Fatalf("alice fetching with a consume ACL: %d bytes, %v", len(payload), err)
	}
	if _, err := produce(t, alice, "t", 0, protocol.AcksAll, batch(t, 1, "alice", 10, 2)); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed {
		t.Fatalf("alice producing without a produce ACL: %v", err)
	}
	var resp protocol.FetchResponse
	_, err = alice.Call(context.Background(), protocol.APIFetch, &protocol.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1 << 20, ReplicaID: 7,
		CurrentLeaderEpoch: -1, FlushedOffset: -1}, nil, &resp)
	if protocol.CodeOf(err) != protocol.ClusterAuthorizationFailed {
		t.Fatalf("alice fetching as a replica: %v", err)
	}
}

// TestMaxMessageBytes: a batch within the topic's max.message.bytes is
// appended; a larger one is refused with MESSAGE_TOO_LARGE and a reason, and
// nothing of it is stored.
func TestMaxMessageBytes(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, map[string]string{"max.message.bytes": "2048"}), DefaultConfig())
	c := dial(t, s.Addr())
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, batch(t, 10, "small", 100, 1)); err != nil {
		t.Fatalf("a 1 KiB batch: %v", err)
	}
	_, err := produce(t, c, "t", 0, protocol.AcksAll, batch(t, 40, "large", 100, 2))
	if code(err) != protocol.MessageTooLarge || !strings.Contains(err.Error(), "large") {
		t.Fatalf("a 4 KiB batch: %v; want MESSAGE_TOO_LARGE with a reason", err)
	}
	if resp, err := produce(t, c, "t", 0, protocol.AcksAll, batch(t, 1, "after", 100, 3)); err != nil || resp.BaseOffset != 10 {
		t.Fatalf("after the refusal: offset %d, %v; want 10", resp.BaseOffset, err)
	}
}

// TestDescribeProducers: the leader lists the producers its log of a
// partition remembers, each with its epoch, last sequence and the start of
// its open transaction; a partition it does not have is refused.
func TestDescribeProducers(t *testing.T) {
	s, _ := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	build := func(pid int64, epoch int16, seq int32, n int, txn bool) []byte {
		b := record.NewBuilder(record.CodecNone)
		b.SetProducer(pid, epoch, seq)
		b.SetTransactional(txn)
		for range n {
			b.Append(record.Record{Value: []byte("v"), Timestamp: 1000})
		}
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), out...)
	}
	for _, b := range [][]byte{build(7, 2, 0, 10, false), build(7, 2, 10, 5, false), build(3, 0, 0, 4, false), build(9, 1, 0, 3, true)} {
		if _, err := produce(t, c, "t", 0, protocol.AcksAll, b); err != nil {
			t.Fatal(err)
		}
	}
	var resp protocol.DescribeProducersResponse
	if _, err := c.Call(context.Background(), protocol.APIDescribeProducers, &protocol.DescribeProducersRequest{Topic: "t"}, nil, &resp); err != nil {
		t.Fatal(err)
	}
	want := []protocol.ProducerInfo{
		{ProducerID: 3, Epoch: 0, LastSequence: 3, CurrentTxnStartOffset: -1},
		{ProducerID: 7, Epoch: 2, LastSequence: 14, CurrentTxnStartOffset: -1},
		{ProducerID: 9, Epoch: 1, LastSequence: 2, CurrentTxnStartOffset: 19},
	}
	if !reflect.DeepEqual(resp.Producers, want) {
		t.Fatalf("producers %+v, want %+v", resp.Producers, want)
	}
	_, err := c.Call(context.Background(), protocol.APIDescribeProducers, &protocol.DescribeProducersRequest{Topic: "t", Partition: 4}, nil, &resp)
	if code(err) != protocol.UnknownTopicOrPartition && code(err) != protocol.NotLeaderOrFollower {
		t.Fatalf("a partition the node lacks: %v", err)
	}
}
