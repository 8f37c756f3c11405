package ops

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestTopicFigures measures how fast the metadata Raft group creates
// topics, for docs/dev/performance-log.md; it runs only with
// SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -timeout 30m -run TestTopicFigures -v ./local/ops/
//
// On a new local cluster each (3 metadata voters, 3 storage nodes), 1,000
// topics of one partition, RF=3, are created three ways: one at a time over
// HTTP (a script's loop), by 16 HTTP clients at once, and in one Kafka
// CreateTopics request of franz-go's kadm; each reports topics/s and the
// metadata leader's Raft log appends (each one fdatasync) and entries
// written.
func TestTopicFigures(t *testing.T) {
	itest.FiguresOnly(t, "the topic figures")
	const n = 1000
	// Each way on a cluster of its own: every topic the metadata group
	// holds already makes the next creation cost more (placement reads
	// them all, and every watcher of the cluster model fetches it whole
	// after each change).
	measure := func(how string, create func(ctx context.Context, c *localcluster.Cluster, prefix string) error) {
		t.Run(how, func(t *testing.T) {
			c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			appends0, entries0 := metadataLogCounts(t, c)
			start := time.Now()
			if err := create(ctx, c, how); err != nil {
				t.Fatalf("%s: %v", how, err)
			}
			elapsed := time.Since(start)
			appends, entries := metadataLogCounts(t, c)
			t.Logf("FIGURE %d topics created %s: %.1f s, %.0f topics/s; metadata leader: %.0f log appends (fdatasyncs), %.0f entries",
				n, how, elapsed.Seconds(), n/elapsed.Seconds(), appends-appends0, entries-entries0)
		})
	}
	create := func(ctx context.Context, c *localcluster.Cluster, name string) error {
		_, err := cluster.NewClient([]string{c.FrontendURL()}).CreateTopic(ctx, cluster.CreateTopicRequest{Name: name, Partitions: 1, ReplicationFactor: 3})
		return err
	}
	measure("one-at-a-time-http", func(ctx context.Context, c *localcluster.Cluster, prefix string) error {
		for i := range n {
			if err := create(ctx, c, prefix+"-"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return nil
	})
	measure("16-http-clients", func(ctx context.Context, c *localcluster.Cluster, prefix string) error {
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < n; i += 16 {
					errs <- create(ctx, c, prefix+"-"+strconv.Itoa(i))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	measure("kafka-one-request", func(ctx context.Context, c *localcluster.Cluster, prefix string) error {
		// A request of 1,000 topics may take longer than franz-go's
		// default timeouts (15 s asked of the broker, 10 s more on the
		// connection).
		adm := kadm.NewClient(itest.FranzClient(t, c, kgo.RequestTimeoutOverhead(5*time.Minute)))
		adm.SetTimeoutMillis(300_000)
		names := make([]string, n)
		for i := range names {
			names[i] = prefix + "-" + strconv.Itoa(i)
		}
		res, err := adm.CreateTopics(ctx, 1, 3, nil, names...)
		if err != nil {
			return err
		}
		for _, r := range res.Sorted() {
			if r.Err != nil {
				return fmt.Errorf("%s: %w", r.Topic, r.Err)
			}
		}
		return nil
	})
}

// metadataLogCounts reads the metadata leader's Raft log counters.
func metadataLogCounts(t *testing.T, c *localcluster.Cluster) (appends, entries float64) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		m := itest.ScrapeMetrics(t, c.Proc("metadata-"+strconv.Itoa(i)))
		if m["sluice_metadata_raft_is_leader"] == 1 {
			return m["sluice_metadata_raft_log_appends_total"], m["sluice_metadata_raft_log_entries_written_total"]
		}
	}
	t.Fatal("no metadata leader")
	return 0, 0
}
