package cluster

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/libs/partitioner"
)

// Frontends in the model. A frontend with a Kafka listener registers with
// metadata and heartbeats like a storage node, so that every broker Kafka
// clients talk to (frontends and storage nodes alike) describes the same
// cluster in its Metadata answers. Frontends hold no state: one whose
// session lapses is removed from the model, and one that comes back
// registers again.

// FrontendIDBase is the first Kafka node id given to frontends. Storage node
// ids are below it (they are at most 1<<30 - 1), so the two never collide in
// the broker list Kafka clients see.
const FrontendIDBase int32 = 1 << 30

// Frontend is a registered frontend: a Kafka broker that leads partitions
// for produce, metadata, admin and group calls.
type Frontend struct {
	// ID is the frontend's Kafka node id, FrontendIDBase or above; a
	// frontend registering again under the same Name keeps it.
	ID int32 `json:"id"`
	// Name is the frontend's -node-id (its host name by default).
	Name string `json:"name"`
	// KafkaAddr is the address Kafka clients dial (host:port).
	KafkaAddr string `json:"kafka_addr"`
	Rack      string `json:"rack,omitempty"`
	// Epoch is the Raft index of its registration; heartbeats name it.
	Epoch int64 `json:"epoch"`
}

// RegisterFrontendRequest is the body of POST /v1/frontends/register.
type RegisterFrontendRequest struct {
	Name      string `json:"name"`
	KafkaAddr string `json:"kafka_addr"`
	Rack      string `json:"rack,omitempty"`
}

// FrontendHeartbeatRequest is the body of POST /v1/frontends/heartbeat.
type FrontendHeartbeatRequest struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// RegisterFrontend registers a frontend's Kafka listener and returns the
// frontend as registered (its id and epoch).
func (c *Client) RegisterFrontend(ctx context.Context, req RegisterFrontendRequest) (Frontend, error) {
	var f Frontend
	err := c.do(ctx, http.MethodPost, "/v1/frontends/register", req, &f)
	return f, err
}

// FrontendHeartbeat renews a frontend's session; an error that is not
// retriable means the frontend must register again.
func (c *Client) FrontendHeartbeat(ctx context.Context, req FrontendHeartbeatRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/frontends/heartbeat", req, nil)
}

// Frontend returns the frontend with the given id.
func (s *Snapshot) Frontend(id int32) (*Frontend, bool) {
	for i := range s.Frontends {
		if s.Frontends[i].ID == id {
			return &s.Frontends[i], true
		}
	}
	return nil, false
}

// KafkaLeader returns the frontend that Kafka clients are told leads a
// partition: the frontends take the partitions of a topic in turn, starting
// at a place given by the topic's name, so that produce traffic spreads over
// them. Every frontend routes every partition, so the choice only balances
// load; it depends on the model alone, so every broker answers alike. It is
// false when no frontend is registered.
func (s *Snapshot) KafkaLeader(topic string, partition int32) (*Frontend, bool) {
	n := len(s.Frontends)
	if n == 0 {
		return nil, false
	}
	start := int(partitioner.Murmur2String(topic) & 0x7fffffff)
	return &s.Frontends[(start+int(partition))%n], true
}

// Cluster-wide settings (Snapshot.Config), by Kafka's broker config names.
// They are set with PUT /v1/cluster/config (or a Kafka client's
// IncrementalAlterConfigs on the cluster-wide broker defaults) and take
// effect at once.
const (
	// SettingAutoCreateTopics lets a Kafka Metadata request create the
	// topics it names (Kafka's auto.create.topics.enable), off by default
	// as Kafka 4 recommends.
	SettingAutoCreateTopics = "auto.create.topics.enable"
	// SettingNumPartitions shapes topics created without a partition count
	// (auto-created ones, CreateTopics with -1).
	SettingNumPartitions = "num.partitions"
	// SettingReplicationFactor is the replication factor of topics
	// created without one (sluicectl and HTTP without a factor,
	// CreateTopics with -1, auto-created ones), lowered to the number of
	// live storage nodes when there are fewer (see DefaultReplicationFactor).
	SettingReplicationFactor = "default.replication.factor"
	// SettingMinInsyncReplicas is the min.insync.replicas of topics that
	// set none of their own (see MinInsyncFor).
	SettingMinInsyncReplicas = "min.insync.replicas"
)

// ClusterConfig is the typed view of the cluster-wide settings.
type ClusterConfig struct {
	AutoCreateTopics  bool
	NumPartitions     int
	ReplicationFactor int
	MinInsyncReplicas int
}

