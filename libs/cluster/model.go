package cluster

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"

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

// Principal is a user of the cluster: a name and the SHA-256 of its bearer
// token (hex; the token itself is never stored). Admin principals may do
// everything, the admin routes and the console included.
type Principal struct {
	Name        string `json:"name"`
	TokenSHA256 string `json:"token_sha256,omitempty"`
	Admin       bool   `json:"admin,omitempty"`
	// SCRAM holds the principal's SCRAM credentials for Kafka clients
	// (SASL/SCRAM-SHA-256 and -512, RFC 5802), derived from its token: salt,
	// iterations and the stored and server keys, never the token itself.
	SCRAM []ScramCredential `json:"scram,omitempty"`
	// Host is the address a request of the principal comes from, set on
	// the copy a listener checks (At), never stored: ACLs naming a host
	// apply to requests from it alone.
	Host string `json:"-"`
}

// At returns a copy of p checked for a request from host (an IP address;
// "" when unknown, and then no ACL naming a host applies).
func (p *Principal) At(host string) *Principal {
	if p == nil {
		return nil
	}
	c := *p
	c.Host = host
	return &c
}

// ScramCredential is what a server keeps to check a SCRAM client (RFC 5802
// section 3): StoredKey = H(ClientKey), ServerKey, the salt and iteration
// count of the salted password.
type ScramCredential struct {
	// Mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Scram returns the principal's credential for a SCRAM mechanism.
func (p *Principal) Scram(mechanism string) (ScramCredential, bool) {
	for _, c := range p.SCRAM {
		if c.Mechanism == mechanism {
			return c, true
		}
	}
	return ScramCredential{}, false
}

// ACL lets a principal produce to or consume from a topic ("*": every
// topic).
type ACL struct {
	Principal string `json:"principal"`
	// Resource is what Topic names (Kafka's resource type): "" for topics,
	// ResourceGroup or ResourceTransactionalID.
	Resource string `json:"resource,omitempty"`
	// Topic is the resource's name (a topic, a group or a transactional
	// id), "*" for every one, or with Pattern PatternPrefixed the start of
	// the names it covers.
	Topic     string `json:"topic"`
	Operation string `json:"operation"`
	// Pattern is how Topic matches (Kafka's resource pattern type):
	// PatternLiteral ("" as well) or PatternPrefixed.
	Pattern string `json:"pattern,omitempty"`
	// Deny makes the ACL refuse what it names (Kafka's DENY): a deny
	// wins over every allow.
	Deny bool `json:"deny,omitempty"`
	// Host, when set to an IP address, limits the ACL to requests from it
	// (Kafka's host); "" and "*" are every host.
	Host string `json:"host,omitempty"`
}

// From reports whether the ACL applies to a request from host.
func (a ACL) From(host string) bool { return a.Host == "" || a.Host == "*" || a.Host == host }

// ACL topic patterns, Kafka's LITERAL and PREFIXED.
const (
	PatternLiteral  = "literal"
	PatternPrefixed = "prefixed"
)

// ACL resources besides topics: a group's ACLs are consume ACLs (Kafka's
// READ on the group), delete ACLs (DELETE) or describe ACLs (DESCRIBE), a
// transactional id's produce ACLs (WRITE) or describe ACLs (DESCRIBE).
const (
	ResourceGroup           = "group"
	ResourceTransactionalID = "transactional_id"
	// ResourceCluster ACLs name the cluster (ClusterName, Kafka's CLUSTER
	// resource "kafka-cluster"), for clusterOps.
	ResourceCluster = "cluster"
)

// ClusterName is the one name a cluster ACL covers.
const ClusterName = "kafka-cluster"

// Operations on the cluster (ResourceCluster ACLs, Kafka's CLUSTER
// resource), besides OpCreate (create any topic), OpAlter (reassignments,
// leader elections, decommissions, ACLs; not principals, which stay an
// admin's), OpDescribe (list reassignments, ACLs, users and log
// directories; alter implies it),
// OpAlterConfigs (cluster settings and quotas) and OpDescribeConfigs (read
// them; alter_configs implies it).
const (
	// OpIdempotentWrite lets a principal get a producer id for idempotent
	// produce (as produce on some topic also does).
	OpIdempotentWrite = "idempotent_write"
)

// clusterOps are the operations cluster ACLs name.
var clusterOps = []string{OpCreate, OpAlter, OpDescribe, OpAlterConfigs, OpDescribeConfigs, OpIdempotentWrite}

// maxResourceNameLen bounds a group or transactional id an ACL names.
const maxResourceNameLen = 255

// Covers reports whether the ACL's topic pattern covers topic.
func (a ACL) Covers(topic string) bool {
	if a.Pattern == PatternPrefixed {
		return strings.HasPrefix(topic, a.Topic)
	}
	return a.Topic == topic || a.Topic == "*"
}

// Normalized is the ACL as stored: the literal pattern and every host
// written as "", an address in its canonical form.
func (a ACL) Normalized() ACL {
	if a.Pattern == PatternLiteral {
		a.Pattern = ""
	}
	if a.Host == "*" {
		a.Host = ""
	}
	if ip := net.ParseIP(a.Host); ip != nil {
		a.Host = ip.String()
	}
	return a
}

// ValidateACL checks an ACL's resource, operation and name pattern.
func ValidateACL(a ACL) error {
	if a.Host != "" && a.Host != "*" && net.ParseIP(a.Host) == nil {
		return fmt.Errorf("host %q is not an IP address or *", a.Host)
	}
	switch a.Resource {
	case ResourceCluster:
		switch {
		case !slices.Contains(clusterOps, a.Operation):
			return fmt.Errorf("operation %q is not one of a cluster ACL's: %s", a.Operation, strings.Join(clusterOps, ", "))
		case a.Topic != ClusterName || a.Pattern != "" && a.Pattern != PatternLiteral:
			return fmt.Errorf("a cluster ACL names the cluster, %s, literally", ClusterName)
		}
		return nil
	case "":
		if !slices.Contains(TopicOperations(), a.Operation) {
			return fmt.Errorf("operation %q is not one of a topic ACL's: %s", a.Operation, strings.Join(TopicOperations(), ", "))
		}
		return validateTopicPattern(a)
	case ResourceGroup, ResourceTransactionalID:
		return validateResourceACL(a)
	}
	return fmt.Errorf("resource %q is not a topic, %s, %s or %s", a.Resource, ResourceGroup, ResourceTransactionalID, ResourceCluster)
}

// validateResourceACL checks a group's or a transactional id's ACL.
func validateResourceACL(a ACL) error {
	if ops := ResourceOperations(a.Resource); !slices.Contains(ops, a.Operation) {
		return fmt.Errorf("operation %q is not one of a %s ACL's: %s", a.Operation, a.Resource, strings.Join(ops, ", "))
	}
	switch {
	case a.Topic == "*" && a.Pattern == PatternPrefixed:
		return fmt.Errorf("a prefixed ACL names the start of names, not *")
	case a.Topic == "" || len(a.Topic) > maxResourceNameLen:
		return fmt.Errorf("a %s name is 1 to %d bytes", a.Resource, maxResourceNameLen)
	case a.Pattern != "" && a.Pattern != PatternLiteral && a.Pattern != PatternPrefixed:
		return fmt.Errorf("pattern %q is not %s or %s", a.Pattern, PatternLiteral, PatternPrefixed)
	}
	return nil
}

// validateTopicPattern checks a topic ACL's name: a topic name, * (every
// topic) or, prefixed, the start of topic names.
func validateTopicPattern(a ACL) error {
	switch a.Pattern {
	case "", PatternLiteral:
		if a.Topic == "*" {
			return nil
		}
		return ValidateTopicName(a.Topic)
	case PatternPrefixed:
		if a.Topic == "*" {
			return fmt.Errorf("a prefixed ACL names the start of topic names, not *")
		}
		if err := ValidateTopicName(a.Topic); err != nil {
			return fmt.Errorf("topic prefix: %w", err)
		}
		return nil
	}
	return fmt.Errorf("pattern %q is not %s or %s", a.Pattern, PatternLiteral, PatternPrefixed)
}

// ACL operations. OpDescribe (Kafka's DESCRIBE on a topic) lets a
// principal see a topic (Kafka Metadata, ListOffsets) without reading it;
// produce, consume, delete and alter imply it. OpCreate and OpDelete
// (Kafka's CREATE and DELETE on a topic) let it create, and delete or
// truncate (DeleteRecords), the topics the ACL covers. OpAlter (Kafka's
// ALTER) lets it add partitions to them, OpAlterConfigs (ALTER_CONFIGS)
// change their configs, and OpDescribeConfigs (DESCRIBE_CONFIGS, which
// alter_configs implies) read their configs.
const (
	OpProduce         = "produce"
	OpConsume         = "consume"
	OpDescribe        = "describe"
	OpCreate          = "create"
	OpDelete          = "delete"
	OpAlter           = "alter"
	OpAlterConfigs    = "alter_configs"
	OpDescribeConfigs = "describe_configs"
)

// topicOps are the operations only topic ACLs name, in the order errors
// list them.
var topicOps = []string{OpDescribe, OpCreate, OpDelete, OpAlter, OpAlterConfigs, OpDescribeConfigs}

// Allowed reports whether the snapshot lets principal do op on topic: an
// admin may do everything; others what an ACL allows and none denies (a
// deny wins, as in Kafka). As in Kafka, an allow of alter_configs allows
// describe_configs too; only a deny of describe_configs itself denies it.
func (s *Snapshot) Allowed(p *Principal, op, topic string) bool {
	if p.Admin {
		return true
	}
	if op == OpCreate && s.AllowedCluster(p, OpCreate) {
		return true // Kafka's CREATE on the cluster: any topic
	}
	return s.allows(p, "", op, topic)
}

// impliedBy is the operation whose allow also allows op on the resource,
// as in Kafka ("" for none): alter_configs allows describe_configs, and
// on the cluster alter allows describe. (A topic's describe, which every
// right but create and the config ones implies, is Describes'.)
func impliedBy(resource, op string) string {
	switch {
	case op == OpDescribeConfigs:
		return OpAlterConfigs
	case op == OpDescribe && resource == ResourceCluster:
		return OpAlter
	}
	return ""
}

// allows is decide with Kafka's implications: an allow of impliedBy(op)
// allows op too, unless an ACL denies op itself.
func (s *Snapshot) allows(p *Principal, resource, op, name string) bool {
	allowed, _ := s.decide(p, resource, op, name)
	if by := impliedBy(resource, op); !allowed && by != "" && !s.denies(p, resource, op, name) {
		allowed, _ = s.decide(p, resource, by, name)
	}
	return allowed
}

// denies reports whether an ACL of p denies op on the named resource.
func (s *Snapshot) denies(p *Principal, resource, op, name string) bool {
	for _, a := range s.ACLs {
		if a.Principal == p.Name && a.Resource == resource && a.Deny && a.Operation == op && a.Covers(name) && a.From(p.Host) {
			return true
		}
	}
	return false
}

// decide is the ACL decision for a principal that is not an admin: op on
// the named resource is allowed when an ACL of the principal covers it and
// none that covers it denies. named reports whether the principal has any
// ACL of that resource type and operation.
func (s *Snapshot) decide(p *Principal, resource, op, name string) (allowed, named bool) {
	for _, a := range s.ACLs {
		if a.Principal != p.Name || a.Resource != resource || a.Operation != op {
			continue
		}
		named = true
		if a.Covers(name) && a.From(p.Host) {
			if a.Deny {
				return false, true
			}
			allowed = true
		}
	}
	return allowed, named
}

// TopicOperations lists every operation a topic ACL may name (what
// Kafka's ALL on a topic stands for).
func TopicOperations() []string { return append([]string{OpProduce, OpConsume}, topicOps...) }

// ClusterOperations lists every operation a cluster ACL may name.
func ClusterOperations() []string { return slices.Clone(clusterOps) }

// ResourceOperations lists every operation an ACL of a group or a
// transactional id may name (what Kafka's ALL on one stands for).
func ResourceOperations(resource string) []string {
	if resource == ResourceGroup {
		return []string{OpConsume, OpDelete, OpDescribe}
	}
	return []string{OpProduce, OpDescribe}
}

// describing reports whether an allow of op lets its principal see the
// topic: Kafka's DESCRIBE is implied by READ, WRITE, DELETE and ALTER, not
// by CREATE or the config operations.
func describing(op string) bool {
	return op != OpCreate && op != OpAlterConfigs && op != OpDescribeConfigs
}

// Describes reports whether p may see topic: an admin may; others when an
// ACL allows them any operation on it and none denies describing it (a
// deny of produce or consume alone leaves it visible, as in Kafka).
func (s *Snapshot) Describes(p *Principal, topic string) bool {
	if p.Admin {
		return true
	}
	allowed := false
	for _, a := range s.ACLs {
		if a.Principal != p.Name || a.Resource != "" || !a.Covers(topic) || !a.From(p.Host) {
			continue
		}
		switch {
		case a.Deny && a.Operation == OpDescribe:
			return false
		case !a.Deny && describing(a.Operation):
			allowed = true
		}
	}
	return allowed
}

// AllowedCluster reports whether p may do op on the cluster: an admin may
// do everything; others what a cluster ACL allows and none denies. As in
// Kafka, an allow of alter allows describe and one of alter_configs
// allows describe_configs (a deny of the operation itself still wins).
func (s *Snapshot) AllowedCluster(p *Principal, op string) bool {
	return p.Admin || s.allows(p, ResourceCluster, op, ClusterName)
}

// resourceOp is the one operation ACLs of a group or transactional id name.
func resourceOp(resource string) string {
	if resource == ResourceGroup {
		return OpConsume
	}
	return OpProduce
}

// AllowedResource reports whether p may use a group (ResourceGroup) or
// transactional id (ResourceTransactionalID) of this name ("" for any
// one). Until a principal has an ACL of the resource type, the rule
// before such ACLs existed holds: consume rights on some topic for groups,
// produce rights on some topic for transactional ids. Once it has one, its
// ACLs of the type decide, as for topics (a deny wins; "" asks whether
// some allow exists).
func (s *Snapshot) AllowedResource(p *Principal, resource, name string) bool {
	op := resourceOp(resource)
	if p.Admin {
		return true
	}
	if name == "" {
		for _, a := range s.ACLs {
			if a.Principal == p.Name && a.Resource == resource && a.Operation == op && !a.Deny && a.From(p.Host) {
				return true
			}
		}
		return s.AllowedSome(p, op) && !s.namesResource(p, resource)
	}
	allowed, named := s.decide(p, resource, op, name)
	if !named {
		return s.AllowedSome(p, op)
	}
	return allowed
}

// namesResource reports whether p has an ACL of the resource type for the
// operation it takes (consume for groups, produce for transactional ids).
func (s *Snapshot) namesResource(p *Principal, resource string) bool {
	_, named := s.decide(p, resource, resourceOp(resource), "")
	return named
}

// DescribesResource reports whether p may describe a group (Kafka's
// DESCRIBE on a GROUP: DescribeGroups, OffsetFetch, listing it) or a
// transactional id (DESCRIBE on a TRANSACTIONAL_ID: DescribeTransactions,
// listing it). An admin may; others when a describe ACL allows it or they
// may use it (AllowedResource) or, for a group, delete it, as Kafka's READ,
// WRITE and DELETE imply DESCRIBE, and no ACL denies describing it.
func (s *Snapshot) DescribesResource(p *Principal, resource, name string) bool {
	switch {
	case p.Admin:
		return true
	case s.denies(p, resource, OpDescribe, name):
		return false
	}
	if allowed, _ := s.decide(p, resource, OpDescribe, name); allowed {
		return true
	}
	return s.AllowedResource(p, resource, name) || resource == ResourceGroup && s.DeletesGroup(p, name)
}

// ListsGroup reports whether a listing of groups shows p the group: as
// Kafka's ListGroups, every group to a principal allowed describe on the
// cluster, otherwise those it may describe.
func (s *Snapshot) ListsGroup(p *Principal, group string) bool {
	return s.AllowedCluster(p, OpDescribe) || s.DescribesResource(p, ResourceGroup, group)
}

// DeletesGroup reports whether p may delete the group: an admin may;
// others when a group ACL allows delete (Kafka's DELETE on the group) and
// none denies it.
func (s *Snapshot) DeletesGroup(p *Principal, group string) bool {
	return p.Admin || s.allows(p, ResourceGroup, OpDelete, group)
}

// Principal returns the principal with the given name.
func (s *Snapshot) Principal(name string) (*Principal, bool) {
	for i := range s.Principals {
		if s.Principals[i].Name == name {
			return &s.Principals[i], true
		}
	}
	return nil, false
}

// PrincipalByToken returns the principal whose token hashes to sha (hex).
func (s *Snapshot) PrincipalByToken(sha string) (*Principal, bool) {
	for i := range s.Principals {
		if s.Principals[i].TokenSHA256 == sha {
			return &s.Principals[i], true
		}
	}
	return nil, false
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
