package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// TestDiskFaultsAreRepairedFromTheLeader damages the files of one replica
// at a time, on a follower and on the preferred leader, and restarts it:
//
//   - a segment with a bit flipped, or with a zero-filled range: a
//     follower's scrubber finds it; on the preferred leader (scrubber off,
//     so that the node surely leads again first) the first read of the
//     range, which serves none of it;
//   - a segment cut short: recovery at start-up cuts the log there, and the
//     replica fetches the rest before it may lead;
//   - offset and time indexes zero-filled, bit-flipped or cut short:
//     recovery rebuilds them from the segment, nothing is lost or fetched.
//
// Damage is cut out of the log and fetched again from the leader; a leader
// first hands the partition to another in-sync replica. Each node counts
// and logs what it found; after each round every replica holds the whole
// log again and the read-back finds every acknowledged record exactly once,
// in per-key order.
func TestDiskFaultsAreRepairedFromTheLeader(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const topic = "damaged"
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 3, Config: map[string]string{"segment.bytes": "65536", "min.insync.replicas": "2"}})
	itest.WaitFullISR(t, ctx, c, topic, 3)
	// Batches of at most 4 KiB, so that every segment holds many of them
	// and several index entries.
	cfg := client.DefaultProducerConfig()
	cfg.Frontends = c.FrontendURLs()
	cfg.BatchSize = 4 << 10
	cfg.Linger = 2 * time.Millisecond
	l := loadcheck.Produce(t, ctx, cfg, 20, 6000, "", topic)
	end := int64(l.Sent)
	waitReplicasAt(t, ctx, c, topic, end)
	_, part := itest.LeaderOf(t, ctx, c, topic, 0)
	preferred, follower := part.Replicas[0], part.Replicas[1]

	const (
		cut      = "damaged log cut; fetching the rest from the leader"
		resigned = "resigned the leadership of a damaged replica"
		short    = "recovery cut the log short of an older segment"
		rebuilt  = "rebuilding segment indexes"
	)
	truncate := func(path string, size int64) {
		if err := os.Truncate(path, size/2); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		name     string
		leader   bool   // damage the preferred leader, not a follower
		file     string // the damaged file's suffix
		scrub    bool   // the scrubber runs (otherwise a read finds it)
		fault    func(path string, size int64)
		corrupt  bool     // counted in sluice_storage_corrupt_logs_total
		logLines []string // what the node logs
	}{
		{"follower bit flip", false, ".log", true, func(path string, _ int64) { flipByte(t, path, 140) }, true, []string{cut}},
		{"follower zero fill", false, ".log", true, func(path string, _ int64) { zeroFill(t, path, 100, 300) }, true, []string{cut}},
		{"follower truncated segment", false, ".log", true, truncate, true, []string{short}},
		{"follower zero-filled index", false, ".index", true, func(path string, size int64) { zeroFill(t, path, 0, size) }, false, []string{rebuilt}},
		{"follower bit-flipped time index", false, ".timeindex", true, func(path string, _ int64) { flipByte(t, path, 3) }, false, []string{rebuilt}},
		{"follower truncated index", false, ".index", true, truncate, false, []string{rebuilt}},
		{"leader zero fill found by a read", true, ".log", false, func(path string, _ int64) { zeroFill(t, path, 100, 300) }, true, []string{resigned, cut}},
		{"leader bit flip found by a read", true, ".log", false, func(path string, _ int64) { flipByte(t, path, 140) }, true, []string{resigned, cut}},
		{"leader truncated segment", true, ".log", true, truncate, true, []string{short}},
	} {
		id := follower
		if r.leader {
			id = preferred
			waitLeader(t, ctx, c, topic, id)
		}
		before := logCounts(c, id, r.logLines)
		damage(t, ctx, c, id, topic, r.file, r.scrub, r.fault)
		if r.leader {
			waitLeader(t, ctx, c, topic, id)
			if !r.scrub {
				readThrough(t, ctx, c, topic)
			}
		}
		if r.corrupt {
			waitMetric(t, c, id, "sluice_storage_corrupt_logs_total", 1)
		} else if got := itest.MetricSeries(t, c.Proc("storage-"+strconv.Itoa(int(id))).AdminAddr)["sluice_storage_corrupt_logs_total"]; got != 0 {
			t.Errorf("%s: %v logs counted corrupt; indexes are rebuilt, not cut", r.name, got)
		}
		for i, msg := range r.logLines {
			waitLogLineAfter(t, c, id, msg, before[i])
		}
		waitReplicasAt(t, ctx, c, topic, end)
		loadcheck.CheckExactlyOnceInOrder(t, itest.ReadValues(t, ctx, c, topic, 1), l)
		t.Logf("%s: repaired; %d records intact", r.name, end)
	}
}