// DefaultClusterConfig returns the settings of a cluster nobody changed:
// Kafka's, but durable ones for replication (3 replicas, 2 in sync for
// acks=all), as Redpanda's production mode and Confluent Cloud have them,
// so that an acknowledged record survives a node's loss without anyone
// asking for it.
func DefaultClusterConfig() ClusterConfig {
	return ClusterConfig{AutoCreateTopics: false, NumPartitions: 1, ReplicationFactor: 3, MinInsyncReplicas: 2}
}

// DefaultReplicationFactor is the replication factor of a topic created
// without one on a cluster of live storage nodes: the setting, or live when
// fewer nodes are up (at least 1, so that placement names the shortage).
// short reports the lowering, which callers log as a warning.
func (c ClusterConfig) DefaultReplicationFactor(live int) (rf int, short bool) {
	if live >= 1 && live < c.ReplicationFactor {
		return live, true
	}
	return c.ReplicationFactor, false
}

// MinInsyncFor is the min.insync.replicas of a topic of replication factor
// rf that sets none of its own: the cluster's setting (capped at rf) where
// rf is 3 or more, and 1 below that, where a second in-sync replica would
// make one replica's loss stop every acks=all write.
func (c ClusterConfig) MinInsyncFor(rf int) int {
	if rf < 3 {
		return 1
	}
	return min(c.MinInsyncReplicas, rf)
}

// ClusterSettings lists the cluster-wide setting names, in order.
func ClusterSettings() []string {
	return []string{SettingAutoCreateTopics, SettingReplicationFactor, SettingMinInsyncReplicas, SettingNumPartitions}
}

// ClusterSettingDefaults returns the defaults of the cluster-wide settings
// as strings, by name.
func ClusterSettingDefaults() map[string]string {
	d := DefaultClusterConfig()
	return map[string]string{
		SettingAutoCreateTopics:  strconv.FormatBool(d.AutoCreateTopics),
		SettingNumPartitions:     strconv.Itoa(d.NumPartitions),
		SettingReplicationFactor: strconv.Itoa(d.ReplicationFactor),
		SettingMinInsyncReplicas: strconv.Itoa(d.MinInsyncReplicas),
	}
}

// ParseClusterConfig validates the settings on top of the defaults.
func ParseClusterConfig(kv map[string]string) (ClusterConfig, error) {
	c := DefaultClusterConfig()
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		v := strings.TrimSpace(kv[k])
		var err error
		switch k {
		case SettingAutoCreateTopics:
			c.AutoCreateTopics, err = strconv.ParseBool(v)
		case SettingNumPartitions:
			var n int64
			n, err = parseInt(v, 1)
			if err == nil && n > MaxPartitions {
				err = fmt.Errorf("must be at most %d", MaxPartitions)
			}
			c.NumPartitions = int(n)
		case SettingReplicationFactor, SettingMinInsyncReplicas:
			var n int64
			n, err = parseInt(v, 1)
			if err == nil && n > MaxReplicationFactor {
				err = fmt.Errorf("must be at most %d", MaxReplicationFactor)
			}
			if k == SettingReplicationFactor {
				c.ReplicationFactor = int(n)
			} else {
				c.MinInsyncReplicas = int(n)
			}
		default:
			return c, fmt.Errorf("unknown cluster setting %q (known: %s)", k, strings.Join(ClusterSettings(), ", "))
		}
		if err != nil {
			return c, fmt.Errorf("cluster setting %s=%q: %w", k, kv[k], err)
		}
	}
	return c, nil
}

// Settings returns the snapshot's cluster-wide settings (SettingsOf).
func (s *Snapshot) Settings() ClusterConfig { return SettingsOf(s.Config) }

// SettingsOf reads stored cluster-wide settings; settings this version
// cannot read (a newer metadata service's) give the defaults.
func SettingsOf(kv map[string]string) ClusterConfig {
	c, err := ParseClusterConfig(kv)
	if err != nil {
		return DefaultClusterConfig()
	}
	return c
}

// SetClusterConfig changes cluster-wide settings: Set overrides keys, Delete
// returns keys to their defaults.
func (c *Client) SetClusterConfig(ctx context.Context, req AlterTopicConfigRequest) (map[string]string, error) {
	var out struct {
		Config map[string]string `json:"config"`
	}
	err := c.do(ctx, http.MethodPut, "/v1/cluster/config", req, &out)
	return out.Config, err
}
