package local

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

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/localcluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// TestDiskFaultsAreRepairedFromTheLeader damages segment files of stopped
// replicas and restarts them:
//   - a follower with a bit flipped in an older segment: its scrubber finds
//     the damage, the log is cut there and fetched again from the leader;
//   - the preferred leader with a zero-filled range in an older segment and
//     its scrubber off: once it leads again, the first read of the damaged
//     range serves none of it, the node hands the partition to another
//     in-sync replica, cuts its log and fetches the rest.
//
// Each node counts what it found; after each repair the damaged node holds
// the whole log again and the read-back finds every acknowledged record
// exactly once, in per-key order.
func TestDiskFaultsAreRepairedFromTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic = "damaged"
	createTopic(t, ctx, c, topic, 1, 3, map[string]string{"segment.bytes": "65536", "min.insync.replicas": "2"})
	waitFullISR(t, ctx, c, topic, 3)
	// Batches of at most 4 KiB, so that every segment holds many of them
	// and several index entries.
	cfg := client.DefaultProducerConfig()
	cfg.Frontends = c.FrontendURLs()
	cfg.BatchSize = 4 << 10
	cfg.Linger = 2 * time.Millisecond
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, topic, 20, 6000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, "")
	end := int64(l.Sent)
	waitReplicasAt(t, ctx, c, topic, end)
	_, part := leaderOf(t, ctx, c, topic, 0)
	preferred, follower := part.Replicas[0], part.Replicas[1]

	// A follower's bit flip, found by its scrubber.
	damage(t, ctx, c, follower, topic, nil, func(path string, size int64) { flipByte(t, path, 140) })
	waitMetric(t, c, follower, "sluice_storage_corrupt_logs_total", 1)
	waitLogLine(t, c, follower, "damaged log cut; fetching the rest from the leader")
	waitReplicasAt(t, ctx, c, topic, end)
	loadcheck.CheckExactlyOnceInOrder(t, readValues(t, ctx, c, topic, 1), l)

	// The preferred leader's zero-filled range, found by a read once it leads.
	damage(t, ctx, c, preferred, topic, []string{"-scrub-bytes-per-sec", "0"}, func(path string, size int64) {
		zeroFill(t, path, 100, 300)
	})
	waitLeader(t, ctx, c, topic, preferred)
	readThrough(t, ctx, c, topic)
	waitMetric(t, c, preferred, "sluice_storage_corrupt_logs_total", 1)
	waitLogLine(t, c, preferred, "resigned the leadership of a damaged replica")
	waitLogLine(t, c, preferred, "damaged log cut; fetching the rest from the leader")
	waitReplicasAt(t, ctx, c, topic, end)
	loadcheck.CheckExactlyOnceInOrder(t, readValues(t, ctx, c, topic, 1), l)
	t.Logf("%d records intact after a follower's and a leader's damaged segments were repaired", end)
}

// damage stops storage node id gracefully, applies fault to an older segment
// file of topic-0 of at least 16 KiB (given the file's size), and starts it
// again with extra arguments. Start-up validates an older segment only after
// its last index entry (every 4 KiB), so damage in its first kilobytes is
// left for the scrubber or the first read to find.
func damage(t *testing.T, ctx context.Context, c *localcluster.Cluster, id int32, topic string, extra []string, fault func(path string, size int64)) {
	t.Helper()
	p := c.Proc(fmt.Sprintf("storage-%d", id))
	c.StopProc(p, false)
	i := slices.Index(p.Args, "-data-dir")
	segs, err := filepath.Glob(filepath.Join(p.Args[i+1], topic+"-0", "*.log"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments of node %d: %v, %v", id, segs, err)
	}
	sort.Strings(segs)
	for _, seg := range segs[:len(segs)-1] { // the last one is active: fully validated at start
		st, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() >= 16<<10 {
			fault(seg, st.Size())
			t.Logf("damaged %s (%d bytes) on node %d", filepath.Base(seg), st.Size(), id)
			p.Args = append(p.Args, extra...)
			if err := c.StartProc(ctx, p); err != nil {
				t.Fatal(err)
			}
			return
		}
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
	eventually(t, 90*time.Second, func() error {
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
	eventually(t, 60*time.Second, func() error {
		if l, _ := leaderOf(t, ctx, c, topic, 0); l != id {
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

// waitLogLine waits until storage node id's log holds a line with msg.
func waitLogLine(t *testing.T, c *localcluster.Cluster, id int32, msg string) {
	t.Helper()
	p := c.Proc("storage-" + strconv.Itoa(int(id)))
	eventually(t, 30*time.Second, func() error {
		if b, _ := os.ReadFile(p.LogPath); !strings.Contains(string(b), msg) {
			return fmt.Errorf("node %d never logged %q", id, msg)
		}
		return nil
	})
}

// waitMetric waits until storage node id's metric reaches at least want.
func waitMetric(t *testing.T, c *localcluster.Cluster, id int32, name string, want float64) {
	t.Helper()
	p := c.Proc("storage-" + strconv.Itoa(int(id)))
	eventually(t, 60*time.Second, func() error {
		if got := metricSeries(t, p.AdminAddr)[name]; got < want {
			return fmt.Errorf("node %d: %s never reached %v (%v)", id, name, want, got)
		}
		return nil
	})
}
