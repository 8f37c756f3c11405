package ctl

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// maxLineBytes bounds one input line (one record).
const maxLineBytes = 8 << 20

// produce reads records from stdin, one a line, and sends them with the SDK
// producer: batched per partition, idempotent with acks=all.
func produce(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	sep := fs.String("key-separator", "", "split each line into key and value at the first occurrence of this string")
	acks := fs.String("acks", "all", "acks: all, leader or none (leader and none turn idempotence off)")
	partition := fs.Int("partition", -1, "send every record to this partition (default: by key, or sticky for keyless records)")
	compression := fs.String("compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	linger := fs.Duration("linger", 5*time.Millisecond, "how long a batch waits for more records")
	clientID := fs.String("client-id", "sluicectl", "client id the frontends apply quotas to")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a topic name"); err != nil {
		return err
	}
	cfg, err := producerConfig(env, *clientID, *acks, *compression, *linger)
	if err != nil {
		return err
	}
	p, err := client.NewProducer(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	var mu sync.Mutex
	failed, sent := 0, 0
	cb := func(m client.RecordMetadata) {
		if m.Err == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if failed < 5 {
			fmt.Fprintf(env.Stderr, "record to %s-%d failed: %v\n", m.Topic, m.Partition, m.Err)
		}
		failed++
	}
	sc := bufio.NewScanner(env.Stdin)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for sc.Scan() {
		rec := client.ProducerRecord{Topic: pos[0], Partition: int32(*partition), Value: []byte(sc.Text())}
		if *sep != "" {
			if k, v, ok := strings.Cut(sc.Text(), *sep); ok {
				rec.Key, rec.Value = []byte(k), []byte(v)
			}
		}
		if err := p.Send(ctx, rec, cb); err != nil {
			p.Close(context.Background())
			return fmt.Errorf("produce: %w", err)
		}
		sent++
	}
	readErr := sc.Err()
	closeCtx, cancel := context.WithTimeout(context.Background(), cfg.DeliveryTimeout)
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	if readErr != nil {
		return fmt.Errorf("reading stdin: %w", readErr)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed", failed, sent)
	}
	return nil
}

// producerConfig turns produce's flags into the SDK producer's config.
func producerConfig(env Env, clientID, acks, compression string, linger time.Duration) (client.ProducerConfig, error) {
	cfg := client.DefaultProducerConfig()
	if linger < 0 {
		return cfg, fmt.Errorf("%w: --linger %v is negative", errUsage, linger)
	}
	cfg.Frontends = addrs(env.Frontend)
	cfg.ClientID = clientID
	cfg.Token = env.Token
	cfg.TLS = env.TLS
	cfg.Linger = linger
	if linger == 0 {
		cfg.Linger = -1
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	switch acks {
	case "all", "-1":
		cfg.Acks = protocol.AcksAll
	case "leader", "1":
		cfg.Acks, cfg.DisableIdempotence = protocol.AcksLeader, true
	case "none", "0":
		cfg.Acks, cfg.DisableIdempotence = protocol.AcksNone, true
	default:
		return cfg, fmt.Errorf("%w: --acks %q is not all, leader or none", errUsage, acks)
	}
	codec, err := record.ParseCodec(compression)
	if err != nil {
		return cfg, fmt.Errorf("%w: --compression: %w", errUsage, err)
	}
	cfg.Compression = codec
	if len(cfg.Frontends) == 0 {
		return cfg, fmt.Errorf("%w: no frontend address", errUsage)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w: %w", errUsage, errors.Unwrap(err))
	}
	return cfg, nil
}
