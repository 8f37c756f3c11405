package cluster

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

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
