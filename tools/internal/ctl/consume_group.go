package ctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/groups"
)

// pollTick bounds each Poll of `consume --group`, so --exit-at-end is
// checked while nothing arrives.
const pollTick = 200 * time.Millisecond

// closeTimeout bounds the commit and leave when `consume --group` ends.
const closeTimeout = 10 * time.Second

// groupConsumer is what `consume --group` needs of a *client.Consumer; tests
// drive the loop with a scripted one.
type groupConsumer interface {
	Poll(ctx context.Context) ([]client.ConsumerRecord, error)
	Assignment() []groups.TP
	Position(tp groups.TP) (int64, bool)
	HighWatermark(tp groups.TP) int64
	Seek(tp groups.TP, offset int64) error
}

// consumeGroup consumes topic as a member of o.group and, on the way out,
// commits what it printed and leaves the group (Close).
func consumeGroup(ctx context.Context, env Env, o consumeOpts, topic string) error {
	cfg := client.DefaultConsumerConfig()
	cfg.Metadata, cfg.Offsets = addrs(env.Metadata), addrs(env.Offsets)
	cfg.Group, cfg.Topics, cfg.ClientID = o.group, []string{topic}, "sluicectl"
	cfg.IsolationLevel = o.isolation
	cfg.TLS = env.TLS
	if o.fromBeginning {
		cfg.AutoOffsetReset = client.OffsetResetEarliest
	}
	cfg.FetchMaxWait = 300 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.NewConsumer(cfg)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	runErr := runGroupConsume(ctx, env, o, c)
	cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("consume: commit and leave group %s: %w", o.group, err))
	}
	return runErr
}

// runGroupConsume prints records until interrupted, --max-messages records
// were printed, or (--exit-at-end) every assigned partition is read to its
// high watermark. Records polled but not printed are handed back with Seek,
// so the commit on Close covers exactly what was printed.
func runGroupConsume(ctx context.Context, env Env, o consumeOpts, c groupConsumer) error {
	w := bufio.NewWriterSize(env.Stdout, 64<<10)
	defer w.Flush()
	var buf []byte
	count := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, pollTick)
		recs, err := c.Poll(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return w.Flush() // interrupted: what was printed stands
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("consume: %w", err)
		}
		for i := range recs {
			if o.maxMessages > 0 && count >= o.maxMessages {
				if err := seekBack(c, recs[i:]); err != nil {
					return err
				}
				break
			}
			r := &recs[i]
			buf = o.format.append(buf[:0], r.Topic, r.Partition, &r.Record)
			if _, err := w.Write(buf); err != nil {
				return err
			}
			count++
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if (o.maxMessages > 0 && count >= o.maxMessages) || (o.exitAtEnd && atEnd(c)) {
			return nil
		}
	}
}

// seekBack moves each partition of the unprinted records back to its first
// unprinted offset.
func seekBack(c groupConsumer, unprinted []client.ConsumerRecord) error {
	seen := map[groups.TP]bool{}
	for i := range unprinted {
		tp := unprinted[i].TP()
		if seen[tp] {
			continue
		}
		seen[tp] = true
		if err := c.Seek(tp, unprinted[i].Offset); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
	}
	return nil
}

// atEnd reports whether the consumer owns partitions and has read each to
// the high watermark its last fetch saw (kcat's -e, per assigned partition).
func atEnd(c groupConsumer) bool {
	tps := c.Assignment()
	if len(tps) == 0 {
		return false
	}
	for _, tp := range tps {
		pos, ok := c.Position(tp)
		if hw := c.HighWatermark(tp); !ok || hw < 0 || pos < hw {
			return false
		}
	}
	return true
}
