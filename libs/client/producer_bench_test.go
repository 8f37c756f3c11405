package client

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// BenchmarkProducerSend is the SDK's per-record cost: Send of 100-byte
// keyless records with a callback, through batching to a fake frontend that
// decodes and stores every batch (its cost is included).
func BenchmarkProducerSend(b *testing.B) {
	f := newFakeFrontend(&testing.T{}, 4)
	defer f.srv.Close()
	cfg := DefaultProducerConfig()
	cfg.Frontends = []string{f.srv.URL}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := NewProducer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	value := make([]byte, 100)
	cb := func(RecordMetadata) {}
	b.ReportAllocs()
	b.SetBytes(100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: value}, cb); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
}
