package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// testServer starts a listener on 127.0.0.1 serving routes, with SASL
// mechanisms when given, over the principals of access.
func testServer(t *testing.T, routes map[int16]Route, access *cluster.Snapshot, mechanisms ...string) *Server {
	t.Helper()
	cfg := DefaultConfig("127.0.0.1:0")
	cfg.MaxRequestBytes, cfg.MaxQueuedBytes, cfg.SASLMechanisms = 64<<10, 64<<10, mechanisms
	s, err := NewServer(cfg, routes, func() *cluster.Snapshot { return access }, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// client is a raw Kafka client connection for tests.
type client struct {
	t    *testing.T
	conn net.Conn
	corr int32
}

func dialTest(t *testing.T, s *Server) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, conn: conn}
}

// send writes req with a request header at its version.
func (c *client) send(req kmsg.Request) {
	c.t.Helper()
	if err := c.write(req); err != nil {
		c.t.Fatal(err)
	}
}

// write writes req with a request header at its version.
func (c *client) write(req kmsg.Request) error {
	c.corr++
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(c.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	_, err := c.conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	return err
}

// recv reads a response into resp, at the request's version; false when
// the connection was closed instead.
func (c *client) recv(req kmsg.Request, resp kmsg.Response) bool {
	c.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return false
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.conn, b); err != nil {
		c.t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(b)); corr != c.corr {
		c.t.Fatalf("correlation id %d, want %d", corr, c.corr)
	}
	b = b[4:]
	if req.IsFlexible() && req.Key() != apiVersionsKey {
		b = b[1:] // an empty tagged-field section
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatalf("decoding %T: %v", resp, err)
	}
	return true
}

// closed reports whether the server closed the connection without an
// answer.
func (c *client) closed() bool {
	var b [1]byte
	_, err := c.conn.Read(b[:])
	return err != nil
}

// echoMetadata answers Metadata with the controller id 7.
func echoMetadata(_ context.Context, _ *Conn, _ kmsg.Request) Reply {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ControllerID = 7
	return Reply{Msg: resp}
}

// TestServerVersionsAndRefusals checks ApiVersions (with KIP-511's answer to
// a version from the future) and the refusals that close a connection.
func TestServerVersionsAndRefusals(t *testing.T) {
	s := testServer(t, map[int16]Route{3: {Min: 1, Max: 12, Handle: echoMetadata}}, nil)

	c := dialTest(t, s)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "test", "1"
	c.send(av)
	var avr kmsg.ApiVersionsResponse
	if !c.recv(av, &avr) || avr.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %+v", avr)
	}
	got := map[int16][2]int16{}
	for _, k := range avr.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if got[3] != [2]int16{1, 12} || got[18] != [2]int16{0, 4} || len(got) != 2 {
		t.Fatalf("advertised %v", got)
	}
	// The transaction version is finalized at 2, which Kafka clients read
	// to run KIP-890 part 2.
	if len(avr.FinalizedFeatures) != 1 || avr.FinalizedFeatures[0].Name != "transaction.version" || avr.FinalizedFeatures[0].MaxVersionLevel != 2 ||
		len(avr.SupportedFeatures) != 1 || avr.SupportedFeatures[0].MaxVersion != 2 || avr.FinalizedFeaturesEpoch < 1 {
		t.Fatalf("features: supported %+v, finalized %+v (epoch %d)", avr.SupportedFeatures, avr.FinalizedFeatures, avr.FinalizedFeaturesEpoch)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(md)
	var mdr kmsg.MetadataResponse
	if !c.recv(md, &mdr) || mdr.ControllerID != 7 {
		t.Fatalf("Metadata v9 on the same connection: %+v", mdr)
	}

	// ApiVersions v9: the v0 format, UNSUPPORTED_VERSION, the ranges.
	c = dialTest(t, s)
	av9 := kmsg.NewPtrApiVersionsRequest()
	av9.Version = 4
	c.corr++
	b := binary.BigEndian.AppendUint16(nil, apiVersionsKey)
	b = binary.BigEndian.AppendUint16(b, 9)
	b = binary.BigEndian.AppendUint32(b, uint32(c.corr))
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = append(b, 0) // header tags
	b = av9.AppendTo(b)
	if _, err := c.conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)); err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsRequest() // read the answer at v0
	var old kmsg.ApiVersionsResponse
	if !c.recv(v0, &old) || old.ErrorCode != 35 || len(old.ApiKeys) != 2 {
		t.Fatalf("ApiVersions v9: %+v, want UNSUPPORTED_VERSION with the ranges", old)
	}

	for name, send := range map[string]func(c *client){
		"unknown key":         func(c *client) { c.send(kmsg.NewPtrFetchRequest()) },
		"unsupported version": func(c *client) { r := kmsg.NewPtrMetadataRequest(); r.Version = 0; c.send(r) },
		"oversized":           func(c *client) { _, _ = c.conn.Write(binary.BigEndian.AppendUint32(nil, 65<<10)) },
		"short frame":         func(c *client) { _, _ = c.conn.Write([]byte{0, 0, 0, 3, 1, 2, 3}) },
		"bad client id": func(c *client) {
			_, _ = c.conn.Write([]byte{0, 0, 0, 10, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff})
		},
		"malformed body": func(c *client) {
			b := []byte{0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff}
			_, _ = c.conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
		},
	} {
		c := dialTest(t, s)
		send(c)
		if !c.closed() {
			t.Errorf("%s: the connection stayed open", name)
		}
	}
	refused := 0.0
	for _, l := range []string{"unknown_api", "unsupported_version", "too_large", "malformed"} {
		refused += testutil.ToFloat64(s.metrics.Refused.WithLabelValues(l))
	}
	if refused < 5 {
		t.Fatalf("%v refusals counted, want at least 5", refused)
	}
}

