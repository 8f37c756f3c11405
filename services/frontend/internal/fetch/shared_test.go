package fetch

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
)

// TestReadAcquired: ranges of one partition in one batch are read with one
// fetch; each record goes to its own range; a record whose delivery time
// has not come is deferred, whichever range holds it.
func TestReadAcquired(t *testing.T) {
	e := newEnv(t, 1)
	e.md.AddTopic("t", 1)
	b := record.NewBuilder(record.CodecNone)
	for i, v := range []string{"a", "b", "c", "d", "e"} {
		rec := record.Record{Timestamp: 1000, Value: []byte(v)}
		if i == 3 {
			rec.Headers = []record.RecordHeader{{Key: shares.HeaderDeliverAt, Value: []byte("9000")}}
		}
		b.Append(rec)
	}
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.pool.Get(context.Background(), e.nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), protocol.APIProduce, &protocol.ProduceRequest{Topic: "t", Acks: protocol.AcksAll, TimeoutMs: 1000},
		batch, &protocol.ProduceResponse{}); err != nil {
		t.Fatal(err)
	}
	ranges := []shares.Acquired{{Topic: "t", FirstOffset: 0, LastOffset: 0, DeliveryCount: 2}, {Topic: "t", FirstOffset: 2, LastOffset: 4, DeliveryCount: 1}}
	var got []string
	batches := 0
	out, err := e.f.ReadAcquired(context.Background(), ranges, 0, 5000, func([]byte) { batches++ },
		func(r *record.Record, a shares.Acquired) {
			got = append(got, string(r.Value)+string(rune('0'+a.DeliveryCount)))
		})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a2", "c1", "e1"}) || batches != 1 || len(out.Gaps) != 0 {
		t.Fatalf("records %v, %d batches, gaps %+v", got, batches, out.Gaps)
	}
	if len(out.Defers) != 1 || out.Defers[0].FirstOffset != 3 || out.Defers[0].NotBeforeMs != 9000 || out.Defers[0].Type != shares.AckDefer {
		t.Fatalf("defers %+v", out.Defers)
	}
}
