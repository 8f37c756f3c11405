package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/partitioner"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// keyedRecord is one record of a compacted partition as a reader saw it; a
// nil Value is a tombstone.
type keyedRecord struct {
	Offset    int64
	Key       string
	Value     string
	Tombstone bool
}

func (r keyedRecord) String() string {
	if r.Tombstone {
		return fmt.Sprintf("%d:%s=<tombstone>", r.Offset, r.Key)
	}
	return fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value)
}

func newKeyed(offset int64, key, value []byte) keyedRecord {
	return keyedRecord{Offset: offset, Key: string(key), Value: string(value), Tombstone: value == nil}
}

// compactionModel is what a compacted topic must converge to: each key's
// latest value, and the keys whose latest record is a tombstone.
type compactionModel struct {
	latest map[string]keyedRecord // key -> its latest record (Offset unused)
}

// check compares one partition's records, read from 0 after every segment
// was cleaned and every tombstone expired, with the model: offsets strictly
// increase, each live key of the partition appears once with its latest
// value, and no deleted key appears.
func (m *compactionModel) check(recs []keyedRecord, keysOf func(string) bool) error {
	seen := map[string]bool{}
	for i, r := range recs {
		if i > 0 && r.Offset <= recs[i-1].Offset {
			return fmt.Errorf("offset %d after %d", r.Offset, recs[i-1].Offset)
		}
		if seen[r.Key] {
			return fmt.Errorf("key %s twice (at %d): not compacted yet", r.Key, r.Offset)
		}
		seen[r.Key] = true
		want, ok := m.latest[r.Key]
		switch {
		case !ok:
			return fmt.Errorf("key %s was never produced", r.Key)
		case want.Tombstone:
			return fmt.Errorf("deleted key %s still readable (%v)", r.Key, r)
		case r.Tombstone || r.Value != want.Value:
			return fmt.Errorf("key %s reads %v, its latest value is %s", r.Key, r, want.Value)
		}
	}
	for k, v := range m.latest {
		if !v.Tombstone && keysOf(k) && !seen[k] {
			return fmt.Errorf("live key %s missing", k)
		}
	}
	return nil
}

