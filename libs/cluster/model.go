package cluster

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/libs/jsonhttp"
)

// Node is a registered storage node.
type Node struct {
	ID int32 `json:"id"`
	// Addr is the internal address other services use.
	Addr string `json:"addr"`
	// AdvertisedAddr is the address given to clients outside the cluster network.
	AdvertisedAddr string `json:"advertised_addr"`
	// KafkaAddr is the address of the node's Kafka listener as given to
	// Kafka clients ("" when it has none); the node then appears in Kafka
	// Metadata as a broker that serves fetches of the partitions it leads.
	KafkaAddr string `json:"kafka_addr,omitempty"`
	Rack      string `json:"rack,omitempty"`
	// Epoch is bumped on every registration; requests from an older epoch are fenced.
	Epoch int64 `json:"epoch"`
	// Alive is the controller's view of the node's session.
	Alive bool `json:"alive"`
	// Decommissioned marks a node being emptied (sluicectl node
	// decommission): no new replica is placed on it, and its replicas are
	// reassigned to other nodes. It survives re-registration.
	Decommissioned bool `json:"decommissioned,omitempty"`
}

// ClientAddr returns the address a client outside the cluster should dial.
func (n Node) ClientAddr() string {
	if n.AdvertisedAddr != "" {
		return n.AdvertisedAddr
	}
	return n.Addr
}

// Partition is the replicated state of one partition.
type Partition struct {
	ID          int32   `json:"id"`
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"` // -1 when offline
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	// PartitionEpoch is bumped on every change of this partition's state.
	PartitionEpoch int32 `json:"partition_epoch"`
	// TargetReplicas is set while a reassignment is in progress: the replica
	// list the partition gets when it completes. Replicas is then the list
	// from before followed by AddingReplicas, the targets new to the
	// partition, which copy its log from the leader. Once all of them are in
	// the ISR the controller drops the others (moving the leadership first if
	// the leader is among them); a cancel drops AddingReplicas instead and
	// restores the list from before, order included.
	TargetReplicas []int32 `json:"target_replicas,omitempty"`
	AddingReplicas []int32 `json:"adding_replicas,omitempty"`
	// Remote summarizes the partition's remote log (tiered storage); nil
	// while nothing was uploaded.
	Remote *RemoteSummary `json:"remote,omitempty"`
}

// Reassigning reports whether a reassignment of the partition is in progress.
func (p *Partition) Reassigning() bool { return len(p.TargetReplicas) > 0 }

// UnderReplicated reports whether fewer replicas are in sync than the
// partition should have: its replica list, or during a reassignment the list
// from before (replicas being added are not missing yet).
func (p *Partition) UnderReplicated() bool {
	return len(p.ISR) < len(p.Replicas)-len(p.AddingReplicas)
}

// RemovingReplicas returns the replicas a reassignment in progress drops
// when it completes (none otherwise).
func (p *Partition) RemovingReplicas() []int32 {
	if !p.Reassigning() {
		return nil
	}
	var out []int32
	for _, id := range p.Replicas {
		if !slices.Contains(p.TargetReplicas, id) {
			out = append(out, id)
		}
	}
	return out
}

// Topic is a topic with its configuration and partitions.
type Topic struct {
	Name string `json:"name"`
	// ID identifies this incarnation of the topic: a topic deleted and created
	// again under the same name gets a new ID, so storage nodes never mistake
	// the old data for the new topic's.
	ID                string            `json:"id,omitempty"`
	ReplicationFactor int               `json:"replication_factor"`
	Config            map[string]string `json:"config"`
	Partitions        []Partition       `json:"partitions"`
}

// Quota is a client's byte-rate limits (Kafka's client quotas), enforced by
// each frontend (produce) and each storage node (fetch) on its own. A zero
// rate is no limit.
type Quota struct {
	// ClientID is the client the quota is for; "" is the default, for clients
	// without a quota of their own.
	ClientID           string `json:"client_id"`
	ProduceBytesPerSec int64  `json:"produce_bytes_per_sec,omitempty"`
	FetchBytesPerSec   int64  `json:"fetch_bytes_per_sec,omitempty"`
}

// MaxClientIDLen bounds a client id in a quota.
const MaxClientIDLen = 255

// QuotaClientID is the client id a quota is looked up by: id cut to
// MaxClientIDLen bytes.
func QuotaClientID(id string) string {
	if len(id) > MaxClientIDLen {
		return id[:MaxClientIDLen]
	}
	return id
}

// Snapshot is the whole cluster model at one version.
type Snapshot struct {
	Version   uint64  `json:"version"`
	ClusterID string  `json:"cluster_id"`
	Leader    string  `json:"metadata_leader,omitempty"`
	Nodes     []Node  `json:"nodes"`
	Topics    []Topic `json:"topics"`
	// Frontends are the frontends with a Kafka listener, by id: the
	// brokers Kafka clients produce to and administer through.
	Frontends []Frontend `json:"frontends,omitempty"`
	// Config holds the cluster-wide settings (ClusterConfig), by Kafka's
	// names; a key absent has its default.
	Config map[string]string `json:"config,omitempty"`
	// Quotas are the client quotas, ordered by client id.
	Quotas []Quota `json:"quotas,omitempty"`
	// Principals are the users frontends authenticate, by name; ACLs what
	// they may do, ordered by principal, topic and operation.
	Principals []Principal `json:"principals,omitempty"`
	ACLs       []ACL       `json:"acls,omitempty"`
}

