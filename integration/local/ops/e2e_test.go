package ops

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/partitioner"
	"github.com/sluicemq/sluice/libs/storageclient"
)

type produced struct {
	key       string
	seq       int
	partition int32
	offset    int64
}

// TestProduceConsumeRestart is the single-node write/read path end to end: a
// 3-partition topic, 10,000 keyed records over HTTP, all read back with per-key
// order intact, then every storage node restarted (one killed with SIGKILL) and
// everything read back again.
func TestProduceConsumeRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin := cluster.NewClient([]string{c.FrontendURL()})
	if _, err := admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "e2e", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	itest.WaitLeaders(t, ctx, c, "e2e", 3)

	const total, keys, perRequest = 10000, 100, 500
	var sent []produced
	for start := 0; start < total; start += perRequest {
		var recs []map[string]string
		var batch []produced
		for i := start; i < start+perRequest; i++ {
			k := "key-" + strconv.Itoa(i%keys)
			seq := i / keys
			recs = append(recs, map[string]string{"key": k, "value": k + ":" + strconv.Itoa(seq)})
			batch = append(batch, produced{key: k, seq: seq})
		}
		reply := itest.PostJSON(t, c.FrontendURL()+"/v1/topics/e2e/records?acks=all", map[string]any{"records": recs})
		if len(reply.Offsets) != len(batch) {
			t.Fatalf("%d results for %d records", len(reply.Offsets), len(batch))
		}
		for i, o := range reply.Offsets {
			if o.ErrorCode != 0 {
				t.Fatalf("record %d: error %d %s", start+i, o.ErrorCode, o.Error)
			}
			batch[i].partition, batch[i].offset = o.Partition, o.Offset
			if want := int32(partitioner.ForKey([]byte(batch[i].key), 3)); o.Partition != want {
				t.Fatalf("key %s went to partition %d, murmur2 says %d", batch[i].key, o.Partition, want)
			}
		}
		sent = append(sent, batch...)
	}

	checkReadBack(t, ctx, c, sent)

	// Restart every storage node: node 1 is killed without warning, the
	// others stop cleanly. acks=all records were fsynced, so nothing is lost.
	for i := 1; i <= 3; i++ {
		p := c.Proc("storage-" + strconv.Itoa(i))
		c.StopProc(p, i == 1)
		if err := c.StartProc(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	itest.WaitLeaders(t, ctx, c, "e2e", 3)
	checkReadBack(t, ctx, c, sent)
}

// checkReadBack reads every partition from the start and checks that every
// produced record is there at its acknowledged offset, once, and in per-key order.
func checkReadBack(t *testing.T, ctx context.Context, c interface{ MetadataURLs() []string }, sent []produced) {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("e2e-read")
	defer pool.Close()
	want := map[string]produced{}
	for _, s := range sent {
		want[fmt.Sprintf("%d/%d", s.partition, s.offset)] = s
	}
	got := 0
	lastSeq := map[string]int{}
	for p := int32(0); p < 3; p++ {
		r := client.NewPartitionReader(meta, pool, "e2e", p, 0, client.ReaderConfig{MaxWait: 100 * time.Millisecond})
		for {
			recs, err := r.Fetch(ctx)
			if err != nil {
				t.Fatalf("fetch partition %d at %d: %v", p, r.Offset(), err)
			}
			for _, rec := range recs {
				id := fmt.Sprintf("%d/%d", p, rec.Offset)
				s, ok := want[id]
				if !ok {
					t.Fatalf("record at %s was never acknowledged", id)
				}
				if string(rec.Key) != s.key || string(rec.Value) != s.key+":"+strconv.Itoa(s.seq) {
					t.Fatalf("record at %s is %s=%s, want %s seq %d", id, rec.Key, rec.Value, s.key, s.seq)
				}
				k, seqStr, _ := strings.Cut(string(rec.Value), ":")
				seq, _ := strconv.Atoi(seqStr)
				if prev, seen := lastSeq[k]; seen && seq != prev+1 {
					t.Fatalf("key %s: seq %d after %d: per-key order broken", k, seq, prev)
				}
				lastSeq[k] = seq
				got++
			}
			if r.HighWatermark() >= 0 && r.Offset() >= r.HighWatermark() {
				break
			}
		}
	}
	if got != len(sent) {
		t.Fatalf("read %d records, %d were acknowledged", got, len(sent))
	}
}
