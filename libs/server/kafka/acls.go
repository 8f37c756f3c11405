package kafka

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// ACLs over the Kafka protocol, on Sluice's ACL model. A Sluice ACL allows
// or denies a principal an operation on topics (a topic, "*" for every
// topic, or the topics whose names start with a prefix), groups,
// transactional ids or the cluster; in Kafka's terms it is an ALLOW or DENY
// binding of User:NAME, with a LITERAL or PREFIXED pattern, from every host
// ("*") or one IP address: on a TOPIC for WRITE (produce), READ (consume),
// DESCRIBE, CREATE, DELETE, ALTER, ALTER_CONFIGS or DESCRIBE_CONFIGS, on a
// GROUP for READ, DELETE or DESCRIBE, on a TRANSACTIONAL_ID for WRITE or
// DESCRIBE, on the CLUSTER for CREATE, ALTER, DESCRIBE, ALTER_CONFIGS,
// DESCRIBE_CONFIGS or IDEMPOTENT_WRITE. CreateAcls takes exactly those (ALL stands for every
// operation the resource takes) and refuses what the model cannot express,
// with the reason.

// Kafka's names of the ACL resources and operations Sluice keeps.
var (
	kafkaResources = map[string]kmsg.ACLResourceType{"": kmsg.ACLResourceTypeTopic, cluster.ResourceGroup: kmsg.ACLResourceTypeGroup,
		cluster.ResourceTransactionalID: kmsg.ACLResourceTypeTransactionalId, cluster.ResourceCluster: kmsg.ACLResourceTypeCluster}
	kafkaOps = map[string]kmsg.ACLOperation{cluster.OpConsume: kmsg.ACLOperationRead, cluster.OpProduce: kmsg.ACLOperationWrite,
		cluster.OpDescribe: kmsg.ACLOperationDescribe, cluster.OpCreate: kmsg.ACLOperationCreate, cluster.OpDelete: kmsg.ACLOperationDelete,
		cluster.OpAlter: kmsg.ACLOperationAlter, cluster.OpAlterConfigs: kmsg.ACLOperationAlterConfigs,
		cluster.OpDescribeConfigs: kmsg.ACLOperationDescribeConfigs, cluster.OpIdempotentWrite: kmsg.ACLOperationIdempotentWrite}
)

// aclOf describes a Sluice ACL as a Kafka binding.
func aclOf(a cluster.ACL) (res kmsg.DescribeACLsResponseResource, acl kmsg.DescribeACLsResponseResourceACL) {
	res = kmsg.NewDescribeACLsResponseResource()
	res.ResourceType, res.ResourceName, res.ResourcePatternType = kafkaResources[a.Resource], a.Topic, kmsg.ACLResourcePatternTypeLiteral
	if a.Pattern == cluster.PatternPrefixed {
		res.ResourcePatternType = kmsg.ACLResourcePatternTypePrefixed
	}
	acl = kmsg.NewDescribeACLsResponseResourceACL()
	acl.Principal, acl.Host, acl.PermissionType, acl.Operation = "User:"+a.Principal, "*", kmsg.ACLPermissionTypeAllow, kafkaOps[a.Operation]
	if a.Host != "" {
		acl.Host = a.Host
	}
	if a.Deny {
		acl.PermissionType = kmsg.ACLPermissionTypeDeny
	}
	return res, acl
}

// aclFilter is a DescribeAcls or DeleteAcls filter.
type aclFilter struct {
	typ     kmsg.ACLResourceType
	name    *string
	pattern kmsg.ACLResourcePatternType
	who     *string
	host    *string
	op      kmsg.ACLOperation
	perm    kmsg.ACLPermissionType
}

// matches reports whether a Sluice ACL is selected by the filter.
func (f aclFilter) matches(a cluster.ACL) bool {
	res, acl := aclOf(a)
	switch {
	case f.typ != kmsg.ACLResourceTypeAny && f.typ != res.ResourceType:
		return false
	case f.pattern != kmsg.ACLResourcePatternTypeAny && f.pattern != kmsg.ACLResourcePatternTypeMatch && f.pattern != res.ResourcePatternType:
		return false
	case f.name != nil && f.pattern == kmsg.ACLResourcePatternTypeMatch:
		// MATCH: every binding that applies to the named resource.
		if !a.Covers(*f.name) {
			return false
		}
	case f.name != nil && *f.name != res.ResourceName:
		return false
	}
	switch {
	case f.who != nil && *f.who != acl.Principal:
		return false
	case f.host != nil && *f.host != acl.Host:
		return false
	case f.op != kmsg.ACLOperationAny && f.op != acl.Operation:
		return false
	case f.perm != kmsg.ACLPermissionTypeAny && f.perm != acl.PermissionType:
		return false
	}
	return true
}