// TestCompactionEndToEnd: on an RF=3 compacted topic, 200,000 updates over
// 1,000 keys (a tenth of the keys deleted last) produced by franz-go's
// idempotent producer while the cleaners run, then read from 0 with the
// SDK, HTTP and franz-go: every key's latest value, no deleted key, the
// same records at the same offsets on all three replicas' disks; a replica
// reassigned onto a fourth node copies the cleaned log, gaps and all; again
// after the leaders are killed. Keyless records are refused on every path.
func TestCompactionEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 4, "-cleaner-backoff", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic, partitions, keys, updates = "state", 3, 1000, 200_000
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: partitions, ReplicationFactor: 3, Config: map[string]string{
		"cleanup.policy": "compact", "min.insync.replicas": "2", "segment.bytes": "131072", "segment.ms": "1500",
		"min.cleanable.dirty.ratio": "0.05", "delete.retention.ms": "3000"}})

	t.Run("keyless records refused", func(t *testing.T) { compactionRefusesKeyless(t, ctx, c, topic) })

	// Produce: franz-go's producer is idempotent by default; passes run on
	// all three nodes meanwhile (small segments, 300ms back-off).
	m := &compactionModel{latest: map[string]keyedRecord{}}
	prod := itest.FranzClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks()))
	passesBefore := itest.CleanerPasses(t, c)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var produceErrs []error
	for i := range updates {
		k := fmt.Sprintf("key-%04d", i%keys)
		v := fmt.Sprintf("%s:%d", k, i/keys)
		rec := &kgo.Record{Key: []byte(k), Value: []byte(v)}
		if i >= updates-keys && i%10 == 0 {
			rec.Value = nil // the last update of every tenth key is a tombstone
		}
		m.latest[k] = newKeyed(0, rec.Key, rec.Value)
		wg.Add(1)
		prod.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errMu.Lock()
				produceErrs = append(produceErrs, err)
				errMu.Unlock()
			}
		})
		if i%5000 == 4999 {
			time.Sleep(20 * time.Millisecond) // let the cleaners interleave with the appends
		}
	}
	wg.Wait()
	if len(produceErrs) > 0 {
		t.Fatalf("%d produce errors across cleaning passes, first: %v", len(produceErrs), produceErrs[0])
	}
	if passes := itest.CleanerPasses(t, c) - passesBefore; passes < 3 {
		t.Fatalf("%v cleaning passes ran while producing; the test means to produce across passes", passes)
	}

	snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := snap.Topic(topic)
	partOf := func(p int32) func(string) bool {
		return func(k string) bool { return partitioner.ForKeyString(k, partitions) == int(p) }
	}

	// Wait until every replica's files hold exactly the model: the active
	// segments rolled (segment.ms), every segment cleaned, the tombstones
	// past delete.retention.ms removed.
	for _, p := range tp.Partitions {
		testkit.Eventually(t, 90*time.Second, func() error {
			for _, node := range p.Replicas {
				if err := m.check(readReplicaFiles(t, c, node, topic, p.ID), partOf(p.ID)); err != nil {
					return fmt.Errorf("partition %d on node %d: %w", p.ID, node, err)
				}
			}
			return nil
		})
	}
	replicas := map[int32][]keyedRecord{}
	for _, p := range tp.Partitions {
		for _, node := range p.Replicas {
			got := readReplicaFiles(t, c, node, topic, p.ID)
			if prev, ok := replicas[p.ID]; ok && !slices.Equal(prev, got) {
				t.Fatalf("partition %d: node %d holds %d records, another replica %d, or at other offsets", p.ID, node, len(got), len(prev))
			}
			replicas[p.ID] = got
		}
	}

	readAll := func(stage string) {
		for _, p := range tp.Partitions {
			want := replicas[p.ID]
			for name, read := range map[string]func() []keyedRecord{
				"SDK":       func() []keyedRecord { return readSDK(t, ctx, c, topic, p.ID) },
				"HTTP":      func() []keyedRecord { return readHTTP(t, c, topic, p.ID) },
				"franz-go":  func() []keyedRecord { return readFranz(t, ctx, c, topic, p.ID, len(want)) },
				"sluicectl": func() []keyedRecord { return readCtl(t, c, topic, p.ID) },
			} {
				if got := read(); !slices.Equal(got, want) {
					t.Fatalf("%s: partition %d read with %s: %d records, the replicas hold %d: %v", stage, p.ID, name, len(got), len(want), recordDiff(got, want))
				}
			}
		}
	}
	readAll("cleaned")

	// sluicectl shows each replica's cleaner state: nothing left to clean.
	out := itest.MustSluicectl(t, c, "topic", "describe", topic, "-o", "json")
	var described struct {
		Replicas []struct {
			Partition        int32 `json:"partition"`
			Node             int32 `json:"node"`
			LogEndOffset     int64 `json:"log_end_offset"`
			CleanableBytes   int64 `json:"cleanable_bytes"`
			FirstDirtyOffset int64 `json:"first_dirty_offset"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal([]byte(out), &described); err != nil || len(described.Replicas) != partitions*3 {
		t.Fatalf("topic describe -o json: %v: %s", err, out)
	}
	for _, r := range described.Replicas {
		if r.CleanableBytes != 0 || r.FirstDirtyOffset <= 0 || r.FirstDirtyOffset > r.LogEndOffset {
			t.Fatalf("partition %d on node %d: cleanable %d bytes, first dirty %d, log end %d", r.Partition, r.Node, r.CleanableBytes, r.FirstDirtyOffset, r.LogEndOffset)
		}
	}

	// Reassign partition 1's follower slot to the node without a replica:
	// the new replica fetches the cleaned log from the leader across its
	// gaps and holds the same records at the same offsets.
	p1 := tp.Partitions[1]
	spare := int32(0)
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(p1.Replicas, id) {
			spare = id
		}
	}
	target := slices.Clone(p1.Replicas)
	for i, id := range target {
		if id != p1.Leader {
			target[i] = spare
			break
		}
	}
	out = itest.MustSluicectl(t, c, "partition", "reassign", topic+"/1", "--replicas", ids32(target), "--timeout", "2m")
	if !strings.Contains(out, "done: replicas "+ids32(target)) {
		t.Fatalf("partition reassign said:\n%s", out)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if got := readReplicaFiles(t, c, spare, topic, 1); !slices.Equal(got, replicas[1]) {
			return fmt.Errorf("node %d holds %d records of %s-1, the others %d: %s", spare, len(got), topic, len(replicas[1]), recordDiff(got, replicas[1]))
		}
		return nil
	})
	if snap, err = cluster.NewClient(c.MetadataURLs()).Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	tp, _ = snap.Topic(topic)

	// Kill the node leading partition 0 and read everything again from the
	// new leaders.
	victim := c.Proc(fmt.Sprintf("storage-%d", tp.Partitions[0].Leader))
	t.Logf("killing %s, leader of %s-0", victim.Name, topic)
	c.StopProc(victim, true)
	testkit.Eventually(t, 30*time.Second, func() error {
		snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
		if err != nil {
			return err
		}
		tp, _ := snap.Topic(topic)
		for _, p := range tp.Partitions {
			if fmt.Sprintf("storage-%d", p.Leader) == victim.Name || p.Leader < 0 {
				return fmt.Errorf("partition %d still led by %d", p.ID, p.Leader)
			}
		}
		return nil
	})
	itest.WaitLeaders(t, ctx, c, topic, partitions)
	readAll("after the leader kill")
}

// compactionRefusesKeyless: a record without a key is refused with
// INVALID_RECORD and a reason by the SDK, HTTP and Kafka paths.
func compactionRefusesKeyless(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string) {
	p := itest.QuietProducer(t, []string{c.FrontendURL()})
	defer p.Close(ctx)
	_, err := p.Produce(ctx, client.ProducerRecord{Topic: topic, Partition: 0, Value: []byte("v")})
	if protocol.CodeOf(err) != protocol.InvalidRecord || !strings.Contains(err.Error(), "key") {
		t.Fatalf("SDK keyless produce: %v, want INVALID_RECORD naming the key", err)
	}
	resp, err := http.Post(c.FrontendURL()+"/v1/topics/"+topic+"/records", "application/json",
		bytes.NewReader([]byte(`{"records":[{"partition":1,"value":"v"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "INVALID_RECORD") || !strings.Contains(string(body), "no key") {
		t.Fatalf("HTTP keyless produce: %d %s, want INVALID_RECORD with the reason", resp.StatusCode, body)
	}
	cl := itest.FranzClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 2, Value: []byte("v")})
	if err := res.FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("franz-go keyless produce: %v, want INVALID_RECORD", err)
	}
	// And a keyed record goes through.
	if _, err := p.Produce(ctx, client.ProducerRecord{Topic: topic, Partition: -1, Key: []byte("key-0000"), Value: []byte("key-0000:-1")}); err != nil {
		t.Fatal(err)
	}
}

