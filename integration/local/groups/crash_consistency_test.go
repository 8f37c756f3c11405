package groups

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/shares"
)

// TestCoordinationCrashConsistency kills an offsets replica and a metadata
// voter with SIGKILL at random moments, SLUICE_CRASH_ROUNDS times (50 by
// default), while transactions commit, share consumers acknowledge and
// groups commit offsets, restarting both each round. After each restart
// the restarted members have applied no entry their group has not
// committed. At the end nothing acknowledged is lost (every committed
// transaction's records read_committed, every acknowledged offset commit,
// every confirmed share acknowledgement, the topics), and each offsets
// replica, stopped by SIGKILL, holds a state file equal to the state
// replayed from its own Raft snapshot and log (`sluice-offsets
// check-state`): no entry applied twice or lost, whatever the moment of the
// kill.
func TestCoordinationCrashConsistency(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	rounds := 50
	if n, err := strconv.Atoi(os.Getenv("SLUICE_CRASH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	// Snapshots every few hundred entries, so that restarts replay from
	// snapshots too and check-state rebuilds from one.
	snapshots := []string{"-raft-snapshot-entries", "300", "-raft-snapshot-interval", "250ms"}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Extra: map[string][]string{"offsets": snapshots, "metadata": snapshots}})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "cc-txn", 2, 3)
	itest.CreateTopic(t, ctx, c, "cc-queue", 2, 3)
	itest.ConfigureShareGroup(t, ctx, c, "cc-workers", map[string]string{shares.ConfigAutoOffsetReset: "earliest"})
	const queued = 20000
	fill := itest.FranzClient(t, c, kgo.DefaultProduceTopic("cc-queue"))
	for i := range queued {
		fill.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := fill.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	commits := runCommitLoad(load, &wg, c, 4)
	txns := runTxnLoad(load, &wg, c, 2)
	fed := feedQueue(load, &wg, c)
	acks := runShareLoad(load, &wg, c, 2)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 31))
	for round := range rounds {
		time.Sleep(time.Duration(50+rng.IntN(350)) * time.Millisecond)
		off := c.OffsetsReplicas()[rng.IntN(len(c.OffsetsReplicas()))]
		meta := c.Voters()[rng.IntN(len(c.Voters()))]
		c.StopProc(off, true)
		c.StopProc(meta, true)
		// The killed replica's state file against its own log, as the
		// kill left them.
		checkState(t, c, off)
		for _, p := range []*localcluster.Proc{meta, off} {
			if err := c.StartProc(ctx, p); err != nil {
				t.Fatalf("round %d: restarting %s: %v", round, p.Name, err)
			}
		}
		checkAppliedCommitted(t, "sluice_offsets", off, c.OffsetsReplicas())
		checkAppliedCommitted(t, "sluice_metadata", meta, c.Voters())
		if (round+1)%10 == 0 {
			t.Logf("round %d: %d offset commits, %d transactions committed, %d share acknowledgements confirmed so far",
				round+1, commits.acked.Load(), txns.committedCount(), acks.confirmed.Load())
		}
	}
	// Let the load run once more with every member up, then stop it.
	time.Sleep(time.Second)
	stopLoad()
	wg.Wait()
	if commits.acked.Load() == 0 || txns.committedCount() == 0 || acks.confirmed.Load() == 0 {
		t.Fatalf("the load did not get through: %d commits, %d transactions, %d acknowledgements", commits.acked.Load(), txns.committedCount(), acks.confirmed.Load())
	}

	// Offset commits: each group holds at least its last acknowledged
	// offset, at most the last one sent.
	gc := groups.NewClient(c.OffsetsURLs())
	for g := range commits.groups {
		offs, err := gc.Offsets(ctx, commitGroup(g), "cc-txn")
		if err != nil {
			t.Fatal(err)
		}
		acked, sent := commits.last[g].acked.Load(), commits.last[g].sent.Load()
		if len(offs) != 1 || offs[0].Offset < acked || offs[0].Offset > sent {
			t.Fatalf("group %s committed %v; its last acknowledged commit was %d, its last sent %d", commitGroup(g), offs, acked, sent)
		}
	}
	// Transactions: every committed one's records are there, read_committed.
	// A transaction the load left open when it stopped holds back what
	// follows it on its partitions until the coordinator aborts it at its
	// 10 s timeout, so the read goes on until it has them all or 40 s passed.
	want := txns.committedValues()
	seen := readCommitted(t, ctx, c, "cc-txn", want, 40*time.Second)
	for _, v := range want {
		if !seen[v] {
			t.Fatalf("record %s of a committed transaction is missing (%d records read_committed)", v, len(seen))
		}
	}
	// Share acknowledgements: every confirmed one counted.
	d, err := shares.NewClient(c.OffsetsURLs()).Describe(ctx, "cc-workers")
	if err != nil {
		t.Fatal(err)
	}
	var accepted int64
	for _, p := range d.Partitions {
		accepted += p.Accepted
	}
	if produced := queued + fed.Load(); accepted < acks.confirmed.Load() || accepted > produced {
		t.Fatalf("the share group counts %d accepted; %d were confirmed to its consumers, at most %d records exist", accepted, acks.confirmed.Load(), produced)
	}
	// Metadata: the topics survived.
	snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cc-txn", "cc-queue"} {
		if tp, ok := snap.Topic(name); !ok || len(tp.Partitions) != 2 {
			t.Fatalf("topic %s after the kills: %+v", name, tp)
		}
	}
	t.Logf("%d rounds: %d offset commits acknowledged, %d transactions committed (%d records), %d share acknowledgements confirmed (%d accepted)",
		rounds, commits.acked.Load(), txns.committedCount(), len(txns.committedValues()), acks.confirmed.Load(), accepted)

	// Each offsets replica, killed, against its own log.
	for _, p := range c.OffsetsReplicas() {
		c.StopProc(p, true)
	}
	for _, p := range c.OffsetsReplicas() {
		t.Logf("%s: %s", p.Name, checkState(t, c, p))
	}
}

