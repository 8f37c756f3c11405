package ctl

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
)

type consumeOpts struct {
	partition     int
	fromBeginning bool
	offset        int64
	maxMessages   int
	exitAtEnd     bool
	group         string
	isolation     string
	isolationCode int8
	format        *formatter
}

// fetched is what a partition's reader hands to the printer.
type fetched struct {
	partition int32
	recs      []record.Record
	atEnd     bool
	err       error
}

func consume(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	var o consumeOpts
	fs.IntVar(&o.partition, "partition", -1, "read only this partition (default: all)")
	fs.BoolVar(&o.fromBeginning, "from-beginning", false, "start at the earliest offset (default: the end)")
	fs.Int64Var(&o.offset, "offset", -1, "start at this offset")
	fs.IntVar(&o.maxMessages, "max-messages", 0, "stop after this many records (0: no limit)")
	fs.BoolVar(&o.exitAtEnd, "exit-at-end", false, "stop once every partition's end is reached")
	fs.StringVar(&o.group, "group", "", "consume as a member of this consumer group")
	fs.StringVar(&o.isolation, "isolation", client.ReadUncommitted, "read_uncommitted (every record) or read_committed (stop at open transactions, skip aborted ones)")
	format := fs.String("format", `%s\n`, "output format with kcat placeholders")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a topic name"); err != nil {
		return err
	}
	if o.isolationCode, err = client.ParseIsolation(o.isolation); err != nil {
		return fmt.Errorf("%w: --isolation: %v", errUsage, err)
	}
	if o.fromBeginning && o.offset >= 0 {
		return fmt.Errorf("%w: --from-beginning and --offset exclude each other", errUsage)
	}
	if o.group != "" {
		if o.partition >= 0 || o.offset >= 0 {
			return fmt.Errorf("%w: --group excludes --partition and --offset (the group assigns partitions and keeps offsets)", errUsage)
		}
		if err := groups.ValidateGroupID(o.group); err != nil {
			return fmt.Errorf("%w: --group: %v", errUsage, err)
		}
	}
	if o.format, err = parseFormat(*format); err != nil {
		return err
	}
	topic := pos[0]
	meta := client.NewMetadata(env.metadataClient())
	snap, err := meta.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	t, ok := snap.Topic(topic)
	if !ok {
		return fmt.Errorf("consume: %w", protocol.UnknownTopicOrPartition.Err("no topic %q", topic))
	}
	if o.group != "" {
		return consumeGroup(ctx, env, o, topic)
	}
	parts := []int32{}
	for _, p := range t.Partitions {
		if o.partition < 0 || int(p.ID) == o.partition {
			parts = append(parts, p.ID)
		}
	}
	if len(parts) == 0 {
		return fmt.Errorf("consume: topic %s has no partition %d", topic, o.partition)
	}
	return runConsume(ctx, env, o, meta, topic, parts)
}

func runConsume(ctx context.Context, env Env, o consumeOpts, meta *client.Metadata, topic string, parts []int32) error {
	pool := env.storagePool()
	defer pool.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan fetched, len(parts))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, p := range parts {
		start, err := startOffset(ctx, o, meta, pool, topic, p)
		if err != nil {
			return err
		}
		r := client.NewPartitionReader(meta, pool, topic, p, start, client.ReaderConfig{ClientID: "sluicectl", MaxWait: 300 * time.Millisecond,
			Isolation: o.isolationCode})
		wg.Add(1)
		go func() {
			defer wg.Done()
			readPartition(ctx, r, o.isolationCode == protocol.ReadCommitted, out)
		}()
	}
	w := bufio.NewWriterSize(env.Stdout, 64<<10)
	defer w.Flush()
	var buf []byte
	count := 0
	done := map[int32]bool{}
	for {
		var f fetched
		select {
		case <-ctx.Done():
			return nil // interrupted: what was printed stands
		case f = <-out:
		}
		if f.err != nil {
			return fmt.Errorf("consume %s-%d: %w", topic, f.partition, f.err)
		}
		for i := range f.recs {
			buf = o.format.append(buf[:0], topic, f.partition, &f.recs[i])
			if _, err := w.Write(buf); err != nil {
				return err
			}
			count++
			if o.maxMessages > 0 && count >= o.maxMessages {
				return w.Flush()
			}
		}
		if len(f.recs) > 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if f.atEnd {
			done[f.partition] = true
		}
		if o.exitAtEnd && len(done) == len(parts) {
			return w.Flush()
		}
	}
}

func startOffset(ctx context.Context, o consumeOpts, meta *client.Metadata, pool *storageclient.Pool, topic string, p int32) (int64, error) {
	if o.offset >= 0 {
		return o.offset, nil
	}
	ts := protocol.TimestampLatest
	if o.fromBeginning {
		ts = protocol.TimestampEarliest
	}
	off, err := client.ListOffsetAt(ctx, meta, pool, topic, p, ts, o.isolationCode)
	if err != nil {
		return 0, fmt.Errorf("consume %s-%d: start offset: %w", topic, p, err)
	}
	return off, nil
}

// readPartition fetches until ctx ends, reporting records and whether the
// partition's end (its high watermark; at read_committed its last stable
// offset) was reached.
func readPartition(ctx context.Context, r *client.PartitionReader, committed bool, out chan<- fetched) {
	for ctx.Err() == nil {
		recs, err := r.Fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		end := r.HighWatermark()
		if committed {
			end = r.LastStableOffset()
		}
		f := fetched{partition: r.Partition, recs: recs, err: err, atEnd: err == nil && r.Offset() >= end}
		select {
		case out <- f:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}
