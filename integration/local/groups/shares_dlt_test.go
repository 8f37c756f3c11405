package groups

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/shares"
)

// TestShareDeadLettersAndDelays: a rejected record (with the consumer's
// reason) and one released past the delivery limit go to the group's
// dead-letter topic with headers naming their source; sluicectl replays
// them into the source topic, where the group gets them again. A record
// with a sluice-deliver-at header, and one of a topic with
// delivery.delay.ms, arrive no earlier than their time, and the records
// behind them are not held back.
func TestShareDeadLettersAndDelays(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "jobs", 1, 3)
	itest.CreateTopic(t, ctx, c, "jobs-dlt", 1, 3)
	itest.CreateTopicWith(t, ctx, c, cluster.CreateTopicRequest{Name: "slow", Partitions: 1, ReplicationFactor: 3, Config: map[string]string{"delivery.delay.ms": "2000"}})
	itest.ConfigureShareGroup(t, ctx, c, "dg", map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigDeliveryLimit: "2",
		shares.ConfigLockDurationMs: "1000", shares.ConfigDeadLetterTopic: "jobs-dlt"})
	deliverAt := time.Now().Add(4 * time.Second)
	recs := []map[string]any{{"key": "late", "value": "late", "headers": map[string]string{shares.HeaderDeliverAt: deliverAt.UTC().Format(time.RFC3339Nano)}}}
	for i := range 10 {
		v := "n-" + strconv.Itoa(i)
		recs = append(recs, map[string]any{"key": v, "value": v, "headers": map[string]string{"trace": v}})
	}
	itest.PostJSON(t, c.FrontendURL()+"/v1/topics/jobs/records?acks=all", map[string]any{"records": recs})

	sc, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: c.MetadataURLs(), Offsets: c.OffsetsURLs(),
		Group: "dg", Topic: "jobs", MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(context.Background())
	got := map[string]int{}
	var lateAt time.Time
	itest.PollShare(t, ctx, sc, func(r client.ShareRecord, at time.Time) bool {
		v := string(r.Value)
		got[v]++
		switch {
		case v == "late":
			lateAt = at
			sc.Acknowledge(r, shares.AckAccept)
		case v == "n-0":
			sc.Reject(r, "bad payload")
		case v == "n-1":
			sc.Acknowledge(r, shares.AckRelease)
		default:
			sc.Acknowledge(r, shares.AckAccept)
			if got[v] > 1 {
				t.Fatalf("%s delivered %d times", v, got[v])
			}
		}
		if v != "late" && at.After(deliverAt) {
			t.Errorf("%s arrived at %v, after the delayed record's time %v: the delayed record held it back", v, at, deliverAt)
		}
		return !lateAt.IsZero()
	})
	if err := sc.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if lateAt.Before(deliverAt) {
		t.Fatalf("the delayed record arrived at %v, before its time %v", lateAt, deliverAt)
	}
	if got["n-1"] != 2 || got["n-0"] != 1 || got["late"] != 1 {
		t.Fatalf("deliveries %v: want n-1 twice (then past the limit), n-0 and late once", got)
	}
	t.Logf("the delayed record arrived %v after its time", lateAt.Sub(deliverAt))

	// Both archived records reach the dead-letter topic once.
	sh := shares.NewClient(c.OffsetsURLs())
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := sh.Describe(ctx, "dg")
		if err == nil && d.Partitions[0].Lag == 0 && d.Partitions[0].Archived == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the archived records did not reach the dead-letter topic: %+v, %v", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dead := readPartition(t, ctx, c, "jobs-dlt", 0)
	if len(dead) != 2 {
		t.Fatalf("the dead-letter topic holds %d records, want 2", len(dead))
	}
	for _, r := range dead {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		want := map[string]string{"n-0": "bad payload", "n-1": "delivery count limit 2 reached"}[string(r.Value)]
		if want == "" || h[shares.HeaderReason] != want || h[shares.HeaderSourceTopic] != "jobs" || h[shares.HeaderSourcePartition] != "0" ||
			h[shares.HeaderGroup] != "dg" || h["trace"] != string(r.Value) || string(r.Key) != string(r.Value) {
			t.Fatalf("dead letter %q: headers %v", r.Value, h)
		}
		off, _ := strconv.Atoi(h[shares.HeaderSourceOffset])
		if wantOff := map[string]int{"n-0": 1, "n-1": 2}[string(r.Value)]; off != wantOff {
			t.Fatalf("dead letter %q names offset %d, want %d", r.Value, off, wantOff)
		}
	}

	// Replay: both come back to the group as new records.
	if out := itest.MustSluicectl(t, c, "dead-letter", "replay", "jobs-dlt"); !strings.Contains(out, "replayed 2 records") {
		t.Fatalf("dead-letter replay: %s", out)
	}
	back := map[string]bool{}
	itest.PollShare(t, ctx, sc, func(r client.ShareRecord, _ time.Time) bool {
		if r.Offset < 11 || r.DeliveryCount != 1 {
			t.Fatalf("after the replay got %q at offset %d, delivery %d", r.Value, r.Offset, r.DeliveryCount)
		}
		for _, x := range r.Headers {
			if strings.HasPrefix(x.Key, shares.HeaderPrefix) {
				t.Fatalf("replayed record %q kept header %s", r.Value, x.Key)
			}
		}
		back[string(r.Value)] = true
		sc.Acknowledge(r, shares.AckAccept)
		return len(back) == 2
	})
	if !back["n-0"] || !back["n-1"] {
		t.Fatalf("after the replay the group got %v", back)
	}
	if err := sc.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// A topic's delivery.delay.ms delays every record.
	itest.ConfigureShareGroup(t, ctx, c, "slowg", map[string]string{shares.ConfigAutoOffsetReset: "earliest"})
	sent := time.Now()
	itest.ProduceValues(t, c, "slow", "s", 3)
	slow, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: c.MetadataURLs(), Offsets: c.OffsetsURLs(),
		Group: "slowg", Topic: "slow", MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close(context.Background())
	n := 0
	itest.PollShare(t, ctx, slow, func(r client.ShareRecord, at time.Time) bool {
		if at.Sub(time.UnixMilli(r.Timestamp)) < 2*time.Second {
			t.Fatalf("%q arrived %v after its timestamp; the topic delays records 2 s", r.Value, at.Sub(time.UnixMilli(r.Timestamp)))
		}
		slow.Acknowledge(r, shares.AckAccept)
		n++
		return n == 3
	})
	t.Logf("records of a topic with delivery.delay.ms=2000 arrived %v after they were sent", time.Since(sent))
}
