package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// TestQuotasThrottleClients: quotas set with sluicectl reach every
// frontend and storage node; an SDK producer and an SDK consumer whose client
// ids are over their quotas are slowed (each service counts the throttled
// requests) but lose nothing and see no error: every record is written and
// read back once, in per-key order. The same quotas hold for Kafka clients
// of those client ids (franz-go): the frontend throttles their produce
// requests and the storage node their fetches, each answer carrying the
// throttle time the client is told to wait, and nothing is lost. Kafka's
// client quota APIs set, read and remove a client id's quota.
func TestQuotasThrottleClients(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "limited", 2, 1)
	// 8 KB/s: a producer's second batch request to a frontend (8 KB each)
	// already finds it in debt, and its third waits, however slowly this
	// machine produces (tests run side by side); a consumer's fetches of 8 KB
	// alike at the storage node.
	itest.MustSluicectl(t, c, "quota", "set", "--client-id", "slow-producer", "--produce-bytes-per-sec", "8000")
	itest.MustSluicectl(t, c, "quota", "set", "--client-id", "slow-consumer", "--fetch-bytes-per-sec", "8000")
	var qs []struct {
		ClientID           string `json:"client_id"`
		ProduceBytesPerSec int64  `json:"produce_bytes_per_sec"`
		FetchBytesPerSec   int64  `json:"fetch_bytes_per_sec"`
	}
	if err := json.Unmarshal([]byte(itest.MustSluicectl(t, c, "quota", "list", "-o", "json")), &qs); err != nil || len(qs) != 2 || qs[0].ClientID != "slow-consumer" {
		t.Fatalf("quota list: %+v, %v", qs, err)
	}
	if _, errOut, code := itest.Sluicectl(t, c, "", "quota", "set", "--default"); code != 2 || !strings.Contains(errOut, "needs --produce-bytes-per-sec") {
		t.Fatalf("quota set without a rate: exit %d, %s", code, errOut)
	}
	// The frontends learn the quotas from metadata: a model read through each
	// one refreshes its cache, and shows the quotas once it holds them.
	for _, fe := range c.FrontendURLs() {
		testkit.Eventually(t, 30*time.Second, func() error {
			var snap struct {
				Quotas []struct {
					ClientID string `json:"client_id"`
				} `json:"quotas"`
			}
			resp, err := http.Get(fe + "/v1/cluster")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
				return err
			}
			if len(snap.Quotas) != 2 {
				return fmt.Errorf("frontend %s knows %d quotas, want 2", fe, len(snap.Quotas))
			}
			return nil
		})
	}

	cfg := client.DefaultProducerConfig()
	cfg.Frontends = c.FrontendURLs()
	cfg.ClientID = "slow-producer"
	cfg.Linger = 2 * time.Millisecond
	cfg.BatchSize = 8 << 10
	const n = 2000 // about 80 KB in batches: a few seconds of quota past the one-second burst
	l := loadcheck.Produce(t, ctx, cfg, 10, n, ": a producer over its quota is slowed, not failed", "limited")
	if got := itest.MetricSeries(t, c.Proc("frontend").AdminAddr)[`sluice_frontend_quota_throttled_total{kind="produce"}`]; got < 1 {
		t.Fatalf("the frontend throttled no produce request: %v", got)
	}

	ccfg := client.DefaultConsumerConfig()
	ccfg.Metadata = c.MetadataURLs()
	ccfg.Offsets = c.OffsetsURLs()
	ccfg.Group = "quota-readers"
	ccfg.AutoOffsetReset = client.OffsetResetEarliest
	ccfg.ClientID = "slow-consumer"
	ccfg.Topics = []string{"limited"}
	ccfg.FetchMaxBytes = 8 << 10
	stored := readValuesAs(t, ctx, ccfg, n)
	loadcheck.CheckExactlyOnceInOrder(t, stored, l)
	if got := itest.MetricSeries(t, c.Proc("storage-1").AdminAddr)["sluice_storage_quota_throttled_total"]; got < 1 {
		t.Fatalf("the storage node throttled no fetch: %v", got)
	}
	t.Logf("%d records through an 8 KB/s produce and fetch quota", n)

	kafkaQuotas(t, ctx, c, n)
	oneBudgetPerFrontend(t, ctx, c)
	kadmQuotas(t, ctx, c)
}

// kadmQuotas sets, reads and removes a quota with Kafka's client quota APIs
// (franz-go's kadm, as kafka-configs --entity-type clients does): sluicectl
// sees what they set.
func kadmQuotas(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	adm := kadm.NewClient(itest.FranzClient(t, c))
	name := "kadm-client"
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}}
	set, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{
		{Key: "producer_byte_rate", Value: 30000}, {Key: "consumer_byte_rate", Value: 40000}}}})
	if err != nil || len(set) != 1 || set[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, set)
	}
	var listed []cluster.Quota
	if out := itest.MustSluicectl(t, c, "quota", "list", "-o", "json"); json.Unmarshal([]byte(out), &listed) != nil ||
		!slices.Contains(listed, cluster.Quota{ClientID: name, ProduceBytesPerSec: 30000, FetchBytesPerSec: 40000}) {
		t.Fatalf("sluicectl quota list after AlterClientQuotas: %s", out)
	}
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &name, MatchType: kmsg.QuotasMatchTypeExact}})
	if err != nil || len(described) != 1 || len(described[0].Values) != 2 {
		t.Fatalf("DescribeClientQuotas: %v %+v", err, described)
	}
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{
		{Key: "producer_byte_rate", Remove: true}, {Key: "consumer_byte_rate", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	if out := itest.MustSluicectl(t, c, "quota", "list", "-o", "json"); strings.Contains(out, "kadm-client") {
		t.Fatalf("sluicectl quota list after the removal: %s", out)
	}
	bad, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &name}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}})
	if err != nil || len(bad) != 1 || !errors.Is(bad[0].Err, kerr.InvalidRequest) {
		t.Fatalf("a user quota: %v %+v, want INVALID_REQUEST", err, bad)
	}
}

