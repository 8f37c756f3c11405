package kafka

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/groups"
)

// TestKafkaGroupFigures measures what docs/performance.md reports for Kafka
// clients' groups, next to the SDK's in the same run; it runs only with
// SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -run TestKafkaGroupFigures -v ./local/kafka/
//
// Rebalance time: from a member's SIGTERM (clean leave) or SIGKILL (crash)
// until the two others own all six partitions, five times each, for SDK
// members, franz-go members of the classic protocol and of KIP-848's, and
// kcat members (whose ownership is read from the offsets service, as kcat
// reports none). Every member has a 3s session timeout (the coordinator's
// -session-timeout is 3s for KIP-848 members, whose session timeout is the
// coordinator's) and heartbeats every 500ms.
func TestKafkaGroupFigures(t *testing.T) {
	itest.FiguresOnly(t, "Kafka group figures")
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Extra: map[string][]string{"offsets": {"-session-timeout=3s"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "rebalance", 6, 1)

	kinds := []struct {
		name  string
		start func(name, group string) *itest.Member
	}{
		{"SDK", func(name, group string) *itest.Member { return itest.StartMember(t, c, name, group, "rebalance") }},
		{"franz-go classic", func(name, group string) *itest.Member {
			return startKafkaMember(t, c, name, group, "rebalance", "classic", "-session-timeout", "3s")
		}},
		{"franz-go KIP-848", func(name, group string) *itest.Member {
			return startKafkaMember(t, c, name, group, "rebalance", "consumer", "-session-timeout", "3s")
		}},
	}
	for i, k := range kinds {
		group := fmt.Sprintf("fig-%d", i)
		m1, m2 := k.start("m1", group), k.start("m2", group)
		for _, crash := range []bool{false, true} {
			var times []time.Duration
			for run := 0; run < 5; run++ {
				m3 := k.start("m3", group)
				itest.WaitOwnership(t, 6, []int{2, 2, 2}, m1, m2, m3)
				start := time.Now()
				if crash {
					m3.Kill()
				} else {
					m3.Stop()
				}
				times = append(times, itest.WaitOwnership(t, 6, []int{3, 3}, m1, m2).Sub(start))
			}
			logRebalance(t, k.name, crash, times)
		}
		m1.Stop()
		m2.Stop()
	}
	kcatRebalances(t, ctx, c)
}

// TestKafkaGroupBacklogFigures: one franz-go group member and one SDK
// consumer read the same backlog of 6,000,000 records of 100 bytes,
// SLUICE_FIGURES_RUNS runs each (3 by default), alternating; franz-go with its defaults and with the fetch
// size matched to the SDK's (1 MiB fetches, two prefetched: 3 MiB a
// partition); it runs only with SLUICE_FIGURES=1.
func TestKafkaGroupBacklogFigures(t *testing.T) {
	itest.FiguresOnly(t, "Kafka group figures")
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const partitions, backlog, size = 4, 6_000_000, 100
	itest.CreateTopic(t, ctx, c, "backlog", partitions, 1)
	itest.FillBacklog(t, ctx, c, "backlog", itest.Backlog{Partitions: partitions, PerPartition: backlog / partitions, Size: size})
	runs := 3
	if n, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_RUNS")); err == nil && n > 0 {
		runs = n
	}
	for run := 0; run < runs; run++ {
		d := sdkBacklog(t, ctx, c, fmt.Sprintf("sdk-read-%d", run), backlog)
		t.Logf("FIGURE backlog run %d SDK consumer: %d records of %d bytes in %v: %.0f records/s", run+1, backlog, size, d.Round(time.Millisecond), backlog/d.Seconds())
		d = kgoBacklog(t, ctx, c, fmt.Sprintf("kgo-read-%d", run), backlog)
		t.Logf("FIGURE backlog run %d franz-go group member (defaults): %d records of %d bytes in %v: %.0f records/s", run+1, backlog, size, d.Round(time.Millisecond), backlog/d.Seconds())
		cc := client.DefaultConsumerConfig()
		d = kgoBacklog(t, ctx, c, fmt.Sprintf("kgo-matched-%d", run), backlog, kgo.FetchMaxPartitionBytes(cc.FetchMaxBytes*int32(1+cc.Prefetch)))
		t.Logf("FIGURE backlog run %d franz-go group member (SDK's fetch size): %d records of %d bytes in %v: %.0f records/s", run+1, backlog, size, d.Round(time.Millisecond), backlog/d.Seconds())
		d = kgoBacklog(t, ctx, c, "", backlog, kgo.FetchMaxPartitionBytes(cc.FetchMaxBytes*int32(1+cc.Prefetch)))
		t.Logf("FIGURE backlog run %d franz-go without a group (SDK's fetch size): %d records of %d bytes in %v: %.0f records/s", run+1, backlog, size, d.Round(time.Millisecond), backlog/d.Seconds())
	}
}

