package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/localcluster"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// keyedLoad runs an SDK producer sending keyed records ("key-K:seq") until
// stop is closed, and returns what was sent and what was acknowledged.
type keyedLoad struct {
	mu    sync.Mutex
	sent  int
	acked map[string]bool
	errs  []error
}

func runKeyedLoad(t *testing.T, p *client.Producer, topic string, keys int, stop <-chan struct{}) *keyedLoad {
	t.Helper()
	l := &keyedLoad{acked: map[string]bool{}}
	seq := make([]int, keys)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return l
		default:
		}
		k := i % keys
		v := fmt.Sprintf("key-%d:%d", k, seq[k])
		seq[k]++
		err := p.Send(context.Background(), client.ProducerRecord{Topic: topic, Partition: -1, Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(v)},
			func(m client.RecordMetadata) {
				l.mu.Lock()
				defer l.mu.Unlock()
				if m.Err != nil {
					l.errs = append(l.errs, m.Err)
					return
				}
				l.acked[v] = true
			})
		if err != nil {
			t.Errorf("send: %v", err)
			return l
		}
		l.mu.Lock()
		l.sent++
		l.mu.Unlock()
		if i%200 == 199 {
			time.Sleep(2 * time.Millisecond) // a steady load, not a flood
		}
	}
}

// errSummary counts the failures by message.
func (l *keyedLoad) errSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[string]int{}
	for _, e := range l.errs {
		counts[e.Error()]++
	}
	var parts []string
	for msg, n := range counts {
		parts = append(parts, fmt.Sprintf("%d× %s", n, msg))
	}
	return strings.Join(parts, "; ")
}

// readValues reads every partition of topic from the start to its high
// watermark and returns the values per partition in offset order.
func readValues(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, partitions int) map[int32][]string {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("read-back")
	defer pool.Close()
	out := map[int32][]string{}
	for p := int32(0); p < int32(partitions); p++ {
		r := client.NewPartitionReader(meta, pool, topic, p, 0, client.ReaderConfig{MaxWait: 100 * time.Millisecond})
		for {
			recs, err := r.Fetch(ctx)
			if err != nil {
				t.Fatalf("fetch %s-%d at %d: %v", topic, p, r.Offset(), err)
			}
			for _, rec := range recs {
				out[p] = append(out[p], string(rec.Value))
			}
			if r.HighWatermark() >= 0 && r.Offset() >= r.HighWatermark() {
				break
			}
		}
	}
	return out
}

// checkExactlyOnceInOrder checks the log against the load: every acknowledged
// record is stored, no record is stored twice, and each key's records are in
// send order (sequence numbers only grow, without gaps between stored ones
// being reordered).
func checkExactlyOnceInOrder(t *testing.T, stored map[int32][]string, l *keyedLoad) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for p, values := range stored {
		for _, v := range values {
			if seen[v] {
				t.Fatalf("%s stored twice", v)
			}
			seen[v] = true
			k, s, _ := strings.Cut(v, ":")
			n, _ := strconv.Atoi(s)
			if prev, ok := last[k]; ok && n <= prev {
				t.Fatalf("partition %d: %s after seq %d: per-key order broken", p, v, prev)
			}
			last[k] = n
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for v := range l.acked {
		if !seen[v] {
			t.Fatalf("acknowledged record %s is not in the log", v)
		}
	}
	t.Logf("sent %d, acknowledged %d, stored %d, failed %d", l.sent, len(l.acked), len(seen), len(l.errs))
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func quietProducer(t *testing.T, frontends []string) *client.Producer {
	t.Helper()
	cfg := client.DefaultProducerConfig()
	cfg.Frontends = frontends
	cfg.Linger = 2 * time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFrontendKillDuringProducerLoad: kill -9 one of two frontends under a
// steady SDK load: the producer moves to the other, no acknowledged record
// is lost, none is stored twice, and per-key order holds.
func TestFrontendKillDuringProducerLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, ctx, c, "fe-kill", 4, 3, map[string]string{"min.insync.replicas": "2"})
	p := quietProducer(t, c.FrontendURLs())
	stop := make(chan struct{})
	done := make(chan *keyedLoad)
	go func() { done <- runKeyedLoad(t, p, "fe-kill", 50, stop) }()
	time.Sleep(2 * time.Second)
	c.StopProc(c.Proc("frontend"), true)
	time.Sleep(3 * time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(l.errs) > 0 {
		t.Fatalf("%d records failed: %s", len(l.errs), l.errSummary())
	}
	if len(l.acked) != l.sent {
		t.Fatalf("acknowledged %d of %d", len(l.acked), l.sent)
	}
	checkExactlyOnceInOrder(t, readValues(t, ctx, c, "fe-kill", 4), l)
}

// TestLeaderKillDuringIdempotentLoad: kill -9 a partition leader under an
// idempotent acks=all load: after the failover every record is stored
// exactly once, in per-key order.
func TestLeaderKillDuringIdempotentLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, ctx, c, "idem", 3, 3, map[string]string{"min.insync.replicas": "2"})
	waitFullISR(t, ctx, c, "idem", 3)
	p := quietProducer(t, c.FrontendURLs())
	stop := make(chan struct{})
	done := make(chan *keyedLoad)
	go func() { done <- runKeyedLoad(t, p, "idem", 30, stop) }()
	time.Sleep(2 * time.Second)
	leader, _ := leaderOf(t, ctx, c, "idem", 0)
	c.StopProc(c.Proc(fmt.Sprintf("storage-%d", leader)), true)
	time.Sleep(5 * time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(l.errs) > 0 || len(l.acked) != l.sent {
		t.Fatalf("acknowledged %d of %d, %d failed (%s): the producer should ride out the failover", len(l.acked), l.sent, len(l.errs), l.errSummary())
	}
	checkExactlyOnceInOrder(t, readValues(t, ctx, c, "idem", 3), l)
}
