package kafka

import (
	"context"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// who is a connection's principal as the model knows it.
type who struct {
	check bool // false: authorization is off, or a service acts
	name  string
	p     *cluster.Principal // nil: no principal has the name
	snap  *cluster.Snapshot
}

// Who returns what the connection's principal may do in snap.
func (b *Broker) who(c *Conn, snap *cluster.Snapshot) who {
	name, _ := c.Principal()
	if !b.cfg.Authorize || name != "" && slices.Contains(b.cfg.Services, name) {
		return who{name: name, snap: snap}
	}
	p, _ := snap.Principal(name)
	return who{check: true, name: name, p: p.At(c.Host()), snap: snap}
}

// may reports whether the principal may do op on topic.
func (w who) may(op, topic string) bool {
	return !w.check || w.p != nil && w.snap.Allowed(w.p, op, topic)
}

// describe reports whether the principal may see topic: any right on it.
func (w who) describe(topic string) bool {
	return !w.check || w.p != nil && w.snap.Describes(w.p, topic)
}

// uses reports whether the principal may use the group or transactional
// id (cluster.Snapshot.AllowedResource).
func (w who) uses(resource, name string) bool {
	return !w.check || w.p != nil && w.snap.AllowedResource(w.p, resource, name)
}

// describes reports whether the principal may describe the group or
// transactional id (cluster.Snapshot.DescribesResource).
func (w who) describes(resource, name string) bool {
	return !w.check || w.p != nil && w.snap.DescribesResource(w.p, resource, name)
}

// admin reports whether the principal may change the cluster.
func (w who) admin() bool { return !w.check || w.p != nil && w.p.Admin }

// cluster reports whether the principal may do op on the cluster
// (cluster.Snapshot.AllowedCluster: an admin may).
func (w who) cluster(op string) bool {
	return !w.check || w.p != nil && w.snap.AllowedCluster(w.p, op)
}

// deletesGroup reports whether the principal may delete the group
// (cluster.Snapshot.DeletesGroup: an admin may).
func (w who) deletesGroup(group string) bool {
	return !w.check || w.p != nil && w.snap.DeletesGroup(w.p, group)
}

// producerID reports whether the principal may get an idempotent producer
// id: produce on some topic, or idempotent_write on the cluster.
func (w who) producerID() bool {
	return w.some(cluster.OpProduce) || w.cluster(cluster.OpIdempotentWrite)
}

// some reports whether the principal may do op on some topic.
func (w who) some(op string) bool { return !w.check || w.p != nil && w.snap.AllowedSome(w.p, op) }

// Allowed reports whether the connection's principal may do op on topic in
// the newest model, logging a refusal: the data paths (produce, fetch,
// offsets) ask it for each topic.
func (b *Broker) Allowed(c *Conn, op, topic string) bool {
	return b.permits(c, op, topic, func(w who) bool { return w.may(op, topic) })
}

// Describes reports whether the connection's principal may see topic
// (cluster.Snapshot.Describes), logging a refusal: ListOffsets and
// OffsetForLeaderEpoch ask it, as Kafka asks DESCRIBE.
func (b *Broker) Describes(c *Conn, api, topic string) bool {
	return b.permits(c, api, topic, func(w who) bool { return w.describe(topic) })
}

// UsesGroups reports whether the connection's principal may use the
// consumer group ("" for groups in general: ListGroups), logging a
// refusal: cluster.Snapshot.AllowedResource, the rule of the HTTP path's
// group calls.
func (b *Broker) UsesGroups(c *Conn, api, group string) bool {
	return b.permits(c, api, "group "+group, func(w who) bool { return w.uses(cluster.ResourceGroup, group) })
}

// Transacts reports whether the connection's principal may use the
// transactional id, logging a refusal (cluster.Snapshot.AllowedResource,
// as the transaction coordinator's API checks).
func (b *Broker) Transacts(c *Conn, api, id string) bool {
	return b.permits(c, api, "transactional id "+id, func(w who) bool { return w.uses(cluster.ResourceTransactionalID, id) })
}

// DescribesGroup reports whether the connection's principal may describe
// the group (cluster.Snapshot.DescribesResource), logging a refusal of api
// (none when api is ""): DescribeGroups, OffsetFetch and the group
// describes ask it, as Kafka asks DESCRIBE on the group.
func (b *Broker) DescribesGroup(c *Conn, api, group string) bool {
	return b.permits(c, api, "group "+group, func(w who) bool { return w.describes(cluster.ResourceGroup, group) })
}

// DescribesTransaction reports whether the connection's principal may
// describe the transactional id, logging a refusal of api (none when api
// is ""): DescribeTransactions asks it, ListTransactions lists only those.
func (b *Broker) DescribesTransaction(c *Conn, api, id string) bool {
	return b.permits(c, api, "transactional id "+id, func(w who) bool { return w.describes(cluster.ResourceTransactionalID, id) })
}

// ListsGroup reports whether ListGroups shows the connection's principal
// the group (cluster.Snapshot.ListsGroup), without logging.
func (b *Broker) ListsGroup(c *Conn, group string) bool {
	return b.permits(c, "", "", func(w who) bool { return !w.check || w.p != nil && w.snap.ListsGroup(w.p, group) })
}

// GroupOperations is the authorized-operations field of a group for the
// connection's principal: READ when it may use the group, DESCRIBE when it
// may describe it, DELETE when it may delete it.
func (b *Broker) GroupOperations(c *Conn, group string) int32 {
	if !b.cfg.Authorize {
		return opBits(opRead, opDescribe, opDelete)
	}
	snap := b.model.Snapshot()
	if snap == nil {
		return 0
	}
	w, v := b.who(c, snap), int32(0)
	if w.uses(cluster.ResourceGroup, group) {
		v |= opBits(opRead)
	}
	if w.describes(cluster.ResourceGroup, group) {
		v |= opBits(opDescribe)
	}
	if w.deletesGroup(group) {
		v |= opBits(opDelete)
	}
	return v
}

// Admin reports whether the connection's principal is an admin (or
// authorization is off), logging a refusal.
func (b *Broker) Admin(c *Conn, api string) bool {
	return b.permits(c, api, "the cluster (an admin principal is needed)", who.admin)
}

// DeletesGroup reports whether the connection's principal may delete the
// group (an admin, or a delete ACL on it), logging a refusal.
func (b *Broker) DeletesGroup(c *Conn, group string) bool {
	return b.permits(c, "DeleteGroups", "group "+group, func(w who) bool { return w.deletesGroup(group) })
}

// OnCluster reports whether the connection's principal may do op on the
// cluster (an admin, or a cluster ACL allowing it; always with
// authorization off), logging a refusal.
func (b *Broker) OnCluster(c *Conn, api, op string) bool {
	return b.permits(c, api, "the cluster ("+op+" on it is needed)", func(w who) bool { return w.cluster(op) })
}

// permits reports whether the connection's principal passes ok in the
// newest model (always with authorization off, never without a model),
// logging a refusal of api on what (none when api is "").
func (b *Broker) permits(c *Conn, api, what string, ok func(who) bool) bool {
	if !b.cfg.Authorize {
		return true
	}
	if snap := b.model.Snapshot(); snap != nil && ok(b.who(c, snap)) {
		return true
	}
	if api != "" {
		b.denied(c, api, what)
	}
	return false
}

// adminContext bounds a forwarded admin request by the client's timeout,
// at most the broker's AdminTimeout (which a timeout of 0 or less takes).
func (b *Broker) adminContext(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	timeout := time.Duration(timeoutMs) * time.Millisecond
	if timeout <= 0 || timeout > b.cfg.AdminTimeout {
		timeout = b.cfg.AdminTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// clusterSnapshot is the model for an api that needs op on the cluster:
// nil with CLUSTER_AUTHORIZATION_FAILED for a principal not allowed it, or
// with BROKER_NOT_AVAILABLE while there is no model.
func (b *Broker) clusterSnapshot(ctx context.Context, c *Conn, api, op string) (*cluster.Snapshot, protocol.Code) {
	if !b.OnCluster(c, api, op) {
		return nil, protocol.ClusterAuthorizationFailed
	}
	snap := b.Snapshot(ctx)
	if snap == nil {
		return nil, protocol.BrokerNotAvailable
	}
	return snap, protocol.None
}

// denied logs a refusal and returns its code.
func (b *Broker) denied(c *Conn, api, what string) int16 {
	c.Log().Warn("kafka request denied", "api", api, "what", what)
	return int16(protocol.TopicAuthorizationFailed)
}

// Kafka's ACL operations, as bits of authorized-operations fields.
const (
	opRead            = 3
	opWrite           = 4
	opCreate          = 5
	opDelete          = 6
	opAlter           = 7
	opDescribe        = 8
	opDescribeConfigs = 10
	opAlterConfigs    = 11
	opIdempotentWrite = 12
	// opsNotRequested is what an authorized-operations field holds when the
	// request did not ask for it.
	opsNotRequested = int32(-2147483648)
)

func opBits(ops ...int) int32 {
	var v int32
	for _, o := range ops {
		v |= 1 << o
	}
	return v
}

// topicOps is the authorized-operations field of a topic.
func (w who) topicOps(topic string) int32 {
	if w.admin() {
		return opBits(opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs)
	}
	var v int32
	if w.describe(topic) {
		v |= opBits(opDescribe, opDescribeConfigs)
	}
	if w.may(cluster.OpConsume, topic) {
		v |= opBits(opRead, opDescribe, opDescribeConfigs)
	}
	if w.may(cluster.OpProduce, topic) {
		v |= opBits(opWrite, opDescribe, opDescribeConfigs)
	}
	if w.may(cluster.OpCreate, topic) {
		v |= opBits(opCreate)
	}
	if w.may(cluster.OpDelete, topic) {
		v |= opBits(opDelete, opDescribe)
	}
	if w.may(cluster.OpAlter, topic) {
		v |= opBits(opAlter, opDescribe)
	}
	if w.may(cluster.OpDescribeConfigs, topic) { // alter_configs implies it
		v |= opBits(opDescribeConfigs)
	}
	if w.may(cluster.OpAlterConfigs, topic) {
		v |= opBits(opAlterConfigs)
	}
	return v
}

// clusterOps is the authorized-operations field of the cluster: DESCRIBE
// for every principal (Sluice answers DescribeCluster to all), the rest as
// the principal's rights on the cluster say.
func (w who) clusterOps() int32 {
	v := opBits(opDescribe)
	for op, bit := range map[string]int{cluster.OpCreate: opCreate, cluster.OpAlter: opAlter, cluster.OpDescribeConfigs: opDescribeConfigs,
		cluster.OpAlterConfigs: opAlterConfigs} {
		if w.cluster(op) {
			v |= opBits(bit)
		}
	}
	if w.producerID() {
		v |= opBits(opIdempotentWrite)
	}
	return v
}
