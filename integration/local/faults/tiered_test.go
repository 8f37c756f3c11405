package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/objstore"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// startTiered starts a cluster of three storage nodes with the object
// store, uploading and applying retention every few hundred milliseconds,
// and creates topic with remote storage, 64 KiB segments and no local
// retention beyond what is uploaded.
func startTiered(t *testing.T, ctx context.Context, topic string) *localcluster.Cluster {
	t.Helper()
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, ObjectStore: true, Extra: map[string][]string{
		"storage": {"-retention-check-interval", "300ms", "-remote-upload-interval", "200ms", "-remote-sweep-interval", "1s"},
	}})
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 3, Config: map[string]string{
		cluster.ConfigRemoteStorageEnable: "true", cluster.ConfigSegmentBytes: "65536", cluster.ConfigLocalRetentionMs: "0",
		cluster.ConfigMinInsyncReplicas: "2",
	}})
	return c
}

// tieredProducer is a franz-go producer (acks=all) of small uncompressed
// batches, so that 64 KiB segments hold several.
func tieredProducer(t *testing.T, c *localcluster.Cluster) *kgo.Client {
	t.Helper()
	return itest.FranzClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10))
}

// produceTiered produces n records value-<from+i> with franz-go, acks=all.
func produceTiered(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%07d-%s", from+i, strings.Repeat("x", 80)))}
	}
	itest.ProduceAll(t, ctx, cl, recs, "tiered records")
}

// waitTiered waits until the partition's leader has uploaded segments and
// deleted them from its disk, and returns the remote log's summary.
func waitTiered(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, segments int) cluster.RemoteSummary {
	t.Helper()
	var sum cluster.RemoteSummary
	testkit.WaitFor(t, 60*time.Second, "segments uploaded and deleted locally", func() bool {
		_, p := itest.LeaderOf(t, ctx, c, topic, 0)
		if p.Remote == nil || p.Remote.Segments < segments {
			return false
		}
		sum = *p.Remote
		return localStart(t, c, p.Leader, topic) > 0
	})
	return sum
}

// localStart is the local log start of topic-0 on node id (its metric).
func localStart(t *testing.T, c *localcluster.Cluster, id int32, topic string) float64 {
	t.Helper()
	p := c.Proc("storage-" + strconv.Itoa(int(id)))
	return itest.MetricSeries(t, p.AdminAddr)[fmt.Sprintf(`sluice_storage_log_start_offset{partition="0",topic="%s"}`, topic)]
}

// storageMetric sums a metric over the storage nodes.
func storageMetric(t *testing.T, c *localcluster.Cluster, name string) float64 {
	t.Helper()
	var sum float64
	for i := 1; i <= 3; i++ {
		if p := c.Proc("storage-" + strconv.Itoa(i)); p != nil && p.Running() {
			sum += itest.ScrapeMetrics(t, p)[name]
		}
	}
	return sum
}

