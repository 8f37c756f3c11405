package ops

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestProducerFigures measures what docs/performance.md reports for
// producers through a frontend; it runs only with SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -run TestProducerFigures -v ./local/ops/
//
// One frontend, RF=1, 4 partitions, 100-byte values: the SDK producer with
// acks=leader (unthrottled, 5 s), JSON record bodies from 4 posters (1,000
// records a request, 5 s), the frontend's CPU time per million records for
// each, and the SDK's produce latency at half its maximum rate.
func TestProducerFigures(t *testing.T) {
	itest.FiguresOnly(t, "producer figures")
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "pf", 4, 1)
	fe := c.Proc("frontend")
	var max float64
	for run := 1; run <= 3; run++ {
		cpu0 := itest.CPUSeconds(t, fe.Pid())
		n, d := sdkThroughput(t, c, "pf", 5*time.Second, 0, nil)
		cpu := itest.CPUSeconds(t, fe.Pid()) - cpu0
		rate := float64(n) / d.Seconds()
		max = rateMax(max, rate)
		t.Logf("FIGURE SDK producer run %d: %.0f records/s, %.1f MB/s, frontend CPU %.2f s per million records", run, rate, rate*100/1e6, cpu/(float64(n)/1e6))
	}
	for run := 1; run <= 3; run++ {
		cpu0 := itest.CPUSeconds(t, fe.Pid())
		n, d := jsonThroughput(t, c, "pf", 5*time.Second)
		cpu := itest.CPUSeconds(t, fe.Pid()) - cpu0
		rate := float64(n) / d.Seconds()
		t.Logf("FIGURE JSON bodies run %d: %.0f records/s, %.1f MB/s, frontend CPU %.2f s per million records", run, rate, rate*100/1e6, cpu/(float64(n)/1e6))
	}
	var lat []time.Duration
	n, d := sdkThroughput(t, c, "pf", 5*time.Second, max/2, &lat)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("FIGURE SDK latency at %.0f records/s (half of %.0f; achieved %.0f): p50 %v, p99 %v, max %v",
		max/2, max, float64(n)/d.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

func rateMax(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}

// sdkThroughput sends 100-byte keyless records with acks=leader for d, at
// rate records/s (0: as fast as the producer takes them), and returns how
// many were acknowledged; with lat it records each record's latency.
func sdkThroughput(t *testing.T, c *localcluster.Cluster, topic string, d time.Duration, rate float64, lat *[]time.Duration) (int64, time.Duration) {
	t.Helper()
	cfg := client.DefaultProducerConfig()
	cfg.Frontends, cfg.Acks, cfg.DisableIdempotence = c.FrontendURLs(), protocol.AcksLeader, true
	cfg.Logger = loadcheck.QuietLogger()
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 100)
	var acked atomic.Int64
	var mu sync.Mutex
	start := time.Now()
	for i := int64(0); time.Since(start) < d; i++ {
		if rate > 0 {
			if ahead := time.Duration(float64(i)/rate*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		sent := time.Now()
		err := p.Send(context.Background(), client.ProducerRecord{Topic: topic, Partition: -1, Value: value}, func(m client.RecordMetadata) {
			if m.Err != nil {
				return
			}
			acked.Add(1)
			if lat != nil {
				l := time.Since(sent)
				mu.Lock()
				*lat = append(*lat, l)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return acked.Load(), time.Since(start)
}

// jsonThroughput posts JSON bodies of 1,000 records from 4 goroutines for d.
func jsonThroughput(t *testing.T, c *localcluster.Cluster, topic string, d time.Duration) (int64, time.Duration) {
	t.Helper()
	value := strings.Repeat("x", 100)
	var recs []map[string]string
	for i := 0; i < 1000; i++ {
		recs = append(recs, map[string]string{"value": value})
	}
	body := map[string]any{"records": recs}
	url := c.FrontendURL() + "/v1/topics/" + topic + "/records?acks=leader"
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				r, err := itest.TryPost(context.Background(), url, body)
				if err != nil {
					t.Error(err)
					return
				}
				total.Add(int64(len(r.Offsets)))
			}
		}()
	}
	wg.Wait()
	return total.Load(), time.Since(start)
}
