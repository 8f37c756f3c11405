package client

import (
	"bytes"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

// TestArenaCopiesAreIndependent: records copied into an arena hold their own
// bytes (the source buffer may be reused), share chunks, and an append to one
// record's value never writes over the next record's.
func TestArenaCopiesAreIndependent(t *testing.T) {
	src := []byte("key-avalue-akey-bvalue-b")
	a := arena{size: 16}
	r1 := a.record(&record.Record{Key: src[0:5], Value: src[5:12], Headers: []record.RecordHeader{{Key: "h", Value: src[0:1]}}})
	r2 := a.record(&record.Record{Key: src[12:17], Value: src[17:24]})
	big := a.bytes(bytes.Repeat([]byte("x"), 40)) // larger than a chunk
	nilKey := a.bytes(nil)
	for i := range src {
		src[i] = '!'
	}
	if string(r1.Key) != "key-a" || string(r1.Value) != "value-a" || string(r1.Headers[0].Value) != "k" ||
		string(r2.Key) != "key-b" || string(r2.Value) != "value-b" || len(big) != 40 || nilKey != nil {
		t.Fatalf("copies changed with their source: %q %q %q %q %q %d %v", r1.Key, r1.Value, r1.Headers[0].Value, r2.Key, r2.Value, len(big), nilKey)
	}
	_ = append(r1.Value, "OVERWRITE"...)
	if string(r2.Key) != "key-b" {
		t.Fatalf("an append to one record's value wrote over the next: %q", r2.Key)
	}
}
