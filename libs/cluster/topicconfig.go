package cluster

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Topic configuration keys (Kafka's names).
const (
	ConfigRetentionMs       = "retention.ms"
	ConfigRetentionBytes    = "retention.bytes"
	ConfigSegmentBytes      = "segment.bytes"
	ConfigSegmentMs         = "segment.ms"
	ConfigMinInsyncReplicas = "min.insync.replicas"
	ConfigFlushPolicy       = "flush.policy"
	ConfigUncleanElection   = "unclean.leader.election"
	ConfigMaxMessageBytes   = "max.message.bytes"

	ConfigCleanupPolicy          = "cleanup.policy"
	ConfigMinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
	ConfigMinCompactionLagMs     = "min.compaction.lag.ms"
	ConfigMaxCompactionLagMs     = "max.compaction.lag.ms"
	ConfigDeleteRetentionMs      = "delete.retention.ms"

	// ConfigDeliveryDelayMs delays every record of the topic for share
	// groups: none is handed out before its timestamp plus the delay.
	ConfigDeliveryDelayMs = "delivery.delay.ms"
)

// Cleanup policies (cleanup.policy, Kafka's values): delete drops whole
// segments past retention; compact keeps the latest record of every key;
// both may be set ("compact,delete").
const (
	CleanupDelete  = "delete"
	CleanupCompact = "compact"
)

// Flush policies.
const (
	// FlushFsync acknowledges acks=all only after the records are fsynced (default).
	FlushFsync = "fsync"
	// FlushReplication acknowledges once replicas hold the records in page cache.
	FlushReplication = "replication"
)

// TopicConfig is a topic's typed configuration.
type TopicConfig struct {
	RetentionMs       int64 // -1: keep forever
	RetentionBytes    int64 // -1: no size limit
	SegmentBytes      int64
	SegmentMs         int64
	MinInsyncReplicas int
	FlushPolicy       string
	UncleanElection   bool
	MaxMessageBytes   int64

	// Compact: cleanup.policy holds compact (the cleaner keeps each key's
	// latest record). Delete: it holds delete (retention deletes whole
	// segments). At least one is set.
	Compact, Delete bool
	// MinCleanableDirtyRatio: the share of a compacted log's closed bytes
	// that must be dirty (not yet cleaned) before the cleaner runs on it.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs: a record stays uncleaned at least this long
	// after its timestamp. MaxCompactionLagMs: a dirty record is cleaned
	// within about this long whatever the dirty ratio.
	MinCompactionLagMs, MaxCompactionLagMs int64
	// DeleteRetentionMs: how long a tombstone stays readable after its
	// timestamp before the cleaner removes it.
	DeleteRetentionMs int64
	// DeliveryDelayMs: share groups hand a record out no earlier than its
	// timestamp plus this (0: at once). Regular consumers are not delayed.
	DeliveryDelayMs int64
}

// CleanupPolicy is the cleanup.policy value of c: "delete", "compact" or
// "compact,delete".
func (c TopicConfig) CleanupPolicy() string {
	switch {
	case c.Compact && c.Delete:
		return CleanupCompact + "," + CleanupDelete
	case c.Compact:
		return CleanupCompact
	}
	return CleanupDelete
}

// DefaultTopicConfig returns Kafka's defaults, with fsync durability.
func DefaultTopicConfig() TopicConfig {
	return TopicConfig{
		RetentionMs:       7 * 24 * time.Hour.Milliseconds(),
		RetentionBytes:    -1,
		SegmentBytes:      1 << 30,
		SegmentMs:         7 * 24 * time.Hour.Milliseconds(),
		MinInsyncReplicas: 1,
		FlushPolicy:       FlushFsync,
		MaxMessageBytes:   1048588,

		Delete:                 true,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      24 * time.Hour.Milliseconds(),
	}
}

// ParseTopicConfig applies the key/value pairs on top of the defaults and
// validates each value and the relations between them.
func ParseTopicConfig(kv map[string]string, replicationFactor int) (TopicConfig, error) {
	c := DefaultTopicConfig()
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(kv[k])
		var err error
		switch k {
		case ConfigRetentionMs:
			c.RetentionMs, err = parseInt(v, -1)
		case ConfigRetentionBytes:
			c.RetentionBytes, err = parseInt(v, -1)
		case ConfigSegmentBytes:
			c.SegmentBytes, err = parseInt(v, 1024)
		case ConfigSegmentMs:
			c.SegmentMs, err = parseInt(v, 1)
		case ConfigMinInsyncReplicas:
			var n int64
			n, err = parseInt(v, 1)
			c.MinInsyncReplicas = int(n)
		case ConfigFlushPolicy:
			if v != FlushFsync && v != FlushReplication {
				err = fmt.Errorf("must be %q or %q", FlushFsync, FlushReplication)
			}
			c.FlushPolicy = v
		case ConfigUncleanElection:
			c.UncleanElection, err = strconv.ParseBool(v)
		case ConfigMaxMessageBytes:
			c.MaxMessageBytes, err = parseInt(v, 1)
		case ConfigCleanupPolicy:
			c.Compact, c.Delete, err = parseCleanupPolicy(v)
		case ConfigMinCleanableDirtyRatio:
			c.MinCleanableDirtyRatio, err = parseRatio(v)
		case ConfigMinCompactionLagMs:
			c.MinCompactionLagMs, err = parseInt(v, 0)
		case ConfigMaxCompactionLagMs:
			c.MaxCompactionLagMs, err = parseInt(v, 1)
		case ConfigDeleteRetentionMs:
			c.DeleteRetentionMs, err = parseInt(v, 0)
		case ConfigDeliveryDelayMs:
			c.DeliveryDelayMs, err = parseInt(v, 0)
		default:
			return c, fmt.Errorf("unknown topic config %q", k)
		}
		if err != nil {
			return c, fmt.Errorf("topic config %s=%q: %w", k, kv[k], err)
		}
	}
	if c.SegmentBytes > 1<<31-1 {
		return c, fmt.Errorf("topic config %s=%d: must be below 2 GiB (positions are 32-bit)", ConfigSegmentBytes, c.SegmentBytes)
	}
	if c.MaxCompactionLagMs < c.MinCompactionLagMs {
		return c, fmt.Errorf("topic config %s=%d is below %s=%d", ConfigMaxCompactionLagMs, c.MaxCompactionLagMs, ConfigMinCompactionLagMs, c.MinCompactionLagMs)
	}
	if replicationFactor > 0 && c.MinInsyncReplicas > replicationFactor {
		return c, fmt.Errorf("topic config %s=%d is larger than the replication factor %d", ConfigMinInsyncReplicas, c.MinInsyncReplicas, replicationFactor)
	}
	return c, nil
}

