package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/localcluster"
)

// TestQuotasThrottleSDKClients: quotas set with sluicectl reach every
// frontend and storage node; an SDK producer and an SDK consumer whose client
// ids are over their quotas are slowed (each service counts the throttled
// requests) but lose nothing and see no error: every record is written and
// read back once, in per-key order.
func TestQuotasThrottleSDKClients(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startClusterConfig(t, localcluster.Config{Storage: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, ctx, c, "limited", 2, 1, nil)
	must(t, c, "quota", "set", "--client-id", "slow-producer", "--produce-bytes-per-sec", "20000")
	must(t, c, "quota", "set", "--client-id", "slow-consumer", "--fetch-bytes-per-sec", "20000")
	var qs []struct {
		ClientID           string `json:"client_id"`
		ProduceBytesPerSec int64  `json:"produce_bytes_per_sec"`
		FetchBytesPerSec   int64  `json:"fetch_bytes_per_sec"`
	}
	if err := json.Unmarshal([]byte(must(t, c, "quota", "list", "-o", "json")), &qs); err != nil || len(qs) != 2 || qs[0].ClientID != "slow-consumer" {
		t.Fatalf("quota list: %+v, %v", qs, err)
	}
	if _, errOut, code := sluicectl(t, c, "", "quota", "set", "--default"); code != 2 || !strings.Contains(errOut, "needs --produce-bytes-per-sec") {
		t.Fatalf("quota set without a rate: exit %d, %s", code, errOut)
	}
	// The frontends learn the quotas from metadata: a model read through each
	// one refreshes its cache, and shows the quotas once it holds them.
	for _, fe := range c.FrontendURLs() {
		eventually(t, 30*time.Second, func() error {
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
	if got := metricSeries(t, c.Proc("frontend").AdminAddr)[`sluice_frontend_quota_throttled_total{kind="produce"}`]; got < 1 {
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
	if got := metricSeries(t, c.Proc("storage-1").AdminAddr)["sluice_storage_quota_throttled_total"]; got < 1 {
		t.Fatalf("the storage node throttled no fetch: %v", got)
	}
	t.Logf("%d records through a 20 KB/s produce and fetch quota", n)
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
