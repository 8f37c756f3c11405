package client

import (
	"testing"

	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
)

func TestDeadLetter(t *testing.T) {
	src := ConsumerRecord{Topic: "orders", Partition: 3, Record: record.Record{Offset: 41, Timestamp: 7, Key: []byte("k"), Value: []byte("v"),
		Headers: []record.RecordHeader{{Key: "trace", Value: []byte("x")}}}}
	dl := DeadLetter(src, "orders-dlt", "billing", "bad json", 2)
	if dl.Topic != "orders-dlt" || dl.Partition != -1 || string(dl.Key) != "k" || string(dl.Value) != "v" || dl.Timestamp != 7 {
		t.Fatalf("dead letter %+v", dl)
	}
	h := map[string]string{}
	for _, x := range dl.Headers {
		h[x.Key] = string(x.Value)
	}
	want := map[string]string{"trace": "x", shares.HeaderSourceTopic: "orders", shares.HeaderSourcePartition: "3", shares.HeaderSourceOffset: "41",
		shares.HeaderDeliveryCount: "2", shares.HeaderGroup: "billing", shares.HeaderReason: "bad json"}
	for k, v := range want {
		if h[k] != v {
			t.Fatalf("header %s = %q, want %q (all: %v)", k, h[k], v, h)
		}
	}
	if len(src.Headers) != 1 {
		t.Fatalf("the source record's headers changed: %v", src.Headers)
	}
}
