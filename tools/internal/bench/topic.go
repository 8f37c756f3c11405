package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// setupTimeout bounds finding or creating the topic and looking up offsets.
const setupTimeout = 30 * time.Second

// errTopic wraps the problems with the topic that stop a run (exit 1).
var errTopic = errors.New("topic")

// ensureTopic returns the run's topic: for produce and e2e created when
// missing (and then waited for until every partition has a leader), for
// consume required to exist. An existing topic must agree with the topic
// flags given on the command line. created tells whether the run created it.
func ensureTopic(ctx context.Context, cfg Config) (t *cluster.Topic, created bool, err error) {
	admin := cluster.NewClient(cfg.Metadata)
	t, err = admin.DescribeTopic(ctx, cfg.Topic)
	switch {
	case err == nil:
		return t, false, checkTopic(cfg, t)
	case protocol.CodeOf(err) != protocol.UnknownTopicOrPartition:
		return nil, false, fmt.Errorf("describe topic %s: %w", cfg.Topic, err)
	case drains(cfg.Mode):
		return nil, false, fmt.Errorf("%w %s does not exist: %s reads an existing topic (fill it with sluice-bench produce first)", errTopic, cfg.Topic, cfg.Mode)
	}
	_, err = cluster.NewClient(cfg.Frontends).CreateTopic(ctx, cluster.CreateTopicRequest{Name: cfg.Topic,
		Partitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor, Config: cfg.TopicConfig})
	if protocol.CodeOf(err) == protocol.TopicAlreadyExists { // created meanwhile by someone else
		return ensureTopic(ctx, cfg)
	}
	if err != nil {
		return nil, false, fmt.Errorf("create topic %s: %w", cfg.Topic, err)
	}
	t, err = waitLeaders(ctx, admin, cfg.Topic)
	return t, true, err
}

// checkTopic refuses an existing topic that disagrees with the topic flags
// given explicitly: a benchmark of another layout than asked for misleads.
func checkTopic(cfg Config, t *cluster.Topic) error {
	if cfg.Explicit["partitions"] && len(t.Partitions) != cfg.Partitions {
		return fmt.Errorf("%w %s exists with %d partitions, not the %d of --partitions (delete it or choose another --topic)",
			errTopic, t.Name, len(t.Partitions), cfg.Partitions)
	}
	if cfg.Explicit["replication-factor"] && t.ReplicationFactor != cfg.ReplicationFactor {
		return fmt.Errorf("%w %s exists with replication factor %d, not the %d of --replication-factor (delete it or choose another --topic)",
			errTopic, t.Name, t.ReplicationFactor, cfg.ReplicationFactor)
	}
	if len(cfg.TopicConfig) == 0 {
		return nil
	}
	have, err := cluster.ParseTopicConfig(t.Config, t.ReplicationFactor)
	if err != nil {
		return fmt.Errorf("%w %s: its config: %w", errTopic, t.Name, err)
	}
	merged := maps.Clone(t.Config)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, cfg.TopicConfig)
	want, err := cluster.ParseTopicConfig(merged, t.ReplicationFactor)
	if err != nil || want != have {
		return fmt.Errorf("%w %s exists with config %v, which --config %v would change (delete it or choose another --topic)",
			errTopic, t.Name, t.Config, map[string]string(cfg.TopicConfig))
	}
	return nil
}

// waitLeaders waits until every partition of a new topic has a leader.
func waitLeaders(ctx context.Context, admin *cluster.Client, name string) (*cluster.Topic, error) {
	for {
		t, err := admin.DescribeTopic(ctx, name)
		if err == nil && allLed(t) {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w %s: waiting for partition leaders: %w (last error: %v)", errTopic, name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func allLed(t *cluster.Topic) bool {
	for _, p := range t.Partitions {
		if p.Leader < 0 {
			return false
		}
	}
	return len(t.Partitions) > 0
}

// offsetsAt returns each partition's earliest (protocol.TimestampEarliest)
// or latest (TimestampLatest) offset, asking the leaders; a leader that does
// not answer is asked again (ListOffset already retries what is retriable,
// but a new topic's partitions may take a moment to open) until ctx ends.
func offsetsAt(ctx context.Context, cfg Config, partitions int, ts int64) ([]int64, error) {
	meta := client.NewMetadata(client.NewAdmin(cfg.Metadata))
	pool := storageclient.NewPool("sluice-bench")
	defer pool.Close()
	out := make([]int64, partitions)
	for p := range out {
		for {
			off, err := client.ListOffset(ctx, meta, pool, cfg.Topic, int32(p), ts)
			if err == nil {
				out[p] = off
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("offsets of %s-%d: %w", cfg.Topic, p, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return out, nil
}
