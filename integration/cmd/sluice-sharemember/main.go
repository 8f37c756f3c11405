// Command sluice-sharemember is a share-group consumer for the integration
// tests: it polls with the SDK's ShareConsumer, acknowledges each record
// at random (accept, release or reject, in the proportions of its flags)
// and writes one JSON line per event to stdout: "rec" for each record
// delivered (with its delivery count), "intent" for each acknowledgement
// about to be sent, "acked" once the coordinator applied it and "refused"
// when it refused it. A test can kill it with SIGKILL and still know what
// it was given and what it acknowledged until then. Acknowledgements go
// with the next poll (or the close), and its outcome confirms them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/integration/internal/memberlog"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/shares"
)

func main() {
	meta := flag.String("metadata", "", "metadata addresses, comma-separated")
	offs := flag.String("offsets", "", "offsets addresses, comma-separated")
	group := flag.String("group", "", "share group")
	topic := flag.String("topic", "", "topic")
	clientID := flag.String("client-id", "sharemember", "client id, also the member id")
	accept := flag.Float64("accept", 1, "share of records accepted")
	release := flag.Float64("release", 0, "share of records released (the rest of the records are rejected)")
	seed := flag.Uint64("seed", 1, "random seed")
	maxRecords := flag.Int("max-records", 0, "records per poll (0: the group's limit)")
	hold := flag.Bool("hold", false, "acknowledge nothing: hold every record until its lock expires")
	flag.Parse()

	if *accept < 0 || *release < 0 || *accept+*release > 1 {
		fmt.Fprintln(os.Stderr, "sluice-sharemember: -accept and -release must be shares adding up to at most 1")
		os.Exit(2)
	}
	o := memberlog.New(os.Stdout)
	c, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: strings.Split(*meta, ","), Offsets: strings.Split(*offs, ","),
		Group: *group, Topic: *topic, MemberID: *clientID, ClientID: *clientID, MaxRecords: int32(*maxRecords)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-sharemember:", err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(*seed, 7))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var intents []memberlog.Event
	report := func(err error) {
		var refused *client.AckRefusedError
		switch {
		case err == nil:
		case errors.As(err, &refused):
		default:
			// Unknown outcome: the intents stand unconfirmed.
			o.Emit(memberlog.Event{Ev: "error", Err: err.Error()})
			intents = nil
			return
		}
		for _, e := range intents {
			if refused != nil && refused.Refused[groups.TP{Topic: e.Topic, Partition: e.Partition}] != nil {
				e.Ev = "refused"
			} else {
				e.Ev = "acked"
			}
			o.Emit(e)
		}
		intents = nil
	}
	for ctx.Err() == nil {
		recs, err := c.Poll(ctx)
		report(err)
		if err != nil && !errors.Is(err, client.ErrAckRefused) {
			if ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, r := range recs {
			o.Emit(memberlog.Event{Ev: "rec", Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), Count: r.DeliveryCount})
			if *hold {
				continue
			}
			t := shares.AckReject
			switch x := rng.Float64(); {
			case x < *accept:
				t = shares.AckAccept
			case x < *accept+*release:
				t = shares.AckRelease
			}
			e := memberlog.Event{Ev: "intent", Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Ack: t.String()}
			o.Emit(e)
			intents = append(intents, e)
			c.Acknowledge(r, t)
		}
		// The acknowledgements go with the next Poll's request.
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	report(c.Close(cctx))
	o.Emit(memberlog.Event{Ev: "closed"})
}
