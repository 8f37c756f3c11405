package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// shareReader is a ShareConsumer that only reads acquired ranges from the
// fake cluster's storage node (its read step, without a coordinator).
func shareReader(fc *fakeCluster) *ShareConsumer {
	pool := storageclient.NewPool("share-read-test")
	fc.t.Cleanup(func() { _ = pool.Close() })
	return &ShareConsumer{meta: NewMetadata(cluster.NewClient([]string{fc.meta.URL()})), pool: pool,
		rcfg: ReaderConfig{MaxWait: 20 * time.Millisecond}, parts: map[int32]*sharePartition{}}
}

// appendBatch writes n records to partition p of "t" as one batch, values
// "v<offset>", and returns the batch as written (before its base offset).
func appendBatch(t *testing.T, fc *fakeCluster, p int32, n int) []byte {
	t.Helper()
	base := fc.storage.LogEnd("t", p)
	b := record.NewBuilder(record.CodecNone)
	for i := range n {
		b.Append(record.Record{Value: fmt.Appendf(nil, "v%d", base+int64(i))})
	}
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fc.storage.AppendBatch("t", p, batch); err != nil {
		t.Fatal(err)
	}
	return batch
}

// TestShareReadTakesTheAcquiredRange: a share consumer's read of an acquired
// range yields exactly its records, from the batches it fetched once, and
// keeps only the batches from the one holding the next offset on; a batch
// whose CRC fails is an error for a range in it, not for the ranges before.
func TestShareReadTakesTheAcquiredRange(t *testing.T) {
	fc := newFakeCluster(t, 2)
	appendBatch(t, fc, 0, 10) // offsets 0-9
	second := appendBatch(t, fc, 0, 5)
	c := shareReader(fc)
	ctx := context.Background()
	read := func(p int32, first, last int64) ([]record.Record, []shares.Ack, error) {
		return c.read(ctx, shares.Acquired{Topic: "t", Partition: p, FirstOffset: first, LastOffset: last})
	}
	for _, r := range []struct{ first, last int64 }{{3, 6}, {7, 12}, {13, 14}} {
		recs, gaps, err := read(0, r.first, r.last)
		if err != nil || len(gaps) != 0 || len(recs) != int(r.last-r.first+1) {
			t.Fatalf("range %d-%d: %d records, gaps %v, %v", r.first, r.last, len(recs), gaps, err)
		}
		for i, rec := range recs {
			if want := r.first + int64(i); rec.Offset != want || string(rec.Value) != fmt.Sprintf("v%d", want) {
				t.Fatalf("range %d-%d: record %d is %d %q", r.first, r.last, i, rec.Offset, rec.Value)
			}
		}
		if r.last == 12 && len(c.parts[0].batches) != len(second) {
			t.Fatalf("after 7-12: %d bytes kept, want the second batch's %d", len(c.parts[0].batches), len(second))
		}
	}
	if n := fc.storage.Fetches("t", 0); n != 1 {
		t.Fatalf("%d fetches for three ranges of what one fetch returned", n)
	}

	appendBatch(t, fc, 1, 3)
	bad := appendBatch(t, fc, 1, 3)
	bad[len(bad)-2] ^= 0xff // a value byte: the CRC fails, the records decode
	if _, err := fc.storage.AppendBatch("t", 1, bad); err != nil {
		t.Fatal(err)
	}
	// Offsets 3-5 hold the good copy of the second batch; 6-8 the damaged one.
	if recs, _, err := read(1, 0, 5); err != nil || len(recs) != 6 {
		t.Fatalf("good batches: %d records, %v", len(recs), err)
	}
	if recs, _, err := read(1, 6, 8); !errors.Is(err, record.ErrCorrupt) || len(recs) != 0 {
		t.Fatalf("a batch whose CRC fails: %d records, %v; want ErrCorrupt", len(recs), err)
	}
}
