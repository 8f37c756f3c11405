// Command sluice-testmember is a consumer-group member for the integration
// tests: it joins a group with the SDK consumer and writes one JSON line per
// event to stdout (assign, revoke, lost, each processed record, each commit),
// so a test can kill it with SIGKILL and still know what it owned and
// processed until then.
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

	"github.com/sluicemq/sluice/integration/internal/memberlog"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/groups"
)

func main() {
	meta := flag.String("metadata", "", "metadata addresses, comma-separated")
	offs := flag.String("offsets", "", "offsets addresses, comma-separated")
	group := flag.String("group", "", "group id")
	topic := flag.String("topic", "", "topic")
	clientID := flag.String("client-id", "testmember", "client id")
	commit := flag.String("commit", "auto", "auto (auto-commit), sync (commit after each poll) or none")
	interval := flag.Duration("commit-interval", 500*time.Millisecond, "auto-commit interval")
	session := flag.Duration("session-timeout", 3*time.Second, "session timeout")
	delay := flag.Duration("record-delay", 0, "processing time per record")
	flag.Parse()

	o := memberlog.New(os.Stdout)
	cfg := client.DefaultConsumerConfig()
	cfg.Metadata = strings.Split(*meta, ",")
	cfg.Offsets = strings.Split(*offs, ",")
	cfg.Group, cfg.Topics, cfg.ClientID = *group, []string{*topic}, *clientID
	cfg.AutoOffsetReset = "earliest"
	cfg.AutoCommit = *commit == "auto"
	cfg.AutoCommitInterval = *interval
	cfg.SessionTimeout = *session
	tpEvents := func(ev string) func([]groups.TP) {
		return func(tps []groups.TP) {
			for _, tp := range tps {
				o.Emit(memberlog.Event{Ev: ev, Topic: tp.Topic, Partition: tp.Partition})
			}
		}
	}
	cfg.OnAssigned, cfg.OnRevoked, cfg.OnLost = tpEvents("assign"), tpEvents("revoke"), tpEvents("lost")
	c, err := client.NewConsumer(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-testmember:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		recs, err := c.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			o.Emit(memberlog.Event{Ev: "error", Err: err.Error()})
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, r := range recs {
			if *delay > 0 {
				time.Sleep(*delay)
			}
			o.Emit(memberlog.Event{Ev: "rec", Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
		if *commit == "sync" && len(recs) > 0 {
			if err := c.Commit(ctx); err != nil {
				o.Emit(memberlog.Event{Ev: "error", Err: "commit: " + err.Error()})
			} else {
				o.Emit(memberlog.Event{Ev: "commit"})
			}
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Close(cctx)
	e := memberlog.Event{Ev: "closed"}
	if err != nil {
		e.Err = err.Error()
	}
	o.Emit(e)
}
