package cluster

import (
	"fmt"
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
	if replicationFactor > 0 && c.MinInsyncReplicas > replicationFactor {
		return c, fmt.Errorf("topic config %s=%d is larger than the replication factor %d", ConfigMinInsyncReplicas, c.MinInsyncReplicas, replicationFactor)
	}
	return c, nil
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