func logRebalance(t *testing.T, kind string, crash bool, times []time.Duration) {
	slices.Sort(times)
	t.Logf("FIGURE %s rebalance after a member %s (3 members, 6 partitions, 3s session): %v, median %v",
		kind, map[bool]string{false: "leaves", true: "crashes"}[crash], times, times[len(times)/2])
}

// kcatRebalances measures kcat members' rebalances from the coordinator's
// view: until the offsets service holds the two others with three
// partitions each.
func kcatRebalances(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	kcat := itest.NeedTool(t, "kcat", "kcat")
	boot := strings.Join(c.KafkaAddrs(), ",")
	gc := groups.NewClient(c.OffsetsURLs())
	start := func() *kcatMember {
		return startKcatMemberWith(t, kcat, boot, "fig-kcat", "rebalance", "-X", "session.timeout.ms=3000", "-X", "heartbeat.interval.ms=500")
	}
	held := func(n, each int) time.Time {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if d, err := gc.Describe(ctx, "fig-kcat"); err == nil && d.State == groups.StateStable && len(d.Members) == n {
				ok := true
				for _, m := range d.Members {
					ok = ok && len(groups.Flatten(m.Assignment)) == each
				}
				if ok {
					return time.Now()
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("kcat group did not reach %d members of %d partitions", n, each)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	k1, k2 := start(), start()
	for _, crash := range []bool{false, true} {
		var times []time.Duration
		for run := 0; run < 5; run++ {
			k3 := start()
			held(3, 2)
			begin := time.Now()
			if crash {
				_ = k3.cmd.Process.Kill()
				<-k3.done
			} else {
				k3.stop()
			}
			times = append(times, held(2, 3).Sub(begin))
		}
		logRebalance(t, "kcat (librdkafka) classic", crash, times)
	}
	k1.stop()
	k2.stop()
}

// sdkBacklog reads n records with one SDK group member and returns the time
// from its first record.
func sdkBacklog(t *testing.T, ctx context.Context, c *localcluster.Cluster, group string, n int) time.Duration {
	cons, err := client.NewConsumer(itest.ConsumerConfig(c, group, "backlog"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	got := 0
	var start time.Time
	for got < n {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 && len(recs) > 0 {
			start = time.Now()
		}
		got += len(recs)
	}
	return time.Since(start)
}

// kgoBacklog is sdkBacklog for a franz-go group member ("" for group: a
// consumer of the topic's partitions without a group).
func kgoBacklog(t *testing.T, ctx context.Context, c *localcluster.Cluster, group string, n int, opts ...kgo.Opt) time.Duration {
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ConsumeTopics("backlog"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	if group != "" {
		opts = append(opts, kgo.ConsumerGroup(group))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	var start time.Time
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		if got == 0 && fs.NumRecords() > 0 {
			start = time.Now()
		}
		got += fs.NumRecords()
	}
	return time.Since(start)
}
