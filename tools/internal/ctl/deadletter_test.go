package ctl

import (
	"testing"

	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
)

func TestReplayedDeadLetter(t *testing.T) {
	rec := record.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 7, Headers: []record.RecordHeader{
		{Key: "trace", Value: []byte("x")},
		{Key: shares.HeaderSourceTopic, Value: []byte("orders")},
		{Key: shares.HeaderSourcePartition, Value: []byte("2")},
		{Key: shares.HeaderReason, Value: []byte("bad")},
	}}
	out, ok := replayed(rec, "")
	if !ok || out.Topic != "orders" || out.Partition != 2 || string(out.Key) != "k" || out.Timestamp != 7 ||
		len(out.Headers) != 1 || out.Headers[0].Key != "trace" {
		t.Fatalf("replayed %+v, %v", out, ok)
	}
	if out, ok := replayed(rec, "elsewhere"); !ok || out.Topic != "elsewhere" || out.Partition != -1 {
		t.Fatalf("replayed --to: %+v", out)
	}
	if _, ok := replayed(record.Record{Value: []byte("v")}, ""); ok {
		t.Fatal("a record without a source was replayed")
	}
	rec.Headers[2].Value = []byte("x")
	if _, ok := replayed(rec, ""); ok {
		t.Fatal("a record with a bad source partition was replayed")
	}
}