// ResolveTopicConfig is ParseTopicConfig with the cluster's settings
// applied where the topic sets no value of its own: min.insync.replicas
// (ClusterConfig.MinInsyncFor). Storage nodes enforce what it returns.
func ResolveTopicConfig(kv map[string]string, replicationFactor int, settings ClusterConfig) (TopicConfig, error) {
	c, err := ParseTopicConfig(kv, replicationFactor)
	if err != nil {
		return c, err
	}
	if _, set := kv[ConfigMinInsyncReplicas]; !set {
		c.MinInsyncReplicas = settings.MinInsyncFor(replicationFactor)
	}
	return c, nil
}

// TopicConfig returns a topic's configuration as storage nodes enforce it:
// its own values over the cluster's settings over the defaults.
func (s *Snapshot) TopicConfig(t *Topic) (TopicConfig, error) {
	return ResolveTopicConfig(t.Config, t.ReplicationFactor, s.Settings())
}

// parseCleanupPolicy reads cleanup.policy: a comma-separated list of
// delete and compact, in any order, at least one.
func parseCleanupPolicy(v string) (compact, del bool, err error) {
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case CleanupCompact:
			compact = true
		case CleanupDelete:
			del = true
		default:
			return false, false, fmt.Errorf("must be %q, %q or %q", CleanupDelete, CleanupCompact, CleanupCompact+","+CleanupDelete)
		}
	}
	return compact, del, nil
}

func parseRatio(v string) (float64, error) {
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(r) {
		return 0, fmt.Errorf("not a number")
	}
	if r < 0 || r > 1 {
		return 0, fmt.Errorf("must be between 0 and 1")
	}
	return r, nil
}

func parseInt(v string, min int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer")
	}
	if n < min {
		return 0, fmt.Errorf("must be at least %d", min)
	}
	return n, nil
}