// describeACLs answers DescribeAcls with the Sluice ACLs the filter selects.
func (b *Broker) describeACLs(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeACLsRequest)
	resp := kmsg.NewPtrDescribeACLsResponse()
	snap := b.Snapshot(ctx)
	if snap == nil {
		resp.ErrorCode = int16(protocol.BrokerNotAvailable)
		return Reply{Msg: resp}
	}
	if !b.who(c, snap).cluster(cluster.OpDescribe) {
		b.denied(c, "DescribeAcls", "the cluster's ACLs")
		resp.ErrorCode = int16(protocol.ClusterAuthorizationFailed)
		return Reply{Msg: resp}
	}
	f := aclFilter{typ: r.ResourceType, name: r.ResourceName, pattern: r.ResourcePatternType, who: r.Principal, host: r.Host, op: r.Operation, perm: r.PermissionType}
	if r.Version == 0 {
		f.pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	byTopic := map[string]int{}
	for _, a := range snap.ACLs {
		if !f.matches(a) {
			continue
		}
		res, acl := aclOf(a)
		key := a.Resource + "\x00" + a.Topic + "\x00" + a.Pattern
		i, ok := byTopic[key]
		if !ok {
			i = len(resp.Resources)
			byTopic[key] = i
			resp.Resources = append(resp.Resources, res)
		}
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
	}
	return Reply{Msg: resp}
}

// toACLs turns a Kafka binding into the Sluice ACLs it stands for, or says
// why the model cannot express it. Whether the principal exists is
// metadata's to say (a principal created a moment ago may not be in this
// broker's model yet).
func toACLs(cr *kmsg.CreateACLsRequestCreation) ([]cluster.ACL, error) {
	name, ok := strings.CutPrefix(cr.Principal, "User:")
	switch {
	case !ok:
		return nil, protocol.InvalidPrincipalType.Err("principal %q: Sluice principals are named User:NAME", cr.Principal)
	case cr.ResourceType == kmsg.ACLResourceTypeCluster && cr.ResourceName != cluster.ClusterName:
		return nil, protocol.InvalidRequest.Err("a CLUSTER binding names %s, not %q", cluster.ClusterName, cr.ResourceName)
	case cr.ResourceType != kmsg.ACLResourceTypeTopic && resourceOf(cr.ResourceType) == "":
		return nil, protocol.InvalidRequest.Err("TOPIC, GROUP, TRANSACTIONAL_ID and CLUSTER ACLs are kept, not resource type %d", cr.ResourceType)
	case cr.ResourcePatternType != kmsg.ACLResourcePatternTypeLiteral && cr.ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed:
		return nil, protocol.InvalidRequest.Err("a binding's pattern is LITERAL or PREFIXED, not pattern type %d", cr.ResourcePatternType)
	case cr.PermissionType != kmsg.ACLPermissionTypeAllow && cr.PermissionType != kmsg.ACLPermissionTypeDeny:
		return nil, protocol.InvalidRequest.Err("a binding's permission is ALLOW or DENY, not %d", cr.PermissionType)
	}
	acl := cluster.ACL{Principal: name, Topic: cr.ResourceName, Deny: cr.PermissionType == kmsg.ACLPermissionTypeDeny, Host: cr.Host}
	if cr.ResourcePatternType == kmsg.ACLResourcePatternTypePrefixed {
		acl.Pattern = cluster.PatternPrefixed
	}
	acl.Resource = resourceOf(cr.ResourceType)
	ops, err := aclOps(acl.Resource, cr.Operation)
	if err != nil {
		return nil, err
	}
	var out []cluster.ACL
	for _, op := range ops {
		a := acl
		a.Operation = op
		if err := cluster.ValidateACL(a); err != nil {
			return nil, protocol.InvalidRequest.Err("%v", err)
		}
		out = append(out, a.Normalized())
	}
	return out, nil
}

// resourceOf is the Sluice resource of a Kafka resource type ("" for a
// topic, and for a type Sluice keeps no ACLs of).
func resourceOf(t kmsg.ACLResourceType) string {
	for r, k := range kafkaResources {
		if k == t {
			return r
		}
	}
	return ""
}