// A tiered topic read from offset 0 by Kafka (franz-go), the SDK and HTTP:
// the records below the local logs come from the object store, the rest
// from disk, every one once and in order, while producing goes on and the
// leader is killed (kill -9) in the middle of the read.
func TestTieredStorageReadsAcrossTiers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic = "tiered"
	c := startTiered(t, ctx, topic)
	producer := tieredProducer(t, c)
	const first = 20000
	produceTiered(t, ctx, producer, topic, 0, first)
	sum := waitTiered(t, ctx, c, topic, 3)
	t.Logf("remote log [%d, %d): %d segments, %d bytes", sum.Start, sum.End, sum.Segments, sum.Bytes)

	adm := kadm.NewClient(itest.FranzClient(t, c))
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil || starts[topic][0].Offset != 0 {
		t.Fatalf("ListOffsets earliest: %+v, %v; want 0, the remote log's start", starts[topic][0], err)
	}
	out := itest.MustSluicectl(t, c, "topic", "describe", topic)
	if !strings.Contains(out, "REMOTE-BYTES") || !strings.Contains(out, strconv.FormatInt(sum.Start, 10)) {
		t.Fatalf("topic describe shows no remote log:\n%s", out)
	}

	// The SDK and HTTP read the start of the log back from the object store.
	got := itest.ReadValues(t, ctx, c, topic, 1)[0]
	if len(got) < first || !strings.HasPrefix(got[0], "value-0000000-") || !strings.HasPrefix(got[first-1], fmt.Sprintf("value-%07d-", first-1)) {
		t.Fatalf("SDK read %d records from offset 0, first %.20q", len(got), got)
	}
	checkHTTPRead(t, c, topic, sum.End)

	// Kafka: a consumer from offset 0 while producing goes on and the
	// leader is killed when it has read past half the remote part.
	const more = 6000
	produceErr := make(chan error, 1)
	go func() {
		var err error
		for i := first; i < first+more && err == nil; i++ {
			r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%07d-%s", i, strings.Repeat("x", 80)))}
			err = producer.ProduceSync(ctx, r).FirstErr()
		}
		produceErr <- err
	}()
	consumer := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(256<<10))
	var values []string
	killed, producing := false, true
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && (producing || len(values) < first+more) {
		values = append(values, itest.PollValues(t, ctx, consumer, 1, 5*time.Second)...)
		if !killed && len(values) > int(sum.End)/2 {
			leader, _ := itest.LeaderOf(t, ctx, c, topic, 0)
			c.StopProc(c.Proc("storage-"+strconv.Itoa(int(leader))), true)
			killed = true
		}
		select {
		case err := <-produceErr:
			if err != nil {
				t.Fatalf("producing through the leader's kill: %v", err)
			}
			producing = false
		default:
		}
	}
	if !killed || producing {
		t.Fatalf("the consumer read %d records in 2 minutes (leader killed: %v, still producing: %v)", len(values), killed, producing)
	}
	if len(values) != first+more {
		t.Fatalf("read %d records, produced %d", len(values), first+more)
	}
	for i, v := range values {
		if !strings.HasPrefix(v, fmt.Sprintf("value-%07d-", i)) {
			t.Fatalf("record %d is %.20q: a record missed, repeated or out of order", i, v)
		}
	}
	if storageMetric(t, c, "sluice_storage_remote_cache_misses_total") == 0 || storageMetric(t, c, "sluice_storage_remote_uploads_total") == 0 {
		t.Fatal("no remote read or upload counted")
	}
}

