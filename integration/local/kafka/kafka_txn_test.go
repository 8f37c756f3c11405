package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/libs/txns"
)

// TestKafkaTransactions runs franz-go's transactional producer against a
// cluster, once as franz-go runs it against this cluster (transaction
// version 2: produce and EndTxn bump and add implicitly) and once capped at
// Kafka 3.9's request versions (version 1: AddPartitionsToTxn, verified
// produce): a committed and an aborted transaction over three partitions;
// read_committed readers (franz-go, and the SDK's reader over the storage
// protocol) see exactly the committed records and stop at an open
// transaction until it commits, read_uncommitted ones see everything; the
// metrics and sluicectl show the open transaction; a second producer with
// the same transactional id fences the first; DescribeTransactions and
// ListTransactions report the id, DescribeProducers the producer and its
// open transaction on each partition.
func TestKafkaTransactions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := kadm.NewClient(itest.FranzClient(t, c))
	t.Run("version 2", func(t *testing.T) { kafkaTxnFlow(t, ctx, c, adm, "v2") })
	t.Run("version 1", func(t *testing.T) { kafkaTxnFlow(t, ctx, c, adm, "v1", kgo.MaxVersions(kversion.V3_9_0())) })
}

func kafkaTxnFlow(t *testing.T, ctx context.Context, c *localcluster.Cluster, adm *kadm.Client, name string, opts ...kgo.Opt) {
	topic, id := "txn-out-"+name, "tx-e2e-"+name
	if created, err := adm.CreateTopics(ctx, 3, 3, nil, topic); err != nil || created[topic].Err != nil {
		t.Fatalf("CreateTopics: %v %+v", err, created)
	}
	itest.WaitLeaders(t, ctx, c, topic, 3)

	producer := itest.FranzClient(t, c, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionTimeout(20 * time.Second)}, opts...)...)
	inTxn := func(prefix string, n int, commit bool) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := producer.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatalf("%s: produce %d: %v", prefix, i, err)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("%s: end: %v", prefix, err)
		}
	}
	inTxn("committed", 30, true)
	inTxn("aborted", 30, false)

	// An open transaction holds read_committed readers back.
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "late-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	committedReader := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	// Wait the whole time for all 36: the 6 of the open transaction must
	// not come.
	got := itest.PollValues(t, ctx, committedReader, 36, 3*time.Second)
	if n := itest.CountPrefix(got, "committed-"); n != 30 || len(got) != 30 {
		t.Fatalf("read_committed with a transaction open: %d records, %d committed: %v", len(got), n, got)
	}
	uncommitted := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	all := itest.PollValues(t, ctx, uncommitted, 66, 30*time.Second)
	if itest.CountPrefix(all, "aborted-") != 30 || itest.CountPrefix(all, "late-") != 6 {
		t.Fatalf("read_uncommitted: %d records: %v", len(all), all)
	}

	// ListTransactions and DescribeTransactions see the open transaction.
	testkit.Eventually(t, 30*time.Second, func() error {
		described, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return err
		}
		d, err := described.On(id, nil)
		if err != nil {
			return err
		}
		if d.State != "Ongoing" || len(d.Topics[topic]) == 0 || d.ProducerID < 0 {
			return fmt.Errorf("DescribeTransactions: %+v", d)
		}
		listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
		if err != nil {
			return err
		}
		if _, ok := listed[id]; !ok {
			return fmt.Errorf("ListTransactions(Ongoing): %+v", listed)
		}
		return nil
	})

	// DescribeProducers: every partition's leader knows the producer, its
	// transaction open since the first of the late records.
	described, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pid := described[id].ProducerID
	for p, start := range txnStarts(t, ctx, adm, topic, pid) {
		if start < 20 { // each partition holds 20 records and 2 markers before
			t.Fatalf("DescribeProducers: producer %d's transaction on %s-%d starts at %d, want the first late record's offset", pid, topic, p, start)
		}
	}

	// The metrics show it: the coordinator's leader counts it open, the
	// partitions' leaders hold their last stable offsets back for it.
	if v := itest.MetricSeries(t, itest.OffsetsLeader(t, c).AdminAddr); v[`sluice_offsets_transactions{state="Ongoing"}`] != 1 || v["sluice_offsets_transactions_committed_total"] < 1 {
		t.Fatalf("offsets leader's transaction metrics: ongoing %v, committed %v", v[`sluice_offsets_transactions{state="Ongoing"}`], v["sluice_offsets_transactions_committed_total"])
	}
	var open, held float64
	for i := 1; i <= 3; i++ {
		v := itest.MetricSeries(t, c.Proc(fmt.Sprintf("storage-%d", i)).AdminAddr)
		for p := range 3 {
			lv := fmt.Sprintf(`{partition="%d",topic="%s"}`, p, topic)
			if v["sluice_storage_partition_leader"+lv] == 1 {
				open += v["sluice_storage_open_transactions"+lv]
				held += v["sluice_storage_lso_lag_offsets"+lv]
			}
		}
	}
	if open != 3 || held != 6 {
		t.Fatalf("the partitions' leaders report %v open transactions holding back %v offsets, want 3 and 6", open, held)
	}

	// sluicectl shows it too.
	out, errOut, code := itest.Sluicectl(t, c, "", "txn", "list", "--state", "Ongoing", "-o", "json")
	var listed []txns.Description
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].ID != id || listed[0].State != "Ongoing" {
		t.Fatalf("sluicectl txn list: exit %d: %s %s", code, out, errOut)
	}
	if out, errOut, code = itest.Sluicectl(t, c, "", "txn", "describe", id); code != 0 || !strings.Contains(out, "Ongoing") || !strings.Contains(out, topic+"-") {
		t.Fatalf("sluicectl txn describe: exit %d: %s %s", code, out, errOut)
	}
	if _, _, code = itest.Sluicectl(t, c, "", "txn", "describe", "no-such-id"); code != 1 {
		t.Fatalf("sluicectl txn describe of an unknown id: exit %d, want 1", code)
	}

	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	more := itest.PollValues(t, ctx, committedReader, 6, 30*time.Second)
	if itest.CountPrefix(more, "late-") != 6 || len(more) != 6 {
		t.Fatalf("read_committed after the commit: %v", more)
	}
	for p, start := range txnStarts(t, ctx, adm, topic, pid) {
		if start != -1 {
			t.Fatalf("DescribeProducers after the commit: a transaction open on %s-%d at %d", topic, p, start)
		}
	}

	// The SDK's read_committed reader agrees, partition by partition.
	meta := client.NewMetadata(client.NewAdmin(c.MetadataURLs()))
	pool := storageclient.NewPool("txn-e2e")
	defer pool.Close()
	var sdk []string
	for p := range int32(3) {
		r := client.NewPartitionReader(meta, pool, topic, p, 0, client.ReaderConfig{Isolation: protocol.ReadCommitted, MaxWait: 50 * time.Millisecond})
		for attempt := 0; attempt < 50 && (r.LastStableOffset() < 0 || r.Offset() < r.LastStableOffset()); attempt++ {
			recs, err := r.Fetch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				sdk = append(sdk, string(rec.Value))
			}
		}
	}
	if itest.CountPrefix(sdk, "committed-") != 30 || itest.CountPrefix(sdk, "late-") != 6 || len(sdk) != 36 {
		t.Fatalf("SDK at read_committed: %d records: %v", len(sdk), sdk)
	}

	// A second session of the id fences the first.
	second := itest.FranzClient(t, c, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := second.ProduceSync(ctx, &kgo.Record{Value: []byte("second")}).FirstErr(); err != nil {
		t.Fatalf("the new session's produce: %v", err)
	}
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err = producer.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr()
	if err == nil {
		err = producer.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced session: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	last := itest.PollValues(t, ctx, committedReader, 1, 30*time.Second)
	if len(last) != 1 || last[0] != "second" {
		t.Fatalf("after the fenced session: %v", last)
	}
}

// txnStarts asks DescribeProducers for the partitions of a 3-partition
// topic and returns, per partition, where producer pid's open transaction
// starts (-1: none); the producer must be listed on each.
func txnStarts(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, pid int64) map[int32]int64 {
	t.Helper()
	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, dpp := range dp[topic].Partitions {
		pr, ok := dpp.ActiveProducers[pid]
		if dpp.Err != nil || !ok {
			t.Fatalf("DescribeProducers of %s-%d: %v, producers %+v; want producer %d", topic, p, dpp.Err, dpp.ActiveProducers, pid)
		}
		out[p] = pr.CurrentTxnStartOffset
	}
	if len(out) != 3 {
		t.Fatalf("DescribeProducers: %d partitions of %s", len(out), topic)
	}
	return out
}

// TestKafkaGroupTransactSession runs franz-go's consume-transform-produce
// helper (GroupTransactSession): two transformers in one group read an
// input topic at read_committed and write each record to an output topic
// within a transaction that also commits the group's offsets. Mid-run the
// storage node leading an output partition is killed (kill -9), then one
// transformer dies in the middle of a transaction (its client closed
// without ending it: the coordinator aborts it at its timeout, and
// require_stable holds the other transformer's offset fetch until then),
// then the offsets service's Raft leader (the transaction coordinator) is
// killed.
// The output read at read_committed holds every input record exactly once,
// in per-key order; read_uncommitted shows the aborted attempts too.
func TestKafkaGroupTransactSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const total = 100000
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := kadm.NewClient(itest.FranzClient(t, c))
	for _, topic := range []string{"gts-in", "gts-out"} {
		if created, err := adm.CreateTopics(ctx, 3, 3, nil, topic); err != nil || created[topic].Err != nil {
			t.Fatalf("CreateTopics %s: %v %+v", topic, err, created)
		}
		itest.WaitLeaders(t, ctx, c, topic, 3)
	}
	in := itest.FranzClient(t, c, kgo.DefaultProduceTopic("gts-in"))
	for i := range total {
		in.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := in.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var diedMidTxn atomic.Bool
	var transformed atomic.Int64 // records of committed transactions
	transformer := func(name string, stop <-chan struct{}) error {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.TransactionalID("gts-"+name),
			kgo.ConsumerGroup("gts"), kgo.ConsumeTopics("gts-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("gts-out"), kgo.ClientID(name),
			kgo.TransactionTimeout(10*time.Second))
		if err != nil {
			return err
		}
		defer s.Close()
		var stopAt time.Time
		for {
			select {
			case <-stop:
				// Asked to die: it does so inside its next transaction,
				// or gives up waiting for records to start one.
				if stopAt.IsZero() {
					stopAt = time.Now()
				} else if time.Since(stopAt) > 10*time.Second {
					return nil
				}
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := s.PollRecords(pctx, 200) // many small transactions
			pcancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if fs.Empty() {
				continue
			}
			if err := s.Begin(); err != nil {
				return fmt.Errorf("%s: begin: %w", name, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				s.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("t-"), r.Value...)}, nil)
			})
			select {
			case <-stop: // die mid-transaction
				if err := s.Client().Flush(ctx); err != nil {
					return fmt.Errorf("%s: flush: %w", name, err)
				}
				diedMidTxn.Store(true)
				s.Client().Close()
				return nil
			default:
			}
			committed, err := s.End(ctx, kgo.TryCommit)
			if err != nil {
				return fmt.Errorf("%s: end: %w", name, err)
			}
			if committed {
				transformed.Add(int64(fs.NumRecords()))
			}
		}
	}
	stopA, stopB := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 2)
	go func() { errs <- transformer("a", stopA) }()
	go func() { errs <- transformer("b", stopB) }()

	out := itest.FranzClient(t, c, kgo.ConsumeTopics("gts-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	lastOfKey := map[string]int{}
	var dupes, disorder int
	deadline := time.Now().Add(3 * time.Minute)
	// The failures, at points of the transformers' progress.
	var step atomic.Int32
	chaos := make(chan struct{})
	go func() {
		defer close(chaos)
		for _, at := range []struct {
			frac int64
			do   func()
		}{
			{15, func() {
				leader, _ := itest.LeaderOf(t, ctx, c, "gts-out", 0)
				t.Logf("%d records transformed: killing storage-%d, leader of gts-out-0", transformed.Load(), leader)
				c.StopProc(c.Proc(fmt.Sprintf("storage-%d", leader)), true)
			}},
			{35, func() {
				t.Logf("%d records transformed: transformer a dies mid-transaction", transformed.Load())
				close(stopA)
			}},
			{60, func() {
				p := itest.OffsetsLeader(t, c)
				t.Logf("%d records transformed: killing %s, the transaction coordinator's leader", transformed.Load(), p.Name)
				c.StopProc(p, true)
			}},
		} {
			for transformed.Load() < total*at.frac/100 {
				if ctx.Err() != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			at.do()
			step.Add(1)
		}
	}()
	for len(seen) < total && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := out.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			v := strings.TrimPrefix(string(r.Value), "t-")
			if seen[v]++; seen[v] > 1 {
				dupes++
			}
			var n int
			fmt.Sscan(v, &n)
			if prev, ok := lastOfKey[string(r.Key)]; ok && n <= prev {
				disorder++
			}
			lastOfKey[string(r.Key)] = n
		})
	}
	<-chaos
	if step.Load() < 2 {
		close(stopA)
	}
	close(stopB)
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("transformer: %v", err)
		}
	}
	if len(seen) != total || dupes != 0 || disorder != 0 || step.Load() != 3 {
		t.Fatalf("output at read_committed: %d of %d input records, %d duplicates, %d out of per-key order (%d failures done)", len(seen), total, dupes, disorder, step.Load())
	}
	// Aborted attempts are in the log, visible to read_uncommitted.
	raw := itest.FranzClient(t, c, kgo.ConsumeTopics("gts-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var n int
	for pdeadline := time.Now().Add(20 * time.Second); n <= total && time.Now().Before(pdeadline); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		n += raw.PollFetches(pctx).NumRecords()
		pcancel()
	}
	t.Logf("read_uncommitted sees %d records for %d inputs; transformer a died mid-transaction: %v", n, total, diedMidTxn.Load())
	if !diedMidTxn.Load() || n <= total {
		t.Fatalf("read_uncommitted saw %d records (transformer a died mid-transaction: %v): no aborted attempt is visible", n, diedMidTxn.Load())
	}
}
