// Package loadcheck is what the integration suites (processes and
// containers) share to put a keyed load through the SDK producer and check
// the log against it afterwards: every acknowledged record stored, none
// twice, each key's records in send order.
package loadcheck

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
	"github.com/sluicemq/sluice/libs/storageclient"
)

// QuietLogger discards the SDK's log lines.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// KeyedLoad is what an SDK producer sent ("key-K:seq" values, keyed
// "key-K") and what was acknowledged. Its fields are guarded by mu once
// records are in flight; read them after the producer was closed.
type KeyedLoad struct {
	mu    sync.Mutex
	Sent  int
	Acked map[string]bool
	Errs  []error
	seq   []int
}

// NewKeyedLoad returns an empty load.
func NewKeyedLoad() *KeyedLoad { return &KeyedLoad{Acked: map[string]bool{}} }

// Send sends record i of a load over keys keys; false when Send failed
// (reported with t.Errorf).
func (l *KeyedLoad) Send(t *testing.T, p *client.Producer, topic string, i, keys int) bool {
	if l.seq == nil {
		l.seq = make([]int, keys)
	}
	k := i % keys
	v := fmt.Sprintf("key-%d:%d", k, l.seq[k])
	l.seq[k]++
	err := p.Send(context.Background(), client.ProducerRecord{Topic: topic, Partition: -1, Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(v)},
		func(m client.RecordMetadata) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if m.Err != nil {
				l.Errs = append(l.Errs, m.Err)
				return
			}
			l.Acked[v] = true
		})
	if err != nil {
		t.Errorf("send: %v", err)
		return false
	}
	l.mu.Lock()
	l.Sent++
	l.mu.Unlock()
	return true
}

// SendN sends n records over keys keys.
func (l *KeyedLoad) SendN(t *testing.T, p *client.Producer, topic string, keys, n int) {
	for i := 0; i < n; i++ {
		if !l.Send(t, p, topic, i, keys) {
			return
		}
	}
}

// Produce sends n records over keys keys to each topic with a new SDK
// producer configured by cfg, closes it, and requires every record
// acknowledged (what says how, in the failure message).
func Produce(t *testing.T, ctx context.Context, cfg client.ProducerConfig, keys, n int, what string, topics ...string) *KeyedLoad {
	t.Helper()
	p, err := client.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := NewKeyedLoad()
	for _, topic := range topics {
		l.SendN(t, p, topic, keys, n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, what)
	return l
}

// Run sends a steady keyed load until stop is closed, pausing 2ms after
// every pauseEvery records (a steady load, not a flood: the cluster shares
// the machine's cores).
func Run(t *testing.T, p *client.Producer, topic string, keys, pauseEvery int, stop <-chan struct{}) *KeyedLoad {
	l := NewKeyedLoad()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return l
		default:
		}
		if !l.Send(t, p, topic, i, keys) {
			return l
		}
		if i%pauseEvery == pauseEvery-1 {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// AckedSet returns a copy of the acknowledged values.
func (l *KeyedLoad) AckedSet() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool, len(l.Acked))
	for v := range l.Acked {
		out[v] = true
	}
	return out
}

// ErrSummary counts the failures by message.
func (l *KeyedLoad) ErrSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[string]int{}
	for _, e := range l.Errs {
		counts[e.Error()]++
	}
	var parts []string
	for msg, n := range counts {
		parts = append(parts, fmt.Sprintf("%d× %s", n, msg))
	}
	return strings.Join(parts, "; ")
}

// RequireAllAcknowledged fails the test unless every record sent was
// acknowledged and none failed; what says what the producer went through.
func (l *KeyedLoad) RequireAllAcknowledged(t *testing.T, what string) {
	t.Helper()
	l.mu.Lock()
	failed, acked, sent := len(l.Errs), len(l.Acked), l.Sent
	l.mu.Unlock()
	if failed > 0 || acked != sent {
		t.Fatalf("acknowledged %d of %d, %d failed (%s)%s", acked, sent, failed, l.ErrSummary(), what)
	}
}

// ReadValues reads every partition of topic from the start to its high
// watermark through the metadata at metadataURLs and returns the values per
// partition in offset order.
func ReadValues(t *testing.T, ctx context.Context, metadataURLs []string, topic string, partitions int) map[int32][]string {
	t.Helper()
	meta := client.NewMetadata(client.NewAdmin(metadataURLs))
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

// CheckExactlyOnceInOrder checks the log against the load: every
// acknowledged record is stored, none is stored twice, and each key's
// sequence numbers only grow.
func CheckExactlyOnceInOrder(t *testing.T, stored map[int32][]string, l *KeyedLoad) {
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
	for v := range l.Acked {
		if !seen[v] {
			t.Fatalf("acknowledged record %s is not in the log", v)
		}
	}
	t.Logf("sent %d, acknowledged %d, stored %d, failed %d", l.Sent, len(l.Acked), len(seen), len(l.Errs))
}