// checkState runs `sluice-offsets check-state` on the data directory of
// offsets replica p, which must be stopped, and returns what it said.
func checkState(t *testing.T, c *localcluster.Cluster, p *localcluster.Proc) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(filepath.Dir(p.Bin), "sluice-offsets"), "check-state", "-data-dir", filepath.Join(c.DataDir(), p.Name)).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: check-state: %v\n%s", p.Name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkAppliedCommitted checks that member p has applied no entry beyond
// what its Raft group committed: its applied index, read first, is at most
// the largest commit index among the group's members, read after.
func checkAppliedCommitted(t *testing.T, prefix string, p *localcluster.Proc, members []*localcluster.Proc) {
	t.Helper()
	applied := itest.ScrapeMetrics(t, p)[prefix+"_raft_applied_index"]
	var committed float64
	for _, m := range members {
		committed = max(committed, itest.ScrapeMetrics(t, m)[prefix+"_raft_commit_index"])
	}
	if applied > committed {
		t.Fatalf("%s applied up to %v, beyond the group's commit index %v", p.Name, applied, committed)
	}
}

// commitLoad commits ever larger offsets of groups cc-g0, cc-g1, ...
type commitLoad struct {
	groups int
	acked  atomic.Int64 // commits acknowledged
	last   []struct{ acked, sent atomic.Int64 }
}

func commitGroup(i int) string { return "cc-g" + strconv.Itoa(i) }

