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

	// Tiered storage (Kafka's names): remote.storage.enable copies closed
	// segments to the object store; local.retention.ms and
	// local.retention.bytes bound what stays on the storage nodes' disks
	// (-2: the total retention, retention.ms and retention.bytes, which
	// then bound the remote log too).
	ConfigRemoteStorageEnable = "remote.storage.enable"
	ConfigLocalRetentionMs    = "local.retention.ms"
	ConfigLocalRetentionBytes = "local.retention.bytes"
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

	// RemoteStorage: remote.storage.enable. LocalRetentionMs and
	// LocalRetentionBytes: local.retention.ms and local.retention.bytes
	// (-2: as retention.ms and retention.bytes; -1: no bound). See
	// LocalRetention.
	RemoteStorage                         bool
	LocalRetentionMs, LocalRetentionBytes int64
}

// LocalRetention returns the retention that applies to the storage nodes'
// disks: the total retention for a topic without remote storage, else
// local.retention.* where set (-2 means as the total).
func (c TopicConfig) LocalRetention() (ms, bytes int64) {
	if !c.RemoteStorage {
		return c.RetentionMs, c.RetentionBytes
	}
	ms, bytes = c.LocalRetentionMs, c.LocalRetentionBytes
	if ms == -2 {
		ms = c.RetentionMs
	}
	if bytes == -2 {
		bytes = c.RetentionBytes
	}
	return ms, bytes
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
		LocalRetentionMs:       -2,
		LocalRetentionBytes:    -2,
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
		set, ok := topicConfigSetters[k]
		if !ok {
			return c, fmt.Errorf("unknown topic config %q", k)
		}
		err := set(&c, strings.TrimSpace(kv[k]))
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
	if err := c.checkLocalRetention(); err != nil {
		return c, err
	}
	if replicationFactor > 0 && c.MinInsyncReplicas > replicationFactor {
		return c, fmt.Errorf("topic config %s=%d is larger than the replication factor %d", ConfigMinInsyncReplicas, c.MinInsyncReplicas, replicationFactor)
	}
	return c, nil
}

// checkLocalRetention refuses a local retention above the total one, as
// Kafka does: the local log cannot keep what the whole log no longer has.
func (c TopicConfig) checkLocalRetention() error {
	above := func(local, total int64) bool {
		return local != -2 && total != -1 && (local == -1 || local > total)
	}
	if above(c.LocalRetentionMs, c.RetentionMs) {
		return fmt.Errorf("topic config %s=%d is above %s=%d", ConfigLocalRetentionMs, c.LocalRetentionMs, ConfigRetentionMs, c.RetentionMs)
	}
	if above(c.LocalRetentionBytes, c.RetentionBytes) {
		return fmt.Errorf("topic config %s=%d is above %s=%d", ConfigLocalRetentionBytes, c.LocalRetentionBytes, ConfigRetentionBytes, c.RetentionBytes)
	}
	return nil
}

// intSetter sets the int64 field of a TopicConfig that field returns from
// a value of at least min.
func intSetter(min int64, field func(*TopicConfig) *int64) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) (err error) {
		*field(c), err = parseInt(v, min)
		return err
	}
}

// topicConfigSetters parse and set each key's value.
var topicConfigSetters = map[string]func(*TopicConfig, string) error{
	ConfigRetentionMs:    intSetter(-1, func(c *TopicConfig) *int64 { return &c.RetentionMs }),
	ConfigRetentionBytes: intSetter(-1, func(c *TopicConfig) *int64 { return &c.RetentionBytes }),
	ConfigSegmentBytes:   intSetter(1024, func(c *TopicConfig) *int64 { return &c.SegmentBytes }),
	ConfigSegmentMs:      intSetter(1, func(c *TopicConfig) *int64 { return &c.SegmentMs }),
	ConfigMinInsyncReplicas: func(c *TopicConfig, v string) error {
		n, err := parseInt(v, 1)
		c.MinInsyncReplicas = int(n)
		return err
	},
	ConfigFlushPolicy: func(c *TopicConfig, v string) error {
		c.FlushPolicy = v
		if v != FlushFsync && v != FlushReplication {
			return fmt.Errorf("must be %q or %q", FlushFsync, FlushReplication)
		}
		return nil
	},
	ConfigUncleanElection: func(c *TopicConfig, v string) (err error) {
		c.UncleanElection, err = strconv.ParseBool(v)
		return err
	},
	ConfigMaxMessageBytes: intSetter(1, func(c *TopicConfig) *int64 { return &c.MaxMessageBytes }),
	ConfigCleanupPolicy: func(c *TopicConfig, v string) (err error) {
		c.Compact, c.Delete, err = parseCleanupPolicy(v)
		return err
	},
	ConfigMinCleanableDirtyRatio: func(c *TopicConfig, v string) (err error) {
		c.MinCleanableDirtyRatio, err = parseRatio(v)
		return err
	},
	ConfigMinCompactionLagMs: intSetter(0, func(c *TopicConfig) *int64 { return &c.MinCompactionLagMs }),
	ConfigMaxCompactionLagMs: intSetter(1, func(c *TopicConfig) *int64 { return &c.MaxCompactionLagMs }),
	ConfigDeleteRetentionMs:  intSetter(0, func(c *TopicConfig) *int64 { return &c.DeleteRetentionMs }),
	ConfigDeliveryDelayMs:    intSetter(0, func(c *TopicConfig) *int64 { return &c.DeliveryDelayMs }),
	ConfigRemoteStorageEnable: func(c *TopicConfig, v string) (err error) {
		c.RemoteStorage, err = strconv.ParseBool(v)
		return err
	},
	ConfigLocalRetentionMs:    intSetter(-2, func(c *TopicConfig) *int64 { return &c.LocalRetentionMs }),
	ConfigLocalRetentionBytes: intSetter(-2, func(c *TopicConfig) *int64 { return &c.LocalRetentionBytes }),
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