// damage stops storage node id gracefully, applies fault to the file with
// suffix of an older segment of topic-0 of at least 16 KiB (given the
// file's size), and starts it again with its scrubber on or off. Start-up
// validates an older segment only after its last index entry (every 4
// KiB), so damage in its first kilobytes is left for the scrubber or the
// first read to find.
func damage(t *testing.T, ctx context.Context, c *localcluster.Cluster, id int32, topic, suffix string, scrub bool, fault func(path string, size int64)) {
	t.Helper()
	p := c.Proc(fmt.Sprintf("storage-%d", id))
	c.StopProc(p, false)
	i := slices.Index(p.Args, "-data-dir")
	segs, err := filepath.Glob(filepath.Join(p.Args[i+1], topic+"-0", "*.log"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments of node %d: %v, %v", id, segs, err)
	}
	sort.Strings(segs)
	if j := slices.Index(p.Args, "-scrub-bytes-per-sec"); j >= 0 {
		p.Args = slices.Delete(p.Args, j, j+2)
	}
	if !scrub {
		p.Args = append(p.Args, "-scrub-bytes-per-sec", "0")
	}
	// Not the active segment (fully validated at start), nor the one before
	// it: a cut there would leave too little for the next round.
	for _, seg := range segs[1 : len(segs)-1] {
		st, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() < 16<<10 {
			continue
		}
		path := strings.TrimSuffix(seg, ".log") + suffix
		if st, err = os.Stat(path); err != nil {
			t.Fatal(err)
		}
		fault(path, st.Size())
		t.Logf("damaged %s (%d bytes) on node %d", filepath.Base(path), st.Size(), id)
		if err := c.StartProc(ctx, p); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("node %d has no older segment of 16 KiB: %v", id, segs)
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func zeroFill(t *testing.T, path string, at, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), at); err != nil {
		t.Fatal(err)
	}
}

// waitReplicasAt waits until every replica of topic-0 is in the ISR and ends
// at end, as the nodes report it.
func waitReplicasAt(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, end int64) {
	t.Helper()
	meta := cluster.NewClient(c.MetadataURLs())
	pool := storageclient.NewPool("disk-fault-test")
	defer pool.Close()
	testkit.Eventually(t, 90*time.Second, func() error {
		snap, err := meta.Snapshot(ctx)
		if err != nil {
			return err
		}
		tp, ok := snap.Topic(topic)
		if !ok || len(tp.Partitions[0].ISR) != 3 {
			return fmt.Errorf("replicas of %s-0 never all in sync at %d: %+v", topic, end, tp)
		}
		for _, id := range tp.Partitions[0].Replicas {
			if got := logEnd(ctx, snap, pool, id, topic); got != end {
				return fmt.Errorf("replica of %s-0 on node %d ends at %d, not %d", topic, id, got, end)
			}
		}
		return nil
	})
}

// logEnd asks node id for its replica of topic-0's log end (-1 on failure).
func logEnd(ctx context.Context, snap *cluster.Snapshot, pool *storageclient.Pool, id int32, topic string) int64 {
	n, ok := snap.Node(id)
	if !ok {
		return -1
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	replicas, err := pool.DescribeReplicas(cctx, n.ClientAddr(), topic)
	if err != nil {
		return -1
	}
	for _, r := range replicas {
		if r.Partition == 0 {
			return r.LogEndOffset
		}
	}
	return -1
}

// waitLeader waits until node id leads topic-0 (the preferred-leader check
// moves it back once it is in sync).
func waitLeader(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, id int32) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, func() error {
		if l, _ := itest.LeaderOf(t, ctx, c, topic, 0); l != id {
			return fmt.Errorf("node %d never led %s-0 again", id, topic)
		}
		return nil
	})
}

// readThrough reads topic-0 from offset 0 to its high watermark from
// whichever node leads, whatever the answers: the first reads take in the
// damaged range.
func readThrough(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string) {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("disk-fault-test")
	defer pool.Close()
	r := client.NewPartitionReader(meta, pool, topic, 0, 0, client.ReaderConfig{MaxWait: 100 * time.Millisecond})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for cctx.Err() == nil {
		if _, err := r.Fetch(cctx); err != nil {
			t.Logf("read at %d: %v (code %v)", r.Offset(), err, protocol.CodeOf(err))
			continue
		}
		if r.HighWatermark() >= 0 && r.Offset() >= r.HighWatermark() {
			return
		}
	}
}

// logCounts counts each of msgs in storage node id's log.
func logCounts(c *localcluster.Cluster, id int32, msgs []string) []int {
	b, _ := os.ReadFile(c.Proc("storage-" + strconv.Itoa(int(id))).LogPath)
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = strings.Count(string(b), m)
	}
	return out
}

// waitLogLineAfter waits until storage node id's log holds msg more than
// before times.
func waitLogLineAfter(t *testing.T, c *localcluster.Cluster, id int32, msg string, before int) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() error {
		if n := logCounts(c, id, []string{msg})[0]; n <= before {
			return fmt.Errorf("node %d never logged %q again (%d times before)", id, msg, before)
		}
		return nil
	})
}

// waitMetric waits until storage node id's metric reaches at least want.
func waitMetric(t *testing.T, c *localcluster.Cluster, id int32, name string, want float64) {
	t.Helper()
	p := c.Proc("storage-" + strconv.Itoa(int(id)))
	testkit.Eventually(t, 60*time.Second, func() error {
		if got := itest.MetricSeries(t, p.AdminAddr)[name]; got < want {
			return fmt.Errorf("node %d: %s never reached %v (%v)", id, name, want, got)
		}
		return nil
	})
}
