// Command sluice-kafkamember is a Kafka consumer-group member for the
// integration tests, built on franz-go (a Kafka client no one here wrote):
// it joins a group through a Sluice frontend with Kafka's classic protocol
// or KIP-848's, and writes the same JSON lines as sluice-testmember
// (assign, revoke, lost, each processed record, each commit), so the tests'
// ownership checks apply to Kafka clients unchanged.
//
// Records are processed while the rebalance is held (kgo's
// BlockRebalanceOnPoll), so a record event always falls inside the
// ownership its assign and revoke events bracket.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/integration/internal/memberlog"
)

func main() {
	brokers := flag.String("brokers", "", "Kafka bootstrap addresses, comma-separated")
	group := flag.String("group", "", "group id")
	topic := flag.String("topic", "", "topic")
	clientID := flag.String("client-id", "kafkamember", "client id")
	proto := flag.String("protocol", "classic", "classic (client-side assignment) or consumer (KIP-848)")
	instance := flag.String("instance-id", "", "group.instance.id (static membership)")
	session := flag.Duration("session-timeout", 6*time.Second, "session timeout (classic)")
	commit := flag.String("commit", "auto", "auto (auto-commit) or sync (commit after each poll)")
	delay := flag.Duration("record-delay", 0, "processing time per record")
	flag.Parse()

	o := memberlog.New(os.Stdout)
	tpEvents := func(ev string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.Partitions(ev, m) }
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ClientID(*clientID),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(*session),
		kgo.HeartbeatInterval(*session / 6),
		kgo.BlockRebalanceOnPoll(),
		kgo.AutoCommitInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(tpEvents("assign")),
		kgo.OnPartitionsLost(tpEvents("lost")),
	}
	revoked := tpEvents("revoke")
	opts = append(opts, kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
		// Commit what was processed before the partitions move on.
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			o.Emit(memberlog.Event{Ev: "error", Err: "commit on revoke: " + err.Error()})
		}
		revoked(ctx, cl, m)
	}))
	switch *proto {
	case "classic":
	case "consumer":
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	default:
		fmt.Fprintln(os.Stderr, "sluice-kafkamember: -protocol must be classic or consumer")
		os.Exit(2)
	}
	if *instance != "" {
		opts = append(opts, kgo.InstanceID(*instance))
	}
	if *commit == "sync" {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-kafkamember:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				o.Emit(memberlog.Event{Ev: "error", Topic: t, Partition: p, Err: err.Error()})
			}
		})
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			if *delay > 0 {
				time.Sleep(*delay)
			}
			n++
			o.Emit(memberlog.Event{Ev: "rec", Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
		if *commit == "sync" && n > 0 {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				o.Emit(memberlog.Event{Ev: "error", Err: "commit: " + err.Error()})
			} else {
				o.Emit(memberlog.Event{Ev: "commit"})
			}
		}
		cl.AllowRebalance()
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = cl.CommitUncommittedOffsets(cctx)
	cl.Close() // leaves the group (a static member stays until its session ends)
	e := memberlog.Event{Ev: "closed"}
	if err != nil {
		e.Err = err.Error()
	}
	o.Emit(e)
}
