package itest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// SendBadKafkaInput sends every kind of bad request to a Kafka listener: each
// is answered with Kafka's error or closes its connection, and a request
// after them on a fresh connection is served.
func SendBadKafkaInput(t *testing.T, addr string) {
	t.Helper()
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	header := func(key, version int16, corr int32) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	closes := func(what string, payload []byte) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		defer conn.Close()
		_, _ = conn.Write(payload)
		if tc, ok := conn.(*net.TCPConn); ok && strings.HasPrefix(what, "truncated") {
			_ = tc.CloseWrite() // the rest of the frame never comes
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		// Closed without an answer: an EOF, or a reset when bytes the
		// listener never read were still queued.
		if n, err := io.Copy(io.Discard, conn); n != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%s on %s: the connection was not closed without an answer (%d bytes, %v)", what, addr, n, err)
		}
	}
	closes("garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	closes("oversized frame", binary.BigEndian.AppendUint32(nil, 1<<30))
	closes("negative size", binary.BigEndian.AppendUint32(nil, 0xfffffff0))
	closes("truncated frame", append(binary.BigEndian.AppendUint32(nil, 500), header(18, 0, 1)...))
	closes("unknown api key", frame(header(9999, 0, 2)))
	closes("unsupported version", frame(header(3, 99, 3)))
	closes("malformed body", frame(append(header(3, 1, 4), 0x7f, 0xff, 0xff, 0xff)))

	// ApiVersions at a version from the future: answered in the v0 format
	// with UNSUPPORTED_VERSION (35), as Kafka does (KIP-511).
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(frame(append(header(18, 77, 5), 0))); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("ApiVersions v77 on %s: no answer: %v", addr, err)
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, resp); err != nil {
		t.Fatal(err)
	}
	if corr, code := binary.BigEndian.Uint32(resp), binary.BigEndian.Uint16(resp[4:]); corr != 5 || code != 35 {
		t.Fatalf("ApiVersions v77 on %s: correlation %d, error %d; want 5 and UNSUPPORTED_VERSION (35)", addr, corr, code)
	}
}

// ProduceAll produces every record through cl at once and waits for them;
// any failure ends the test with the count and the first error.
func ProduceAll(t *testing.T, ctx context.Context, cl *kgo.Client, recs []*kgo.Record, what string) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for _, r := range recs {
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d Kafka records failed %s, first: %v", len(failed), len(recs), what, failed[0])
	}
}

// FranzClient is a franz-go client seeded with the cluster's Kafka
// listeners; it is closed when the test ends.
func FranzClient(t *testing.T, c *localcluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// PollValues polls cl until it has want records or wait passes, and
// returns their values.
func PollValues(t *testing.T, ctx context.Context, cl *kgo.Client, want int, wait time.Duration) []string {
	t.Helper()
	var out []string
	deadline := time.Now().Add(wait)
	for len(out) < want && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Until(deadline))
		fs := cl.PollFetches(pctx)
		cancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s-%d: %v", e.Topic, e.Partition, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// CountPrefix counts the values that start with prefix.
func CountPrefix(values []string, prefix string) int {
	n := 0
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			n++
		}
	}
	return n
}
