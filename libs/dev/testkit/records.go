package testkit

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// Batch is a RecordBatch v2 (uncompressed) of records with the given
// values, timestamped now: what a producer sends.
func Batch(t testing.TB, values ...string) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	for _, v := range values {
		b.Append(record.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Values are the values of the records in a fetch's record batches, in
// order.
func Values(t testing.TB, batches []byte) []string {
	t.Helper()
	var out []string
	for len(batches) > 0 {
		n, err := record.PeekSize(batches)
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewIterator(batches[:n])
		for it.Next() {
			out = append(out, string(it.Record().Value))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		batches = batches[n:]
	}
	return out
}