// Topic returns the named topic.
func (s *Snapshot) Topic(name string) (*Topic, bool) {
	for i := range s.Topics {
		if s.Topics[i].Name == name {
			return &s.Topics[i], true
		}
	}
	return nil, false
}

// Node returns the node with the given id.
func (s *Snapshot) Node(id int32) (*Node, bool) {
	for i := range s.Nodes {
		if s.Nodes[i].ID == id {
			return &s.Nodes[i], true
		}
	}
	return nil, false
}

// SortStable orders nodes by id and topics by name, so snapshots compare and
// print deterministically.
func (s *Snapshot) SortStable() {
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].ID < s.Nodes[j].ID })
	sort.Slice(s.Topics, func(i, j int) bool { return s.Topics[i].Name < s.Topics[j].Name })
}

// CreateTopicRequest is the body of POST /v1/topics.
type CreateTopicRequest struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	// ReplicationFactor 0 (or absent) or DefaultRF takes the cluster's
	// default.replication.factor, lowered to the live storage nodes when
	// there are fewer.
	ReplicationFactor int               `json:"replication_factor,omitempty"`
	Config            map[string]string `json:"config,omitempty"`
}

// AlterTopicConfigRequest is the body of PATCH /v1/topics/{name}/config: Set
// overrides keys, Delete returns keys to their defaults (Kafka's incremental
// alter configs). Storage nodes apply the result live.
type AlterTopicConfigRequest struct {
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// Apply returns cur after the change, a new map (cur is not modified): the
// Delete keys removed, then the Set keys set, so a key in both is set. The
// cluster-wide settings change by the same rule.
func (r AlterTopicConfigRequest) Apply(cur map[string]string) map[string]string {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	for _, k := range r.Delete {
		delete(next, k)
	}
	maps.Copy(next, r.Set)
	return next
}

// AddPartitionsRequest is the body of POST /v1/topics/{name}/partitions:
// Partitions is the new total, larger than the current count. Keys hashed
// to a partition may map to another one afterwards.
type AddPartitionsRequest struct {
	Partitions int `json:"partitions"`
}

// ReassignPartitionRequest is the body of POST
// /v1/topics/{name}/partitions/{id}/reassignment: the partition's new replica
// list, preferred leader first, as many as the topic's replication factor.
// Replicas new to the partition copy its log and join the ISR before the
// ones left out are dropped, so the partition stays available throughout.
type ReassignPartitionRequest struct {
	Replicas []int32 `json:"replicas"`
}

// DecommissionResponse answers POST /v1/nodes/{id}/decommission: the
// partitions whose reassignment off the node started now, and how many
// replicas the node still holds (reassignments in progress included).
type DecommissionResponse struct {
	Node     int32           `json:"node"`
	Started  []PartitionMove `json:"started"`
	Replicas int             `json:"replicas"`
}

// PartitionMove names a partition and the replicas it is reassigned to.
type PartitionMove struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// RegisterRequest is the body of POST /v1/nodes/register.
type RegisterRequest struct {
	ID             int32  `json:"id"`
	Addr           string `json:"addr"`
	AdvertisedAddr string `json:"advertised_addr"`
	KafkaAddr      string `json:"kafka_addr,omitempty"`
	Rack           string `json:"rack,omitempty"`
}

// RegisterResponse answers a registration with the node's new epoch.
type RegisterResponse struct {
	Epoch int64 `json:"epoch"`
}

// HeartbeatRequest is the body of POST /v1/nodes/heartbeat.
type HeartbeatRequest struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// InitProducerIDResponse answers POST /v1/producers: a new idempotent
// producer id (unique in the cluster, never reused) and its epoch.
type InitProducerIDResponse struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
}

// ErrorBody is the JSON body of every non-2xx answer of the HTTP APIs.
type ErrorBody = jsonhttp.ErrorBody

// DefaultRF asks for the cluster's default replication factor in a
// CreateTopicRequest, as -1 does in Kafka's CreateTopics (so does 0).
const DefaultRF = -1

// Limits on topic names and shapes.
const (
	MaxTopicNameLen = 249
	MaxPartitions   = 10000
	// MaxReplicationFactor bounds the cluster's replication settings.
	MaxReplicationFactor = 16
)

var topicNameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// ValidateTopicName checks a topic name with Kafka's rules.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("topic name is longer than %d characters", MaxTopicNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case !topicNameRE.MatchString(name):
		return fmt.Errorf("topic name %q may hold only ASCII letters, digits, '.', '_' and '-'", name)
	}
	return nil
}
