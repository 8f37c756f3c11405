package cluster

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/libs/protocol"
)

// Need is what a request needs of its principal. The cluster's own services
// may do everything and are let through before a Need is checked; admins
// may do everything but Service requests.
type Need struct {
	// Service: only the cluster's services (Raft relays, node registration
	// and heartbeats, ISR changes).
	Service bool
	// Admin: an admin principal (topic and cluster changes, quotas, users).
	Admin bool
	// Read: any known principal (the cluster model, topic descriptions).
	Read bool
	// Op on each of Topics, or on some topic when Topics is empty (a
	// producer id, a consumer group's calls).
	Op     string
	Topics []string
	// Group makes a refusal GROUP_AUTHORIZATION_FAILED.
	Group bool
	// GroupName and TransactionalID, when set, must be a group and a
	// transactional id the principal may use (AllowedResource).
	GroupName, TransactionalID string
	// Cluster: an admin, or a cluster ACL allowing this operation
	// (AllowedCluster).
	Cluster string
	// DeleteGroup: an admin, or a delete ACL on the group GroupName
	// (DeletesGroup).
	DeleteGroup bool
	// Describe: a read of GroupName or TransactionalID (DescribesResource)
	// and of Topics (Describes); with none named, any known principal (a
	// listing, which shows what it may describe).
	Describe bool
}

// Authorize decides whether p may do what n names; p nil is a name no
// principal has, which may do nothing but still gets the refusal a Kafka
// client expects of the request. A refusal is a *protocol.Error with the
// authorization code the need calls for and a reason naming the principal
// and what it lacked.
func (s *Snapshot) Authorize(p *Principal, name string, n Need) error {
	known := p != nil
	if !known {
		p = &Principal{Name: name}
	}
	// The name is formatted for a refusal only: storage nodes authorize
	// every produce and fetch.
	who := func() string {
		if !known {
			return fmt.Sprintf("%q (no principal has this name)", name)
		}
		return fmt.Sprintf("principal %q", name)
	}
	switch {
	case n.Service:
		return protocol.ClusterAuthorizationFailed.Err("%s may not: this is a request of the cluster's own services", who())
	case p.Admin || n.Read && known:
		return nil
	case n.Read:
		return protocol.ClusterAuthorizationFailed.Err("%s may not read the cluster", who())
	case n.Cluster != "" && s.AllowedCluster(p, n.Cluster):
		return nil
	case n.Cluster != "":
		return protocol.ClusterAuthorizationFailed.Err("%s may not: this needs an admin principal or %s on the cluster", who(), n.Cluster)
	case n.DeleteGroup && s.DeletesGroup(p, n.GroupName):
		return nil
	case n.DeleteGroup:
		return protocol.GroupAuthorizationFailed.Err("%s may not delete group %s: this needs an admin principal or a delete ACL on it", who(), n.GroupName)
	case n.Describe:
		return s.authorizeDescribe(p, known, who, n)
	case n.Admin || n.Op == "":
		return protocol.ClusterAuthorizationFailed.Err("%s may not: this needs an admin principal", who())
	}
	return s.authorizeOp(p, who, n)
}