// checkHTTPRead reads the partition over the frontend's HTTP API from
// offset 0 up to end and checks the offsets follow one another.
func checkHTTPRead(t *testing.T, c *localcluster.Cluster, topic string, end int64) {
	t.Helper()
	next := int64(0)
	for next < end {
		url := fmt.Sprintf("%s/v1/topics/%s/partitions/0/records?offset=%d&max_wait_ms=2000", c.FrontendURL(), topic, next)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Records []struct {
				Offset int64  `json:"offset"`
				Value  string `json:"value"`
			} `json:"records"`
			NextOffset int64 `json:"next_offset"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP read at %d: %d, %v", next, resp.StatusCode, err)
		}
		for _, r := range body.Records {
			if r.Offset != next || !strings.HasPrefix(r.Value, fmt.Sprintf("value-%07d-", next)) {
				t.Fatalf("HTTP read: offset %d value %.20q, want offset %d", r.Offset, r.Value, next)
			}
			next++
		}
		if len(body.Records) == 0 {
			t.Fatalf("HTTP read at %d: no records below the remote log's end %d", next, end)
		}
	}
}

// With the object store down, produce and reads of the tail go on, local
// retention keeps every segment not uploaded (the lag metric says so),
// and uploads resume when the store returns.
func TestTieredStorageStoreDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "tiered-down"
	c := startTiered(t, ctx, topic)
	producer := tieredProducer(t, c)
	store := c.Proc("objectstore")
	c.StopProc(store, true)
	produceTiered(t, ctx, producer, topic, 0, 8000) // about 14 segments: produce goes on
	leader, _ := itest.LeaderOf(t, ctx, c, topic, 0)
	testkit.WaitFor(t, 30*time.Second, "upload errors and lag counted", func() bool {
		return storageMetric(t, c, "sluice_storage_remote_upload_errors_total") > 0 && storageMetric(t, c, "sluice_storage_remote_upload_lag_segments") > 0
	})
	if s := localStart(t, c, leader, topic); s != 0 {
		t.Fatalf("local retention deleted records not uploaded: log start %v", s)
	}
	consumer := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if got := itest.PollValues(t, ctx, consumer, 8000, time.Minute); len(got) != 8000 {
		t.Fatalf("read %d of 8000 records with the store down", len(got))
	}
	if err := c.StartProc(ctx, store); err != nil {
		t.Fatal(err)
	}
	waitTiered(t, ctx, c, topic, 5)
	testkit.WaitFor(t, 30*time.Second, "upload lag back to zero", func() bool {
		return storageMetric(t, c, "sluice_storage_remote_upload_lag_segments") == 0
	})
}

// clusterStore opens the cluster's object store as the storage nodes do.
func clusterStore(t *testing.T, ctx context.Context, c *localcluster.Cluster) objstore.Store {
	t.Helper()
	creds := filepath.Join(t.TempDir(), "credentials")
	body := fmt.Sprintf("access_key_id=%s\nsecret_access_key=%s\n", localcluster.ObjectStoreAccessKey, localcluster.ObjectStoreSecretKey)
	if err := os.WriteFile(creds, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := objstore.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.CredentialsFile = c.ObjectStoreURL(), localcluster.ObjectStoreBucket, creds
	s, err := objstore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Leaders killed (kill -9) again and again while they upload: at any
// point, between an upload and its commit, between the commit and the
// local delete. The remote log has no gap, a consumer from offset 0 reads
// every record once and in order, and the objects of uploads never
// committed are deleted: the store ends holding the remote log's objects
// and nothing else.
func TestTieredStorageLeaderKills(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic = "tiered-kills"
	c := startTiered(t, ctx, topic)
	producer := tieredProducer(t, c)
	const total = 15000
	produceErr := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < total && err == nil; i += 100 {
			recs := make([]*kgo.Record, 100)
			for j := range recs {
				recs[j] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%07d-%s", i+j, strings.Repeat("x", 80)))}
			}
			err = producer.ProduceSync(ctx, recs...).FirstErr()
		}
		produceErr <- err
	}()
	for kill := range 3 {
		_, p := itest.LeaderOf(t, ctx, c, topic, 0)
		before := 0
		if p.Remote != nil {
			before = p.Remote.Segments
		}
		testkit.WaitFor(t, time.Minute, "the leader uploading", func() bool {
			_, p := itest.LeaderOf(t, ctx, c, topic, 0)
			return p.Remote != nil && p.Remote.Segments > before
		})
		proc := c.Proc("storage-" + strconv.Itoa(int(p.Leader)))
		c.StopProc(proc, true)
		t.Logf("kill %d: storage-%d killed with %d remote segments committed", kill+1, p.Leader, before)
		waitISR(t, ctx, c, topic, 2, time.Minute)
		if err := c.StartProc(ctx, proc); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-produceErr; err != nil {
		t.Fatalf("producing through the kills: %v", err)
	}
	consumer := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	values := itest.PollValues(t, ctx, consumer, total, 2*time.Minute)
	if len(values) != total {
		t.Fatalf("read %d of %d records", len(values), total)
	}
	for i, v := range values {
		if !strings.HasPrefix(v, fmt.Sprintf("value-%07d-", i)) {
			t.Fatalf("record %d is %.20q: a record missed, repeated or out of order", i, v)
		}
	}
	meta := cluster.NewClient(c.MetadataURLs())
	store := clusterStore(t, ctx, c)
	testkit.WaitFor(t, time.Minute, "the store holding exactly the remote log's objects", func() bool {
		rl, err := meta.RemoteLog(ctx, topic, 0)
		if err != nil || len(rl.Segments) == 0 {
			return false
		}
		named := map[string]bool{}
		for i, s := range rl.Segments {
			if i > 0 && s.BaseOffset != rl.Segments[i-1].EndOffset {
				t.Fatalf("the remote log has a gap: [%d, %d) after [%d, %d)", s.BaseOffset, s.EndOffset, rl.Segments[i-1].BaseOffset, rl.Segments[i-1].EndOffset)
			}
			named[s.Object] = true
		}
		objs, err := store.List(ctx, "")
		if err != nil {
			return false
		}
		for _, o := range objs {
			if !named[o.Key] {
				return false // an orphan left: the sweep runs every second
			}
		}
		return len(objs) == len(named)
	})
	t.Logf("orphans deleted by the sweeps: %.0f", storageMetric(t, c, "sluice_storage_remote_orphans_deleted_total"))
}

// A remote object corrupted in the store (a byte of its first block
// changed) fails the reads of that block with an error naming the object,
// never wrong records, and the partition's other reads go on.
func TestTieredStorageCorruptObject(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "tiered-corrupt"
	c := startTiered(t, ctx, topic)
	producer := tieredProducer(t, c)
	produceTiered(t, ctx, producer, topic, 0, 5000)
	waitTiered(t, ctx, c, topic, 3)
	rl, err := cluster.NewClient(c.MetadataURLs()).RemoteLog(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, second := rl.Segments[0], rl.Segments[1]
	// versitygw keeps an object as a file under its bucket's directory.
	path := filepath.Join(c.ObjectStoreDir(), "data", localcluster.ObjectStoreBucket, first.Object)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, first.LogBytes/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, first.LogBytes/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// The SDK's reader (the storage protocol, whose errors carry the
	// leader's message): it retries a retriable error a few times, then
	// returns it.
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("tiered-corrupt")
	defer pool.Close()
	read := func(offset int64) ([]record.Record, error) {
		r := client.NewPartitionReader(meta, pool, topic, 0, offset, client.ReaderConfig{MaxWait: time.Second})
		return r.Fetch(ctx)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if recs, err := read(first.BaseOffset); err == nil || !strings.Contains(err.Error(), first.Object) {
			return fmt.Errorf("read of the corrupt segment: %d records, %v; want an error naming %s", len(recs), err, first.Object)
		}
		return nil
	})
	recs, err := read(second.BaseOffset)
	if err != nil || len(recs) == 0 || !strings.HasPrefix(string(recs[0].Value), fmt.Sprintf("value-%07d-", second.BaseOffset)) {
		t.Fatalf("read of the next segment: %d records, %v", len(recs), err)
	}
	if storageMetric(t, c, "sluice_storage_remote_read_errors_total") == 0 {
		t.Fatal("the failed read is not counted")
	}
}

// A compacted topic tiered: its segments are uploaded once cleaned and
// deleted from the disks, and a consumer reading it from offset 0 across
// the tiers finds every key's latest value last.
func TestTieredStorageCompactedTopic(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "tiered-compacted"
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, ObjectStore: true, Extra: map[string][]string{
		"storage": {"-retention-check-interval", "300ms", "-remote-upload-interval", "200ms", "-cleaner-backoff", "500ms"},
	}})
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 3, Config: map[string]string{
		cluster.ConfigRemoteStorageEnable: "true", cluster.ConfigSegmentBytes: "65536", cluster.ConfigLocalRetentionMs: "0",
		cluster.ConfigCleanupPolicy: "compact", cluster.ConfigMinCleanableDirtyRatio: "0.01", cluster.ConfigMinInsyncReplicas: "2",
	}})
	producer := tieredProducer(t, c)
	latest := map[string]string{}
	var recs []*kgo.Record
	for i := range 12000 {
		key, value := fmt.Sprintf("key-%04d", i%1000), fmt.Sprintf("value-%07d-%s", i, strings.Repeat("x", 80))
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)})
		latest[key] = value
	}
	itest.ProduceAll(t, ctx, producer, recs, "keyed records")
	waitTiered(t, ctx, c, topic, 3)
	consumer := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]string{}
	testkit.Eventually(t, time.Minute, func() error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := consumer.PollRecords(pctx, 10000)
		cancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return fmt.Errorf("fetch: %v", e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Key)] = string(r.Value) })
		for k, v := range latest {
			if seen[k] != v {
				return fmt.Errorf("key %s read as %.20q so far, its latest value is %.20q", k, seen[k], v)
			}
		}
		return nil
	})
}
