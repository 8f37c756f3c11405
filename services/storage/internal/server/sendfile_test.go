package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/zerocopy"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// helperEnv makes the test binary act as a storage server for the strace test.
const helperEnv = "SLUICE_SENDFILE_HELPER_DIR"

// fillBytes is how much record data the sendfile test fetches.
const fillBytes = 8 << 20

// TestSendfileHelperProcess is not a test: run by TestFetchUsesSendfile under
// strace, it serves a partition holding fillBytes of records until stdin closes.
func TestSendfileHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestFetchUsesSendfile")
	}
	s, mgr := startServer(t, dir, snapshot("t", 1, nil), DefaultConfig())
	r, err := mgr.Get("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	for r.Log.Size() < fillBytes {
		appendVisible(t, r, batch(t, 64, "s", 1000, 1))
	}
	fmt.Printf("ADDR %s %d\n", s.Addr(), r.Log.Size())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

var straceLine = regexp.MustCompile(`^\d+\s+(\w+)\(.*\)\s+=\s+(-?\d+)`)

// TestFetchUsesSendfile proves that fetched record bytes leave the storage
// server through sendfile(2), not write(2): it runs a server under strace,
// fetches every byte of a partition, and sums the bytes each syscall moved.
func TestFetchUsesSendfile(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		// make test installs it first (tools/scripts/test-deps.sh).
		t.Fatal("strace is not installed: run `make test-deps` (as root), or `sudo apt-get install -y strace`")
	}
	dir := t.TempDir()
	traceFile := filepath.Join(dir, "trace.txt")
	cmd := exec.Command(strace, "-f", "-qq", "-e", "trace=sendfile,write,writev", "-o", traceFile,
		os.Args[0], "-test.run=^TestSendfileHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+filepath.Join(dir, "data"))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var addr string
	var size int64
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "ADDR" {
			addr = f[1]
			size, _ = strconv.ParseInt(f[2], 10, 64)
			break
		}
	}
	if addr == "" {
		t.Fatal("helper did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	c := dial(t, addr)
	var fetched int64
	offset := int64(0)
	for {
		_, payload, err := fetch(t, c, "t", 0, offset, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(payload) == 0 {
			break
		}
		offs, _ := values(t, payload, offset)
		offset = offs[len(offs)-1] + 1
		fetched += int64(len(payload))
	}
	if fetched != size {
		t.Fatalf("fetched %d bytes of %d", fetched, size)
	}
	_ = stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("helper did not exit")
	}
	data, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	moved := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := straceLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			if n > 0 {
				moved[m[1]] += n
			}
		}
	}
	t.Logf("bytes moved: sendfile %d, write %d, writev %d (record data %d)", moved["sendfile"], moved["write"], moved["writev"], size)
	if moved["sendfile"] < size {
		t.Fatalf("sendfile moved %d bytes, less than the %d fetched", moved["sendfile"], size)
	}
	// Headers and the segment appends (the helper wrote the log itself)
	// go through write; fetches must not add the record data again.
	if copied := moved["write"] + moved["writev"]; copied > size+size/4 {
		t.Fatalf("write/writev moved %d bytes: record data was copied through user space", copied)
	}
}

// BenchmarkFetchSendfile measures fetch throughput over loopback: 1 MiB fetches
// of a 64 MiB partition, record bytes sent by sendfile.
func BenchmarkFetchSendfile(b *testing.B) { benchmarkFetch(b, false) }

// BenchmarkFetchTLS is BenchmarkFetchSendfile over TLS (mutual, ECDSA P-256,
// AES-GCM as negotiated): the records are read into user space, encrypted
// and written, and the client decrypts them. The gap to BenchmarkFetchSendfile
// is what TLS costs the fetch path.
func BenchmarkFetchTLS(b *testing.B) { benchmarkFetch(b, true) }

func benchmarkFetch(b *testing.B, useTLS bool) {
	cfg := DefaultConfig()
	var clientTLS *tls.Config
	if useTLS {
		_, cfg.TLS, clientTLS = testTLS(b)
	}
	s, mgr := startServer(b, b.TempDir(), snapshot("t", 1, nil), cfg)
	r, _ := mgr.Get("t", 0)
	chunk := batch(b, 64, "f", 1000, 1)
	for r.Log.Size() < 64<<20 {
		appendVisible(b, r, append([]byte(nil), chunk...))
	}
	c, err := storageclient.DialTLS(context.Background(), s.Addr(), "bench", clientTLS)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	end := r.Log.EndOffset()
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	offset := int64(0)
	var resp protocol.FetchResponse
	for i := 0; i < b.N; i++ {
		req := &protocol.FetchRequest{Topic: "t", Offset: offset, MaxBytes: 1 << 20, ReplicaID: -1}
		res, err := c.Call(context.Background(), protocol.APIFetch, req, nil, &resp)
		if err != nil {
			b.Fatal(err)
		}
		offset = nextOffset(res.Payload, offset)
		res.Release() // a consumer reuses its buffers; so does this one
		if offset >= end {
			offset = 0
		}
	}
}

// nextOffset walks batch headers only (no record decoding) to find the offset
// after the payload.
func nextOffset(payload []byte, cur int64) int64 {
	for len(payload) >= 61 {
		base := int64(beUint64(payload[0:]))
		n := int(beUint32(payload[8:])) + 12
		last := base + int64(beUint32(payload[23:]))
		cur = last + 1
		if n > len(payload) {
			break
		}
		payload = payload[n:]
	}
	return cur
}

func beUint64(b []byte) uint64 { return uint64(beUint32(b))<<32 | uint64(beUint32(b[4:])) }
func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// BenchmarkRawSendfile is the physical limit for BenchmarkFetchSendfile: the
// same 1 MiB ranges of a 64 MiB file sent with sendfile over loopback to a
// reader that discards them, with no protocol at all. The file is written the
// way the log writes a segment (one write per ~64 KiB batch), because the
// kernel's page-cache folios, and with them sendfile's cost, depend on the
// write size: see BenchmarkRawSendfileLargeWrites.
func BenchmarkRawSendfile(b *testing.B) {
	chunk := batch(b, 64, "f", 1000, 1)
	benchRawSendfile(b, chunk)
}

// BenchmarkRawSendfileLargeWrites is BenchmarkRawSendfile over a file written
// in 1 MiB writes.
func BenchmarkRawSendfileLargeWrites(b *testing.B) {
	benchRawSendfile(b, make([]byte, 1<<20))
}

func benchRawSendfile(b *testing.B, chunk []byte) {
	f, err := os.CreateTemp(b.TempDir(), "raw")
	if err != nil {
		b.Fatal(err)
	}
	for written := 0; written < 64<<20+len(chunk); written += len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	acked := make(chan struct{}, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		rb := make([]byte, 1<<20)
		for {
			if _, err := io.ReadFull(conn, rb); err != nil {
				return
			}
			acked <- struct{}{}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	tc := conn.(*net.TCPConn)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// One range per round trip, like a fetch: send, then wait for the reader.
		if err := zerocopy.SendFile(tc, f, int64(i%64)<<20, 1<<20); err != nil {
			b.Fatal(err)
		}
		<-acked
	}
}
