package groups

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
)

// TestSDKTransactions runs the Go SDK's transactional API against a local
// cluster, with a Kafka client on the other side: franz-go reads the SDK's
// transactions at read_committed and the SDK's consumer reads franz-go's;
// a second SDK producer of the same transactional id fences the first; and
// a TxnSession moves an input topic to an output topic exactly once
// through an aborted transaction.
func TestSDKTransactions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, topic := range []string{"sdk-txn", "kafka-txn", "sdk-in", "sdk-out"} {
		itest.CreateTopic(t, ctx, c, topic, 3, 3)
	}
	txnProducer := func(id string) *client.Producer {
		cfg := client.DefaultProducerConfig()
		cfg.Frontends, cfg.Offsets, cfg.TransactionalID = c.FrontendURLs(), c.OffsetsURLs(), id
		cfg.TransactionTimeout = 20 * time.Second
		p, err := client.NewProducer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return p
	}
	send := func(p *client.Producer, topic, prefix string, n int) {
		t.Helper()
		for i := range n {
			rec := client.ProducerRecord{Topic: topic, Partition: -1, Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "%s%d", prefix, i)}
			if err := p.Send(ctx, rec, nil); err != nil {
				t.Fatalf("send %s%d: %v", prefix, i, err)
			}
		}
	}

	// The SDK writes, franz-go reads.
	p := txnProducer("sdk-tx")
	if err := p.Send(ctx, client.ProducerRecord{Topic: "sdk-txn", Partition: -1, Value: []byte("outside")}, nil); !errors.Is(err, client.ErrNoTransaction) {
		t.Fatalf("send outside a transaction: %v", err)
	}
	for _, step := range []struct {
		prefix string
		n      int
		commit bool
	}{{"c-", 30, true}, {"a-", 20, false}, {"c2-", 10, true}} {
		if err := p.BeginTxn(ctx); err != nil {
			t.Fatal(err)
		}
		send(p, "sdk-txn", step.prefix, step.n)
		end := p.AbortTxn
		if step.commit {
			end = p.CommitTxn
		}
		if err := end(ctx); err != nil {
			t.Fatalf("ending %s: %v", step.prefix, err)
		}
	}
	committed := itest.PollValues(t, ctx, itest.FranzClient(t, c, kgo.ConsumeTopics("sdk-txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())), 41, 3*time.Second)
	if len(committed) != 40 || itest.CountPrefix(committed, "c-") != 30 || itest.CountPrefix(committed, "c2-") != 10 {
		t.Fatalf("franz-go at read_committed: %d records: %v", len(committed), committed)
	}
	all := itest.PollValues(t, ctx, itest.FranzClient(t, c, kgo.ConsumeTopics("sdk-txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), 61, 3*time.Second)
	if len(all) != 60 || itest.CountPrefix(all, "a-") != 20 {
		t.Fatalf("franz-go at read_uncommitted: %d records: %v", len(all), all)
	}

	// franz-go writes, the SDK's group consumer reads.
	kp := itest.FranzClient(t, c, kgo.TransactionalID("kafka-tx"), kgo.DefaultProduceTopic("kafka-txn"))
	for _, step := range []struct {
		prefix string
		n      int
		commit bool
	}{{"k-", 25, true}, {"x-", 15, false}} {
		if err := kp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range step.n {
			kp.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "%s%d", step.prefix, i)}, nil)
		}
		if err := kp.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := kp.EndTransaction(ctx, kgo.TransactionEndTry(step.commit)); err != nil {
			t.Fatal(err)
		}
	}
	readSDK := func(group, isolation string, want int) []string {
		t.Helper()
		cfg := itest.ConsumerConfig(c, group, "kafka-txn")
		cfg.IsolationLevel = isolation
		cons, err := client.NewConsumer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(ctx)
		var got []string
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && len(got) <= want {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			recs, err := cons.Poll(pctx)
			pcancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			for _, r := range recs {
				got = append(got, string(r.Value))
			}
			if len(got) == want && len(recs) == 0 {
				break // a whole second with nothing more
			}
		}
		return got
	}
	if got := readSDK("sdk-rc", client.ReadCommitted, 25); len(got) != 25 || itest.CountPrefix(got, "k-") != 25 {
		t.Fatalf("SDK consumer at read_committed: %d records: %v", len(got), got)
	}
	if got := readSDK("sdk-ru", client.ReadUncommitted, 40); len(got) != 40 || itest.CountPrefix(got, "x-") != 15 {
		t.Fatalf("SDK consumer at read_uncommitted: %d records: %v", len(got), got)
	}

	// A read_committed group lags to the last stable offsets: the records
	// of a transaction left open do not count until it ends (the commit
	// marker and aborted records after the group's position do: they are
	// offsets it has yet to pass, as in Kafka).
	lagCfg := itest.ConsumerConfig(c, "sdk-lag", "kafka-txn")
	lagCfg.IsolationLevel, lagCfg.AutoCommit = client.ReadCommitted, false
	lagCons, err := client.NewConsumer(lagCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lagCons.Close(ctx)
	for n := 0; n < 25; {
		recs, err := lagCons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(recs)
	}
	if err := lagCons.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		kp.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "open-%d", i)}, nil)
	}
	if err := kp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := groups.NewClient(c.OffsetsURLs()).Describe(ctx, "sdk-lag")
	if err != nil {
		t.Fatal(err)
	}
	var lag, toStable, open int64
	for _, p := range d.Partitions {
		lag += p.Lag
		toStable += p.LastStable - p.Committed
		open += p.LogEnd - p.LastStable
	}
	if d.Isolation != client.ReadCommitted || len(d.Partitions) != 3 || lag != toStable || open != 5 {
		t.Fatalf("read_committed group with a transaction open: isolation %s, lag %d (to the last stable offsets: %d), records above them %d: %+v",
			d.Isolation, lag, toStable, open, d.Partitions)
	}
	if err := kp.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	// A second SDK producer of the id fences the first.
	second := txnProducer("sdk-tx")
	if err := second.BeginTxn(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTxn(ctx); err != nil {
		t.Fatalf("the fenced producer learns of it at its first write, not before: %v", err)
	}
	send(p, "sdk-txn", "zombie-", 3)
	if err := p.CommitTxn(ctx); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("the first producer's commit after the second began: %v", err)
	}
	send(second, "sdk-txn", "second-", 3)
	if err := second.CommitTxn(ctx); err != nil {
		t.Fatal(err)
	}
	committed = itest.PollValues(t, ctx, itest.FranzClient(t, c, kgo.ConsumeTopics("sdk-txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())), 44, 3*time.Second)
	if len(committed) != 43 || itest.CountPrefix(committed, "zombie-") != 0 || itest.CountPrefix(committed, "second-") != 3 {
		t.Fatalf("after the fenced producer: %d records: %v", len(committed), committed)
	}

	sdkTxnSession(t, ctx, c)
}

// sdkTxnSession moves 3,000 keyed records from sdk-in to sdk-out with a
// TxnSession; its second transaction is aborted (the consumer rewinds and
// reads that input again).
func sdkTxnSession(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	const n, keys = 3000, 30
	in := itest.QuietProducer(t, c.FrontendURLs())
	for i := range n {
		rec := client.ProducerRecord{Topic: "sdk-in", Partition: -1, Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte(strconv.Itoa(i))}
		if err := in.Send(ctx, rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pcfg := client.DefaultProducerConfig()
	pcfg.Frontends, pcfg.Offsets, pcfg.TransactionalID = c.FrontendURLs(), c.OffsetsURLs(), "sdk-session"
	s, err := client.NewTxnSession(itest.ConsumerConfig(c, "sdk-session", "sdk-in"), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	done, txns, aborted := 0, 0, 0
	deadline := time.Now().Add(time.Minute)
	for done < n && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		recs, err := s.Poll(pctx)
		pcancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			continue
		}
		for _, r := range recs {
			out := client.ProducerRecord{Topic: "sdk-out", Partition: -1, Key: r.Key, Value: append([]byte("out-"), r.Value...)}
			if err := s.Send(ctx, out, nil); err != nil {
				t.Fatal(err)
			}
		}
		txns++
		ok, err := s.End(ctx, txns != 2)
		if err != nil {
			t.Fatalf("transaction %d: %v", txns, err)
		}
		if ok {
			done += len(recs)
		} else {
			aborted += len(recs)
		}
	}
	if done != n || aborted == 0 {
		t.Fatalf("%d of %d input records committed in %d transactions (%d in the aborted one)", done, n, txns, aborted)
	}
	// The last transaction's offsets become the group's once its markers
	// are written, just after CommitTxn returned.
	gc := groups.NewClient(c.OffsetsURLs())
	testkit.WaitFor(t, 10*time.Second, "the group's committed offsets at the input's end", func() bool {
		return committedTotal(t, ctx, gc, "sdk-session", "sdk-in") == n
	})
	rc := itest.FranzClient(t, c, kgo.ConsumeTopics("sdk-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[string][]int{}
	count := 0
	deadline = time.Now().Add(30 * time.Second)
	for count < n && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := rc.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			v, err := strconv.Atoi(string(r.Value[len("out-"):]))
			if err != nil {
				t.Fatalf("output value %q", r.Value)
			}
			got[string(r.Key)] = append(got[string(r.Key)], v)
			count++
		})
	}
	seen := map[int]bool{}
	for key, vs := range got {
		for i, v := range vs {
			if seen[v] {
				t.Fatalf("input record %d is in the output twice", v)
			}
			seen[v] = true
			if i > 0 && vs[i-1] >= v {
				t.Fatalf("key %s: %d after %d", key, v, vs[i-1])
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("the output at read_committed holds %d of %d input records", len(seen), n)
	}
	all := itest.PollValues(t, ctx, itest.FranzClient(t, c, kgo.ConsumeTopics("sdk-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), n+aborted+1, 5*time.Second)
	if len(all) != n+aborted {
		t.Fatalf("read_uncommitted: %d records, want %d committed and %d aborted", len(all), n, aborted)
	}
}