func runCommitLoad(ctx context.Context, wg *sync.WaitGroup, c *localcluster.Cluster, n int) *commitLoad {
	l := &commitLoad{groups: n, last: make([]struct{ acked, sent atomic.Int64 }, n)}
	gc := groups.NewClient(c.OffsetsURLs())
	for g := range n {
		wg.Go(func() {
			for off := int64(1); ctx.Err() == nil; off++ {
				l.last[g].sent.Store(off)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := gc.Commit(cctx, commitGroup(g), groups.CommitRequest{Offsets: []groups.Offset{{Topic: "cc-txn", Partition: 0, Offset: off}}})
				cancel()
				if err == nil {
					l.last[g].acked.Store(off)
					l.acked.Add(1)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	return l
}

// txnLoad runs transactional producers writing 5 records per transaction
// and remembers the records of the transactions whose commit was answered.
type txnLoad struct {
	mu        sync.Mutex
	committed []string
}

func (l *txnLoad) committedValues() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.committed...)
}

func (l *txnLoad) committedCount() int { return len(l.committedValues()) / 5 }

func runTxnLoad(ctx context.Context, wg *sync.WaitGroup, c *localcluster.Cluster, n int) *txnLoad {
	l := &txnLoad{}
	for p := range n {
		wg.Go(func() {
			id := "cc-tx-" + strconv.Itoa(p)
			var cl *kgo.Client
			defer func() {
				if cl != nil {
					cl.Close()
				}
			}()
			for seq := 0; ctx.Err() == nil; seq++ {
				if cl == nil {
					var err error
					if cl, err = kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic("cc-txn"), kgo.TransactionalID(id),
						kgo.TransactionTimeout(10*time.Second)); err != nil {
						return
					}
				}
				values, err := oneTransaction(ctx, cl, id, seq)
				if err != nil {
					// Outcome unknown, or the session broken: a new
					// session fences this one and goes on.
					cl.Close()
					cl = nil
					continue
				}
				l.mu.Lock()
				l.committed = append(l.committed, values...)
				l.mu.Unlock()
			}
		})
	}
	return l
}

// oneTransaction writes five records in one transaction and commits it,
// returning the records once the commit was answered.
func oneTransaction(ctx context.Context, cl *kgo.Client, id string, seq int) ([]string, error) {
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return nil, err
	}
	var values []string
	for k := range 5 {
		v := fmt.Sprintf("%s-%d-%d", id, seq, k)
		values = append(values, v)
		cl.Produce(tctx, &kgo.Record{Value: []byte(v)}, nil)
	}
	if err := cl.Flush(tctx); err != nil {
		return nil, err
	}
	if err := cl.EndTransaction(tctx, kgo.TryCommit); err != nil {
		return nil, err
	}
	return values, nil
}

// shareLoad runs share consumers that accept every record and counts the
// acknowledgements confirmed to them.
type shareLoad struct{ confirmed atomic.Int64 }

func runShareLoad(ctx context.Context, wg *sync.WaitGroup, c *localcluster.Cluster, n int) *shareLoad {
	l := &shareLoad{}
	for i := range n {
		wg.Go(func() {
			sc, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: c.MetadataURLs(), Offsets: c.OffsetsURLs(),
				Group: "cc-workers", Topic: "cc-queue", MemberID: "cc-worker-" + strconv.Itoa(i), MaxRecords: 100, MaxWait: 200 * time.Millisecond})
			if err != nil {
				return
			}
			pending := 0 // acknowledgements sent with the next poll
			for ctx.Err() == nil {
				recs, err := sc.Poll(ctx)
				if err == nil {
					l.confirmed.Add(int64(pending))
				}
				pending = 0 // refused or unknown: the records' locks settle them
				if err != nil && len(recs) == 0 {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				for _, r := range recs {
					sc.Acknowledge(r, shares.AckAccept)
				}
				pending = len(recs)
			}
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if sc.Close(cctx) == nil {
				l.confirmed.Add(int64(pending))
			}
		})
	}
	return l
}

// feedQueue produces to cc-queue, 100 records every 50 ms, and counts the
// records sent (some of which may not have been written).
func feedQueue(ctx context.Context, wg *sync.WaitGroup, c *localcluster.Cluster) *atomic.Int64 {
	var sent atomic.Int64
	wg.Go(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic("cc-queue"))
		if err != nil {
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			for range 100 {
				sent.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: []byte("fed")}, nil)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return &sent
}

// readCommitted reads a topic's two partitions read_committed from the
// start until it has seen every value of want, or for d, and returns the
// values seen.
func readCommitted(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, want []string, d time.Duration) map[string]bool {
	t.Helper()
	cl := itest.FranzClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]bool{}
	missing := func() bool {
		for _, v := range want {
			if !seen[v] {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(d)
	for missing() && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	return seen
}