// oneBudgetPerFrontend checks that a client id has one produce budget on a
// frontend, whichever protocol it uses: bytes produced over HTTP leave a
// Kafka producer of the same client id on that frontend in debt, so the
// first Kafka answer already asks it to wait.
func oneBudgetPerFrontend(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	itest.MustSluicectl(t, c, "quota", "set", "--client-id", "both-paths", "--produce-bytes-per-sec", "20000")
	testkit.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(c.FrontendURL() + "/v1/cluster")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), `"both-paths"`) {
			return errors.New("the frontend does not know the quota of both-paths yet")
		}
		return nil
	})
	// 60 KB over HTTP: admitted within the one-second burst, then in debt
	// for two seconds.
	body := `{"records":[{"value":"` + strings.Repeat("x", 60000) + `"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.FrontendURL()+"/v1/topics/limited-kafka/records", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Client-Id", "both-paths")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP produce of both-paths: %s", resp.Status)
	}
	hooks := &brokerThrottles{byNode: map[int32]int{}}
	cl := itest.FranzClient(t, c, kgo.ClientID("both-paths"), kgo.WithHooks(hooks), kgo.DefaultProduceTopic("limited-kafka"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatalf("Kafka produce of both-paths: %v", err)
	}
	if fe, _ := hooks.count(); fe < 1 {
		t.Fatalf("a Kafka producer whose client id spent its budget over HTTP was not asked to wait: %v", hooks.byNode)
	}
}

// brokerThrottles counts, per broker, the answers that told a franz-go
// client to wait.
type brokerThrottles struct {
	mu     sync.Mutex
	byNode map[int32]int
}

func (h *brokerThrottles) OnBrokerThrottle(m kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byNode[m.NodeID]++
}

// count returns the throttled answers from frontends and from storage
// nodes.
func (h *brokerThrottles) count() (frontends, storage int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, n := range h.byNode {
		if id >= cluster.FrontendIDBase {
			frontends += n
		} else {
			storage += n
		}
	}
	return frontends, storage
}

// kafkaQuotas produces n records with franz-go as slow-producer and reads
// them as slow-consumer, under the quotas TestQuotasThrottleClients set.
func kafkaQuotas(t *testing.T, ctx context.Context, c *localcluster.Cluster, n int) {
	itest.CreateTopic(t, ctx, c, "limited-kafka", 2, 1)
	frontendBefore := itest.MetricSeries(t, c.Proc("frontend").AdminAddr)[`sluice_frontend_quota_throttled_total{kind="produce"}`]
	storageBefore := itest.MetricSeries(t, c.Proc("storage-1").AdminAddr)["sluice_storage_quota_throttled_total"]

	hooks := &brokerThrottles{byNode: map[int32]int{}}
	pr := itest.FranzClient(t, c, kgo.ClientID("slow-producer"), kgo.WithHooks(hooks),
		kgo.DefaultProduceTopic("limited-kafka"), kgo.ProducerBatchMaxBytes(8<<10), kgo.ProducerLinger(2*time.Millisecond))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		// 50-byte values: 100 KB, seconds of quota past its burst.
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "%d %s", i, strings.Repeat("x", 44))}
	}
	itest.ProduceAll(t, ctx, pr, recs, "under the produce quota")
	if fe, _ := hooks.count(); fe < 1 {
		t.Fatalf("no frontend answer told the Kafka producer to wait: %v", hooks.byNode)
	}
	if got := itest.MetricSeries(t, c.Proc("frontend").AdminAddr)[`sluice_frontend_quota_throttled_total{kind="produce"}`]; got <= frontendBefore {
		t.Fatalf("the frontend throttled no Kafka produce request: %v, %v before", got, frontendBefore)
	}

	cs := itest.FranzClient(t, c, kgo.ClientID("slow-consumer"), kgo.WithHooks(hooks),
		kgo.ConsumeTopics("limited-kafka"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(8<<10), kgo.FetchMaxPartitionBytes(8<<10))
	last := map[string]int{}
	seen := make([]bool, n)
	for got := 0; got < n; {
		fs := cs.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("Kafka consume under the fetch quota: %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			num, _, _ := strings.Cut(string(r.Value), " ")
			v, _ := strconv.Atoi(num)
			if seen[v] {
				t.Fatalf("record %d read twice", v)
			}
			if prev, ok := last[string(r.Key)]; ok && v < prev {
				t.Fatalf("key %s: record %d after %d", r.Key, v, prev)
			}
			seen[v], last[string(r.Key)] = true, v
			got++
		})
	}
	if _, st := hooks.count(); st < 1 {
		t.Fatalf("no storage node answer told the Kafka consumer to wait: %v", hooks.byNode)
	}
	if got := itest.MetricSeries(t, c.Proc("storage-1").AdminAddr)["sluice_storage_quota_throttled_total"]; got <= storageBefore {
		t.Fatalf("the storage node throttled no Kafka fetch: %v, %v before", got, storageBefore)
	}
	t.Logf("%d Kafka records through the same quotas; throttled answers by broker: %v", n, hooks.byNode)
}

// readValuesAs reads n records with a group consumer of cfg and returns their
// values by partition in offset order.
func readValuesAs(t *testing.T, ctx context.Context, cfg client.ConsumerConfig, n int) map[int32][]string {
	t.Helper()
	cs, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	out := map[int32][]string{}
	for got := 0; got < n; {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d records: %v", got, n, err)
		}
		for _, r := range recs {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
		}
		got += len(recs)
	}
	return out
}