// TestServerSASLPlain checks that a SASL listener serves nothing but
// ApiVersions and SASL before authentication, that PLAIN with the token
// authenticates, and that a wrong password is answered and closed.
func TestServerSASLPlain(t *testing.T) {
	sum := sha256.Sum256([]byte("tok"))
	access := &cluster.Snapshot{Principals: []cluster.Principal{{Name: "alice", TokenSHA256: hex.EncodeToString(sum[:])}}}
	var seen string
	routes := map[int16]Route{3: {Min: 1, Max: 12, Handle: func(ctx context.Context, c *Conn, r kmsg.Request) Reply {
		seen, _ = c.Principal()
		return echoMetadata(ctx, c, r)
	}}}
	s := testServer(t, routes, access, MechanismPlain, cluster.ScramSHA256)

	c := dialTest(t, s)
	c.send(kmsg.NewPtrMetadataRequest())
	if !c.closed() {
		t.Fatal("Metadata before authentication was served")
	}

	auth := func(password string) (*client, kmsg.SASLAuthenticateResponse) {
		c := dialTest(t, s)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, MechanismPlain
		c.send(hs)
		var hsr kmsg.SASLHandshakeResponse
		if !c.recv(hs, &hsr) || hsr.ErrorCode != 0 || len(hsr.SupportedMechanisms) != 2 {
			t.Fatalf("SaslHandshake: %+v", hsr)
		}
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.Version, a.SASLAuthBytes = 2, []byte("\x00alice\x00"+password)
		c.send(a)
		var ar kmsg.SASLAuthenticateResponse
		if !c.recv(a, &ar) {
			t.Fatal("SaslAuthenticate: no answer")
		}
		return c, ar
	}
	c, ar := auth("tok")
	if ar.ErrorCode != 0 {
		t.Fatalf("SaslAuthenticate with the token: %+v", ar)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c.send(md)
	var mdr kmsg.MetadataResponse
	if !c.recv(md, &mdr) || seen != "alice" {
		t.Fatalf("Metadata after authentication: principal %q", seen)
	}
	c, ar = auth("nope")
	if ar.ErrorCode != codeSASLAuthFailed || !c.closed() {
		t.Fatalf("a wrong password: %+v, and the connection must close", ar)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	c = dialTest(t, s)
	c.send(hs)
	var hsr kmsg.SASLHandshakeResponse
	if !c.recv(hs, &hsr) || hsr.ErrorCode != codeUnsupportedMechanism {
		t.Fatalf("an unoffered mechanism: %+v", hsr)
	}
	if testutil.ToFloat64(s.metrics.AuthFailed) != 1 {
		t.Fatalf("%v authentication failures counted, want 1", testutil.ToFloat64(s.metrics.AuthFailed))
	}
}

// TestServerThrottleMutes checks that a reply's throttle keeps the next
// request of the connection waiting (KIP-219).
func TestServerThrottleMutes(t *testing.T) {
	routes := map[int16]Route{3: {Min: 1, Max: 12, Handle: func(ctx context.Context, c *Conn, r kmsg.Request) Reply {
		rep := echoMetadata(ctx, c, r)
		rep.Throttle = 300 * time.Millisecond
		return rep
	}}}
	s := testServer(t, routes, nil)
	c := dialTest(t, s)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	c.send(md)
	c.send(md)
	var r kmsg.MetadataResponse
	c.corr--
	if !c.recv(md, &r) {
		t.Fatal("no answer")
	}
	start := time.Now()
	c.corr++
	if !c.recv(md, &r) {
		t.Fatal("no second answer")
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("the second request was answered %v after the first, within its throttle", waited)
	}
}

// TestMemPoolWaits checks that the request budget makes a reader wait for
// room and that cancelling the wait gives up.
func TestMemPoolWaits(t *testing.T) {
	p := newMemPool(100)
	if err := p.Acquire(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Acquire(ctx, 30); err == nil {
		t.Fatal("acquired past the budget")
	}
	done := make(chan error, 1)
	go func() { done <- p.Acquire(context.Background(), 1000) }() // larger than the pool: the whole pool
	select {
	case <-done:
		t.Fatal("acquired the whole pool while 80 bytes were held")
	case <-time.After(50 * time.Millisecond):
	}
	p.Release(80)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestServerPipelinedAnswersInOrder checks that answers finished on other
// goroutines (Reply.Async) overlap (each waits until all three run) yet go
// out in request order, and that a synchronous answer after them waits its
// turn. The first request's answer is finished last: only once the others
// have returned theirs.
func TestServerPipelinedAnswersInOrder(t *testing.T) {
	const async = 3
	var started, later sync.WaitGroup
	started.Add(async)
	later.Add(async - 1)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	calls := 0
	routes := map[int16]Route{3: {Min: 1, Max: 12, Handle: func(ctx context.Context, c *Conn, r kmsg.Request) Reply {
		if calls >= async {
			return echoMetadata(ctx, c, r) // synchronous
		}
		id := int32(calls)
		calls++
		return Reply{Async: func() Reply {
			started.Done()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				panic("the async parts did not run at once")
			}
			if id == 0 {
				later.Wait() // the first finishes last
			} else {
				defer later.Done()
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.ControllerID = id
			return Reply{Msg: resp}
		}}
	}}}
	s := testServer(t, routes, nil)
	c := dialTest(t, s)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	for range async + 1 {
		c.send(md)
	}
	c.corr = 0
	for want := int32(0); want <= async; want++ {
		c.corr++
		var r kmsg.MetadataResponse
		if !c.recv(md, &r) {
			t.Fatalf("answer %d missing", want)
		}
		if want < async && r.ControllerID != want || want == async && r.ControllerID != 7 {
			t.Fatalf("answer %d carries %d: out of order", want, r.ControllerID)
		}
	}
}

// TestServerConnectionsPerIP checks -kafka-max-connections-per-ip: past
// the limit a new connection is counted and closed; once one closes, a new
// one is served again.
func TestServerConnectionsPerIP(t *testing.T) {
	cfg := DefaultConfig("127.0.0.1:0")
	cfg.MaxConnsPerIP = 1
	metrics := NewMetrics(nil)
	s, err := NewServer(cfg, nil, nil, metrics, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	versions := kmsg.NewPtrApiVersionsRequest()
	// served reports whether c answers ApiVersions (a refused connection
	// may be closed before the request is even written).
	served := func(c *client) bool {
		return c.write(versions) == nil && c.recv(versions, kmsg.NewPtrApiVersionsResponse())
	}
	first := dialTest(t, s)
	if !served(first) {
		t.Fatal("the first connection was not served")
	}
	if served(dialTest(t, s)) {
		t.Fatal("a second connection from the address was served past the limit of one")
	}
	if n := testutil.ToFloat64(metrics.Refused.WithLabelValues("too_many_connections")); n != 1 {
		t.Fatalf("refused connections counted: %v, want 1", n)
	}
	_ = first.conn.Close()
	testkit.WaitFor(t, 5*time.Second, "a connection served after the first one closed", func() bool { return served(dialTest(t, s)) })
}
