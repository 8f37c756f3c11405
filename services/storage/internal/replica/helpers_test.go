package replica

import (
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

func testBatch(t *testing.T) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	b.Append(record.Record{Value: []byte("v"), Timestamp: 1})
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}
