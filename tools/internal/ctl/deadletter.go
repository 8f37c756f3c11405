package ctl

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// deadLetterReplay serves `dead-letter replay DLT [--to TOPIC] [--partition P]
// [--from-offset N]`: every record of the dead-letter topic, from the start
// to its end when the command starts, is produced again (acks=all) to its
// source topic and partition as its headers name them, or to --to, with its
// key, value and own headers; the sluice.dlt.* headers are dropped. Records
// without a source header are skipped and counted. Replaying twice produces
// twice: --from-offset continues after a replay that stopped.
func deadLetterReplay(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("dead-letter replay", flag.ContinueOnError)
	to := fs.String("to", "", "produce every record to this topic instead of its source")
	partition := fs.Int("partition", -1, "replay only this partition of the dead-letter topic")
	from := fs.Int64("from-offset", 0, "start at this offset of each partition replayed")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a dead-letter topic"); err != nil {
		return err
	}
	if *from < 0 {
		return fmt.Errorf("%w: --from-offset %d is negative", errUsage, *from)
	}
	meta := client.NewMetadata(env.metadataClient())
	snap, err := meta.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("dead-letter replay: %w", err)
	}
	t, ok := snap.Topic(pos[0])
	if !ok {
		return fmt.Errorf("dead-letter replay: %w", protocol.UnknownTopicOrPartition.Err("no topic %q", pos[0]))
	}
	cfg, err := producerConfig(env, "sluicectl-replay", "all", "none", 0)
	if err != nil {
		return err
	}
	p, err := client.NewProducer(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	var mu sync.Mutex
	var failed []string
	cb := func(m client.RecordMetadata) {
		if m.Err != nil {
			mu.Lock()
			failed = append(failed, fmt.Sprintf("%s-%d: %v", m.Topic, m.Partition, m.Err))
			mu.Unlock()
		}
	}
	pool := env.storagePool()
	defer pool.Close()
	rp := &replay{meta: meta, pool: pool, p: p, topic: pos[0], to: *to, from: *from, cb: cb}
	for _, part := range t.Partitions {
		if *partition >= 0 && int(part.ID) != *partition {
			continue
		}
		if err := rp.partition(ctx, part.ID); err != nil {
			p.Close(context.Background())
			return fmt.Errorf("dead-letter replay: %w", err)
		}
	}
	sent, skipped := rp.sent, rp.skipped
	closeCtx, cancel := context.WithTimeout(context.Background(), cfg.DeliveryTimeout)
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		return fmt.Errorf("dead-letter replay: %w", err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("dead-letter replay: %d of %d records failed: %s", len(failed), sent, strings.Join(failed[:min(len(failed), 5)], "; "))
	}
	fmt.Fprintf(env.Stdout, "replayed %d records of %s", sent, pos[0])
	if skipped > 0 {
		fmt.Fprintf(env.Stdout, "; skipped %d without a source", skipped)
	}
	fmt.Fprintln(env.Stdout)
	return nil
}

// replay sends the dead letters of a topic back to their sources.
type replay struct {
	meta          *client.Metadata
	pool          *storageclient.Pool
	p             *client.Producer
	topic, to     string
	from          int64
	cb            func(client.RecordMetadata)
	sent, skipped int
}

// partition replays a partition of the dead-letter topic from the replay's
// offset to its end as it is now.
func (rp *replay) partition(ctx context.Context, part int32) error {
	end, err := client.ListOffset(ctx, rp.meta, rp.pool, rp.topic, part, protocol.TimestampLatest)
	if err != nil {
		return err
	}
	r := client.NewPartitionReader(rp.meta, rp.pool, rp.topic, part, rp.from, client.ReaderConfig{ClientID: "sluicectl", MaxWait: 100 * time.Millisecond})
	for r.Offset() < end {
		recs, err := r.Fetch(ctx)
		if err != nil {
			return fmt.Errorf("reading %s-%d: %w", rp.topic, part, err)
		}
		for _, rec := range recs {
			out, ok := replayed(rec, rp.to)
			if !ok {
				rp.skipped++
				continue
			}
			if err := rp.p.Send(ctx, out, rp.cb); err != nil {
				return err
			}
			rp.sent++
		}
	}
	return nil
}

// replayed turns a dead letter back into the record it was: to its source
// topic and partition (or to's topic, partitioned by its key), without the
// dead-letter headers. ok is false for a record naming no source.
func replayed(rec record.Record, to string) (client.ProducerRecord, bool) {
	out := client.ProducerRecord{Topic: to, Partition: -1, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
	var topic, partition string
	for _, h := range rec.Headers {
		switch {
		case h.Key == shares.HeaderSourceTopic:
			topic = string(h.Value)
		case h.Key == shares.HeaderSourcePartition:
			partition = string(h.Value)
		case strings.HasPrefix(h.Key, shares.HeaderPrefix):
		default:
			out.Headers = append(out.Headers, h)
		}
	}
	if topic == "" {
		return out, false
	}
	if to == "" {
		p, err := strconv.ParseInt(partition, 10, 32)
		if err != nil || p < 0 {
			return out, false
		}
		out.Topic, out.Partition = topic, int32(p)
	}
	return out, true
}