// readReplicaFiles reads a replica's records straight from its segment
// files on disk (the node keeps serving meanwhile), up to the last whole
// batch.
func readReplicaFiles(t *testing.T, c *localcluster.Cluster, node int32, topic string, partition int32) []keyedRecord {
	t.Helper()
	dir := filepath.Join(c.DataDir(), fmt.Sprintf("storage-%d", node), fmt.Sprintf("%s-%d", topic, partition))
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var out []keyedRecord
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return readReplicaFiles(t, c, node, topic, partition) // swapped meanwhile
			}
			t.Fatal(err)
		}
		it := record.NewIterator(b)
		for it.Next() {
			r := it.Record()
			out = append(out, newKeyed(r.Offset, r.Key, r.Value))
		}
		if it.Err() != nil {
			t.Fatalf("%s: %v after %d of %d bytes", name, it.Err(), it.Consumed(), len(b))
		}
	}
	return out
}

func readSDK(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partition int32) []keyedRecord {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("compaction")
	defer pool.Close()
	r := client.NewPartitionReader(meta, pool, topic, partition, 0, client.ReaderConfig{MaxWait: 100 * time.Millisecond})
	var out []keyedRecord
	for {
		recs, err := r.Fetch(ctx)
		if err != nil {
			t.Fatalf("SDK fetch %s-%d at %d: %v", topic, partition, r.Offset(), err)
		}
		for _, rec := range recs {
			out = append(out, newKeyed(rec.Offset, rec.Key, rec.Value))
		}
		if r.HighWatermark() >= 0 && r.Offset() >= r.HighWatermark() {
			return out
		}
	}
}

