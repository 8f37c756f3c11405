package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestKafkaRegexSubscription: a franz-go KIP-848 consumer subscribed by
// regular expression (ConsumeRegex, which sends SubscribedTopicRegex) reads
// the matching topic and not the other, nor the internal __consumer_offsets
// its pattern also names, then reads a matching topic created after it
// joined; the test logs how long that took from the creation.
func TestKafkaRegexSubscription(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "rx-first", 2, 1)
	itest.CreateTopic(t, ctx, c, "other", 1, 1)
	itest.ProduceValues(t, c, "rx-first", "first", 100)
	itest.ProduceValues(t, c, "other", "other", 100)
	cl := itest.FranzClient(t, c, kgo.ConsumerGroup("regex-readers"), kgo.ConsumeRegex(), kgo.ConsumeTopics("rx-.*", "__consumer_.*"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	poll := func(until func() bool, what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !until() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: read %v", what, seen)
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				seen[r.Topic]++
				if !strings.HasPrefix(string(r.Value), strings.TrimPrefix(r.Topic, "rx-")) {
					t.Errorf("record %q of %s", r.Value, r.Topic)
				}
			})
		}
	}
	poll(func() bool { return seen["rx-first"] == 100 }, "the matching topic")
	created := time.Now()
	itest.CreateTopic(t, ctx, c, "rx-later", 1, 1)
	itest.ProduceValues(t, c, "rx-later", "later", 50)
	poll(func() bool { return seen["rx-later"] == 50 }, "a matching topic created later")
	t.Logf("the regex consumer read a matching topic %v after its creation", time.Since(created).Round(time.Millisecond))
	if seen["__consumer_offsets"] != 0 {
		t.Fatalf("the regex consumer read %d records of the internal __consumer_offsets", seen["__consumer_offsets"])
	}
	if seen["other"] != 0 {
		t.Fatalf("the regex consumer read %d records of a topic it does not match", seen["other"])
	}
}
