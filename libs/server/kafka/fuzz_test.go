package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
)

// fuzzServer is a listener's decoder with every route a frontend serves
// (the handlers are never called by the fuzz target).
func fuzzServer(tb testing.TB) *Server {
	tb.Helper()
	b := NewBroker(BrokerConfig{}, func() int32 { return 1 }, nil, nil, slog.New(slog.DiscardHandler))
	routes := b.Routes()
	none := func(context.Context, *Conn, kmsg.Request) Reply { return Reply{None: true} }
	routes[0] = Route{Min: 0, Max: 11, Handle: none}
	routes[1] = Route{Min: 4, Max: 16, Handle: none}
	routes[2] = Route{Min: 1, Max: 8, Handle: none}
	routes[21] = Route{Min: 0, Max: 2, Handle: none}
	routes[23] = Route{Min: 2, Max: 4, Handle: none}
	routes[35] = Route{Min: 1, Max: 4, Handle: none}
	cfg := DefaultConfig("127.0.0.1:0")
	cfg.SASLMechanisms = []string{MechanismPlain, cluster.ScramSHA256}
	s, err := NewServer(cfg, routes, nil, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// requestFrame encodes req at its version with a request header.
func requestFrame(req kmsg.Request, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 5)
	b = append(b, "fuzzy"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// seedRequests are well-formed requests of the APIs the listener serves,
// at old and new versions.
func seedRequests() map[string]kmsg.Request {
	out := map[string]kmsg.Request{}
	add := func(req kmsg.Request, versions ...int16) {
		for _, v := range versions {
			out[fmt.Sprintf("%s-v%d", kmsg.NameForKey(req.Key()), v)] = reencode(req, v)
		}
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fuzz", "1"
	add(av, 0, 3)
	md := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr("orders")
	md.Topics = append(md.Topics, t)
	add(md, 1, 9, 12)
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte("not a record batch")
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	add(pr, 3, 9, 11)
	fr := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 42, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	add(fr, 4, 11, 16)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "orders", 3, 3
	ct.Topics = append(ct.Topics, ctt)
	add(ct, 2, 5, 7)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	add(hs, 1)
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.SASLAuthBytes = []byte("\x00user\x00pass")
	add(sa, 0, 2)
	return out
}

// reencode returns a copy of req at version v.
func reencode(req kmsg.Request, v int16) kmsg.Request {
	r := kmsg.RequestForKey(req.Key())
	req.SetVersion(v)
	r.SetVersion(v)
	_ = r.ReadFrom(req.AppendTo(nil))
	return r
}

// FuzzDecodeRequest feeds arbitrary frames to the listener's decoder, as
// authenticated and not: it must refuse or decode, never panic, and what it
// decodes must encode again.
func FuzzDecodeRequest(f *testing.F) {
	s := fuzzServer(f)
	i := int32(0)
	for _, req := range seedRequests() {
		i++
		f.Add(requestFrame(req, i))
	}
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, authed := range []bool{true, false} {
			h, req, _, bad := s.decode(frame, authed)
			if bad == nil {
				if req == nil || req.Key() != h.Key || req.GetVersion() != h.Version {
					t.Fatalf("decoded %v for header %+v", req, h)
				}
				_ = req.AppendTo(nil)
			}
		}
	})
}

// TestWriteKafkaFuzzCorpus regenerates the committed seed corpus of
// FuzzDecodeRequest when SLUICE_WRITE_FUZZ_CORPUS=1; otherwise it checks
// the corpus is there.
func TestWriteKafkaFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeRequest")
	if os.Getenv("SLUICE_WRITE_FUZZ_CORPUS") != "1" {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("seed corpus missing in %s (regenerate with SLUICE_WRITE_FUZZ_CORPUS=1): %v", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	i := int32(0)
	for name, req := range seedRequests() {
		i++
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", requestFrame(req, i))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