func readHTTP(t *testing.T, c *localcluster.Cluster, topic string, partition int32) []keyedRecord {
	t.Helper()
	var out []keyedRecord
	for offset := int64(0); ; {
		url := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_wait_ms=100", c.FrontendURL(), topic, partition, offset)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var page struct {
			Records []struct {
				Offset int64   `json:"offset"`
				Key    string  `json:"key"`
				Value  *string `json:"value"`
			} `json:"records"`
			NextOffset    int64 `json:"next_offset"`
			HighWatermark int64 `json:"high_watermark"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		for _, r := range page.Records {
			kr := keyedRecord{Offset: r.Offset, Key: r.Key, Tombstone: r.Value == nil}
			if r.Value != nil {
				kr.Value = *r.Value
			}
			out = append(out, kr)
		}
		if page.NextOffset <= offset && len(page.Records) == 0 && offset < page.HighWatermark {
			t.Fatalf("GET %s: no progress at %d below the high watermark %d", url, offset, page.HighWatermark)
		}
		offset = page.NextOffset
		if offset >= page.HighWatermark {
			return out
		}
	}
}

// readFranz reads a partition from 0 with franz-go until it has n records
// (a compacted log's last offsets may be gaps, so the end offset cannot say
// when to stop), then polls once more for any record past them.
func readFranz(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partition int32, n int) []keyedRecord {
	t.Helper()
	cl := itest.FranzClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	var out []keyedRecord
	poll := func(ctx context.Context) {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			out = append(out, newKeyed(r.Offset, r.Key, r.Value))
		})
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(out) < n && pctx.Err() == nil {
		poll(pctx)
	}
	if len(out) < n {
		t.Fatalf("franz-go read %d of %d records of %s-%d", len(out), n, topic, partition)
	}
	more, cancelMore := context.WithTimeout(ctx, time.Second)
	defer cancelMore()
	poll(more)
	return out
}

// readCtl reads a partition from 0 with sluicectl consume: offset, key and
// value of each record (the test's keys and values hold no spaces).
func readCtl(t *testing.T, c *localcluster.Cluster, topic string, partition int32) []keyedRecord {
	t.Helper()
	out := itest.MustSluicectl(t, c, "consume", topic, "--partition", fmt.Sprint(partition), "--from-beginning", "--exit-at-end", "--format", `%o %k %s\n`)
	var recs []keyedRecord
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var r keyedRecord
		if _, err := fmt.Sscanf(line, "%d %s %s", &r.Offset, &r.Key, &r.Value); err != nil {
			t.Fatalf("sluicectl consume line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// recordDiff says where two reads of a partition part.
func recordDiff(got, want []keyedRecord) string {
	i := firstDiff(got, want)
	if i == min(len(got), len(want)) {
		return "one is a prefix of the other"
	}
	return fmt.Sprintf("first difference at %d: %v, want %v", i, got[i], want[i])
}

// TestCompactionKillDuringClean: a storage node is killed with SIGKILL
// while a cleaning pass is paused at each of its file steps in turn (the
// node's -test-cleaner-pause seam; each restart pauses at the next step),
// then restarted: every time the log opens, every record it serves is one
// that was acknowledged at that offset, and every key's latest value is
// there; with the pause lifted the passes finish, a new round is produced
// and cleaned, and each key is left once.
func TestCompactionKillDuringClean(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	steps := []string{"written", "swap-ready", "swapped", "checkpoint"}
	c := itest.StartCluster(t, 1, "-cleaner-backoff", "200ms", "-test-cleaner-pause", steps[0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic, keys = "crash-state", 200
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 1, Config: map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "16384", "segment.ms": "500", "min.cleanable.dirty.ratio": "0.01"}})
	node := c.Proc("storage-1")
	acked := map[int64]keyedRecord{} // offset -> the record acknowledged there
	latest := map[string]int64{}     // key -> offset of its latest record
	round := 0
	produce := func() {
		p := itest.QuietProducer(t, []string{c.FrontendURL()})
		defer p.Close(ctx)
		var mu sync.Mutex
		for i := range 3 * keys {
			k, v := fmt.Sprintf("key-%03d", i%keys), fmt.Sprintf("round-%d-%d", round, i)
			err := p.Send(ctx, client.ProducerRecord{Topic: topic, Partition: 0, Key: []byte(k), Value: []byte(v)}, func(md client.RecordMetadata) {
				mu.Lock()
				defer mu.Unlock()
				if md.Err != nil {
					t.Errorf("produce %s: %v", k, md.Err)
					return
				}
				acked[md.Offset] = keyedRecord{Offset: md.Offset, Key: k, Value: v}
				if cur, ok := latest[k]; !ok || md.Offset > cur {
					latest[k] = md.Offset
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		round++
	}
	check := func(stage string, compacted bool) {
		recs := readSDK(t, ctx, c, topic, 0)
		seen := map[string]int{}
		for _, r := range recs {
			if want, ok := acked[r.Offset]; !ok || want != r {
				t.Fatalf("%s: read %v, acknowledged there: %v", stage, r, want)
			}
			seen[r.Key]++
		}
		for k, off := range latest {
			if _, ok := seen[k]; !ok {
				t.Fatalf("%s: key %s (latest at %d) missing", stage, k, off)
			}
			if compacted && seen[k] != 1 {
				t.Fatalf("%s: key %s read %d times after the passes finished", stage, k, seen[k])
			}
		}
		for _, r := range recs {
			if latest[r.Key] == r.Offset {
				delete(seen, r.Key)
			}
		}
		if len(seen) > 0 {
			t.Fatalf("%s: %d keys lack their latest record", stage, len(seen))
		}
	}
	pauses := func() int {
		b, _ := os.ReadFile(node.LogPath)
		return strings.Count(string(b), "cleaner paused for a test")
	}
	// One round to clean; each restart's pass redoes the work the killed
	// one left and cleans the round produced meanwhile. Nothing is
	// produced while a pass is paused at "swapped", which holds the append
	// lock.
	produce()
	for i, step := range steps {
		testkit.Eventually(t, 60*time.Second, func() error {
			if n := pauses(); n <= i {
				return fmt.Errorf("%d passes paused, none at %s yet", n, step)
			}
			return nil
		})
		if step == "written" || step == "swap-ready" {
			// A pass paused there holds no lock appends need: a new
			// round gives the next restart's pass segments to rewrite.
			produce()
		}
		t.Logf("a pass is paused at %s: kill -9", step)
		c.StopProc(node, true)
		next := slices.Index(node.Args, "-test-cleaner-pause")
		if i+1 < len(steps) {
			node.Args[next+1] = steps[i+1]
		} else {
			node.Args = slices.Delete(node.Args, next, next+2)
		}
		if err := c.StartProc(ctx, node); err != nil {
			t.Fatal(err)
		}
		itest.WaitLeaders(t, ctx, c, topic, 1)
		check("after a kill at "+step, false)
	}
	// No pause any more: the passes finish, and go on with a new round.
	produce()
	testkit.Eventually(t, 60*time.Second, func() error {
		recs := readSDK(t, ctx, c, topic, 0)
		if len(recs) != keys {
			return fmt.Errorf("%d records, want one per key (%d)", len(recs), keys)
		}
		return nil
	})
	check("after the passes finished", true)
}