// authorizeOp decides a Need of an operation (Need.Op) for p, who is not
// an admin: the group and transactional id it names, then the topics.
func (s *Snapshot) authorizeOp(p *Principal, who func() string, n Need) error {
	if n.GroupName != "" && !s.AllowedResource(p, ResourceGroup, n.GroupName) {
		return protocol.GroupAuthorizationFailed.Err("%s may not use group %s", who(), n.GroupName)
	}
	if n.TransactionalID != "" && !s.AllowedResource(p, ResourceTransactionalID, n.TransactionalID) {
		return protocol.TransactionalIDAuthorizationFailed.Err("%s may not use transactional id %s", who(), n.TransactionalID)
	}
	code := protocol.TopicAuthorizationFailed
	if n.Group {
		code = protocol.GroupAuthorizationFailed
	}
	if len(n.Topics) == 0 {
		if n.Op == OpProduce && s.AllowedCluster(p, OpIdempotentWrite) {
			return nil // a producer id (Kafka's IDEMPOTENT_WRITE on the cluster)
		}
		if !s.AllowedSome(p, n.Op) {
			return code.Err("%s may not: it has no %s ACL on any topic", who(), n.Op)
		}
		return nil
	}
	var denied []string
	for _, t := range n.Topics {
		if !s.Allowed(p, n.Op, t) && !slices.Contains(denied, t) {
			denied = append(denied, t)
		}
	}
	if len(denied) > 0 {
		return protocol.TopicAuthorizationFailed.Err("%s may not: %s on topic %s", who(), n.Op, strings.Join(denied, ", "))
	}
	return nil
}

// authorizeDescribe decides a Need.Describe for p, who is not an admin.
func (s *Snapshot) authorizeDescribe(p *Principal, known bool, who func() string, n Need) error {
	switch {
	case !known && n.TransactionalID != "":
		return protocol.TransactionalIDAuthorizationFailed.Err("%s may not describe transactional id %s", who(), n.TransactionalID)
	case !known:
		return protocol.GroupAuthorizationFailed.Err("%s may not describe groups", who())
	case n.GroupName != "" && !s.DescribesResource(p, ResourceGroup, n.GroupName):
		return protocol.GroupAuthorizationFailed.Err("%s may not describe group %s", who(), n.GroupName)
	case n.TransactionalID != "" && !s.DescribesResource(p, ResourceTransactionalID, n.TransactionalID):
		return protocol.TransactionalIDAuthorizationFailed.Err("%s may not describe transactional id %s", who(), n.TransactionalID)
	}
	var hidden []string
	for _, t := range n.Topics {
		if !s.Describes(p, t) && !slices.Contains(hidden, t) {
			hidden = append(hidden, t)
		}
	}
	if len(hidden) > 0 {
		return protocol.TopicAuthorizationFailed.Err("%s may not: describe on topic %s", who(), strings.Join(hidden, ", "))
	}
	return nil
}

// CreateTopicNeed is what creating a topic needs (POST /v1/topics at a
// frontend or at metadata): an admin, or a create ACL covering the name in
// the body; a body that does not parse needs an admin.
func CreateTopicNeed(body []byte) Need {
	var req CreateTopicRequest
	if json.Unmarshal(body, &req) != nil || ValidateTopicName(req.Name) != nil {
		return Need{Admin: true}
	}
	return Need{Op: OpCreate, Topics: []string{req.Name}}
}

// PathName is a name taken from a request path, unescaped (as it is when
// it does not unescape).
func PathName(seg string) string {
	if name, err := url.PathUnescape(seg); err == nil {
		return name
	}
	return seg
}

// AllowedSome reports whether p may do op on some topic.
func (s *Snapshot) AllowedSome(p *Principal, op string) bool {
	if p.Admin {
		return true
	}
	for _, a := range s.ACLs {
		if a.Principal == p.Name && a.Resource == "" && a.Operation == op && !a.Deny && a.From(p.Host) {
			return true
		}
	}
	return false
}

// Redacted returns the model as shown to a client that is not one of the
// cluster's services: never the token hashes, and the principals and ACLs
// only with access (to an admin, or a principal allowed describe on the
// cluster). The topics and nodes are shared with s.
func (s *Snapshot) Redacted(access bool) *Snapshot {
	out := *s
	out.Principals, out.ACLs = nil, nil
	if !access {
		return &out
	}
	out.ACLs = s.ACLs
	if len(s.Principals) > 0 {
		out.Principals = make([]Principal, len(s.Principals))
		for i, p := range s.Principals {
			out.Principals[i] = Principal{Name: p.Name, Admin: p.Admin}
		}
	}
	return &out
}
