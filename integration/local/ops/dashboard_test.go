package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// dashboard is the part of deploy/grafana/sluice.json the test reads.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID          int    `json:"id"`
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Datasource  *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardMetricsExist: every panel of the Grafana dashboard is
// described and queries the templated Prometheus data source, and every
// metric its queries name is served by some process of a running cluster
// (a renamed metric breaks this test, not the dashboard in production).
// Labelled series appear once observed, so a small workload runs first:
// SDK produce and a group consume; a fetch past the log end (an error
// answer); franz-go producing to and reading a compacted topic the
// cleaners pass over; bad frames on a Kafka listener (refused requests); a
// committed Kafka transaction; a share group acquiring and accepting a
// record; and a Kafka producer over its client id's produce quota.
func TestDashboardMetricsExist(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	raw, err := os.ReadFile("../../../deploy/grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels")
	}
	ids := map[int]bool{}
	names := map[string]bool{}
	metric := regexp.MustCompile(`sluice_[a-z_]+`)
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Fatalf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Description == "" || p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Fatalf("panel %q: needs a description, the ${datasource} data source and queries", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range metric.FindAllString(tg.Expr, -1) {
				names[n] = true
			}
		}
	}

	// A short cleaner back-off, so that the compacted topic is cleaned
	// within a second or two of its segments rolling.
	c := itest.StartCluster(t, 3, "-cleaner-backoff", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Set first: the frontend learns the quota while the rest runs.
	itest.MustSluicectl(t, c, "quota", "set", "--client-id", dashThrottled, "--produce-bytes-per-sec", "1024")
	itest.CreateReplicated(t, ctx, c, "dash", 3, "2")
	p := itest.QuietProducer(t, c.FrontendURLs())
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, "dash", 10, 2000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A group with a committed offset, so that the lag series exist.
	if _, errOut, code := itest.Sluicectl(t, c, "", "consume", "dash", "--group", "dashboard", "--from-beginning", "--max-messages", "10"); code != 0 {
		t.Fatalf("consume: exit %d: %s", code, errOut)
	}
	// An error answer, so that the per-code error series exists.
	pool := storageclient.NewPool("dashboard-test")
	defer pool.Close()
	r := client.NewPartitionReader(client.NewMetadata(client.NewAdmin(c.MetadataURLs())), pool, "dash", 0, 1<<40, client.ReaderConfig{MaxWait: 10 * time.Millisecond})
	if _, err := r.Fetch(ctx); err == nil {
		t.Fatal("a fetch far past the log end succeeded")
	}
	passes := itest.CleanerPasses(t, c)
	dashboardKafka(t, ctx, c)
	itest.SendBadKafkaInput(t, c.KafkaAddrs()[0]) // refused requests, by reason
	dashboardTransaction(t, ctx, c)
	dashboardShareGroup(t, ctx, c)
	dashboardQuota(t, ctx, c)
	testkit.WaitFor(t, 30*time.Second, "a cleaning pass over the compacted topic", func() bool { return itest.CleanerPasses(t, c) > passes })

	// The offsets leader's collectors read their state at scrape time:
	// poll until every name is served.
	testkit.Eventually(t, 30*time.Second, func() error {
		served := map[string]bool{}
		for _, proc := range c.Procs {
			resp, err := http.Get("http://" + proc.AdminAddr + "/metrics")
			if err != nil {
				return fmt.Errorf("%s: %w", proc.Name, err)
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
					served[f[2]] = true
				}
			}
			resp.Body.Close()
		}
		var missing []string
		for n := range names {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			if !served[n] && !served[base] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return fmt.Errorf("the dashboard queries metrics no process serves: %v", missing)
		}
		return nil
	})
	t.Logf("%d panels, %d metrics, all served", len(d.Panels), len(names))
}

// dashThrottled is the client id the dashboard test gives a 1 KB/s produce
// quota.
const dashThrottled = "dashboard-throttled"

// dashboardKafka produces 2,000 updates of 100 keys with franz-go to a
// compacted topic with small segments (Kafka requests by API, and
// segments for the cleaners), and reads it back with franz-go (Kafka
// fetches): at least one record per key survives compaction.
func dashboardKafka(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	t.Helper()
	const topic, keys, updates = "dash-compacted", 100, 2000
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 3, Config: map[string]string{"cleanup.policy": "compact", "segment.bytes": "16384",
		"segment.ms": "500", "min.cleanable.dirty.ratio": "0.01"}})
	prod := itest.FranzClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(4<<10), kgo.ProducerLinger(2*time.Millisecond))
	recs := make([]*kgo.Record, updates)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%03d", i%keys), Value: fmt.Appendf(nil, "update %04d %s", i, strings.Repeat("x", 40))}
	}
	itest.ProduceAll(t, ctx, prod, recs, "to the compacted topic")
	cons := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	read := 0
	testkit.WaitFor(t, 30*time.Second, "franz-go reading a record per key", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		read += cons.PollFetches(pctx).NumRecords()
		return read >= keys
	})
}

// dashboardTransaction commits a franz-go transaction of three records.
func dashboardTransaction(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	t.Helper()
	tx := itest.FranzClient(t, c, kgo.TransactionalID("dashboard-txn"), kgo.DefaultProduceTopic("dash"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := tx.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "txn-%d", i), Value: []byte("in a transaction")}).FirstErr(); err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// dashboardShareGroup has an SDK share consumer acquire records of dash and
// accept one.
func dashboardShareGroup(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	t.Helper()
	itest.ConfigureShareGroup(t, ctx, c, "dashboard-share", map[string]string{shares.ConfigAutoOffsetReset: "earliest"})
	sc, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: c.MetadataURLs(), Offsets: c.OffsetsURLs(),
		Group: "dashboard-share", Topic: "dash", MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(context.Background())
	itest.PollShare(t, ctx, sc, func(r client.ShareRecord, _ time.Time) bool {
		sc.Acknowledge(r, shares.AckAccept)
		return true
	})
	if err := sc.Commit(ctx); err != nil {
		t.Fatalf("share acknowledgement: %v", err)
	}
}

// dashboardQuota produces 4 KB records with franz-go as dashThrottled until
// the frontend throttles one (it learns the quota from metadata).
func dashboardQuota(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	t.Helper()
	cl := itest.FranzClient(t, c, kgo.ClientID(dashThrottled), kgo.DefaultProduceTopic("dash"))
	testkit.WaitFor(t, 30*time.Second, "the frontend throttling a Kafka producer over its quota", func() bool {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("quota"), Value: make([]byte, 4<<10)}).FirstErr(); err != nil {
			t.Fatalf("produce over the quota: %v", err)
		}
		return itest.MetricSeries(t, c.Proc("frontend").AdminAddr)[`sluice_frontend_quota_throttled_total{kind="produce"}`] > 0
	})
}