// aclOps are the Sluice operations a Kafka operation on a resource stands
// for (ALL: what the resource takes), or why none does.
func aclOps(resource string, op kmsg.ACLOperation) ([]string, error) {
	switch {
	case (resource == cluster.ResourceGroup || resource == cluster.ResourceTransactionalID) && op == kmsg.ACLOperationAll:
		return cluster.ResourceOperations(resource), nil
	case resource == cluster.ResourceGroup && op != kmsg.ACLOperationRead && op != kmsg.ACLOperationDelete && op != kmsg.ACLOperationDescribe:
		return nil, protocol.InvalidRequest.Err("operation %v is not kept: group ACLs are READ, DELETE, DESCRIBE (or ALL, every one)", op)
	case resource == cluster.ResourceTransactionalID && op != kmsg.ACLOperationWrite && op != kmsg.ACLOperationDescribe:
		return nil, protocol.InvalidRequest.Err("operation %v is not kept: transactional id ACLs are WRITE, DESCRIBE (or ALL, both)", op)
	case resource == cluster.ResourceCluster && op == kmsg.ACLOperationAll:
		return cluster.ClusterOperations(), nil
	case resource == cluster.ResourceCluster && op == kmsg.ACLOperationClusterAction:
		return nil, protocol.InvalidRequest.Err("CLUSTER_ACTION is not kept: the cluster's own requests are its services', by their certificates")
	case op == kmsg.ACLOperationAll:
		return cluster.TopicOperations(), nil
	}
	for name, k := range kafkaOps {
		if k == op {
			return []string{name}, nil
		}
	}
	return nil, protocol.InvalidRequest.Err("operation %v is not kept: topic ACLs are READ (consume), WRITE (produce), DESCRIBE, CREATE, DELETE, ALTER, ALTER_CONFIGS, DESCRIBE_CONFIGS, or ALL (all of them)", op)
}

// createACLs answers CreateAcls.
func (b *Broker) createACLs(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.CreateACLsRequest)
	resp := kmsg.NewPtrCreateACLsResponse()
	snap := b.Snapshot(ctx)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	changed := false
	for i := range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		err := b.createACL(ctx, c, snap, &r.Creations[i])
		res.ErrorCode, res.ErrorMessage = errorFields(err)
		resp.Results = append(resp.Results, res)
		changed = changed || err == nil
	}
	if changed {
		_, _ = b.model.Refresh(ctx) // the client's next DescribeAcls here sees them
	}
	return Reply{Msg: resp}
}

func (b *Broker) createACL(ctx context.Context, c *Conn, snap *cluster.Snapshot, cr *kmsg.CreateACLsRequestCreation) error {
	if snap == nil {
		return protocol.BrokerNotAvailable.Err("no cluster model yet")
	}
	if !b.who(c, snap).cluster(cluster.OpAlter) {
		b.denied(c, "CreateAcls", cr.ResourceName)
		return protocol.ClusterAuthorizationFailed.Err("changing ACLs needs an admin principal or alter on the cluster")
	}
	acls, err := toACLs(cr)
	if err != nil {
		return err
	}
	for _, a := range acls {
		if err := b.admin.SetACL(ctx, a, false); err != nil {
			return err
		}
		c.Log().Info("kafka ACL created", "acl_principal", a.Principal, "topic", a.Topic, "operation", a.Operation)
	}
	return nil
}

// deleteACLs answers DeleteAcls: every Sluice ACL a filter selects is
// deleted and listed.
func (b *Broker) deleteACLs(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DeleteACLsRequest)
	resp := kmsg.NewPtrDeleteACLsResponse()
	snap := b.Snapshot(ctx)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	deleted := false
	for _, rf := range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		switch {
		case snap == nil:
			res.ErrorCode = int16(protocol.BrokerNotAvailable)
		case !b.who(c, snap).cluster(cluster.OpAlter):
			b.denied(c, "DeleteAcls", "the cluster's ACLs")
			res.ErrorCode = int16(protocol.ClusterAuthorizationFailed)
		default:
			f := aclFilter{typ: rf.ResourceType, name: rf.ResourceName, pattern: rf.ResourcePatternType, who: rf.Principal, host: rf.Host, op: rf.Operation, perm: rf.PermissionType}
			if r.Version == 0 {
				f.pattern = kmsg.ACLResourcePatternTypeLiteral
			}
			for _, a := range snap.ACLs {
				if !f.matches(a) {
					continue
				}
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				dr, da := aclOf(a)
				m.ResourceType, m.ResourceName, m.ResourcePatternType = dr.ResourceType, dr.ResourceName, dr.ResourcePatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = da.Principal, da.Host, da.Operation, da.PermissionType
				err := b.admin.SetACL(ctx, a, true)
				m.ErrorCode, m.ErrorMessage = errorFields(err)
				if err == nil {
					c.Log().Info("kafka ACL deleted", "acl_principal", a.Principal, "topic", a.Topic, "operation", a.Operation)
					deleted = true
				}
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	if deleted {
		_, _ = b.model.Refresh(ctx) // the client's next DescribeAcls here sees the deletions
	}
	return Reply{Msg: resp}
}
