package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// The topic admin requests go to the metadata service, which places and
// commits them; every broker may take them (Kafka sends them to the
// controller Metadata names, a frontend).

// createTopics answers CreateTopics. A count of -1 (partitions, replication
// factor) takes the cluster's default; explicit replica assignments are
// refused, as Sluice places replicas itself.
func (b *Broker) createTopics(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	snap := b.Snapshot(ctx)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	// The topics are created concurrently, a bounded number at a time:
	// their Raft entries share the metadata log's appends, and the
	// metadata leader places each seeing the others.
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(r.Topics))
	var creating errgroup.Group
	creating.SetLimit(createTopicsInFlight)
	for i := range r.Topics {
		rt := &r.Topics[i]
		res := &resp.Topics[i]
		*res = kmsg.NewCreateTopicsResponseTopic()
		res.Topic = rt.Topic
		res.NumPartitions, res.ReplicationFactor = -1, -1
		if seen[rt.Topic] > 1 {
			res.ErrorCode, res.ErrorMessage = errorFields(protocol.InvalidRequest.Err("topic %q is named more than once in the request", rt.Topic))
			continue
		}
		creating.Go(func() error {
			t, err := b.createTopic(ctx, c, snap, rt, r.ValidateOnly)
			if t != nil {
				res.TopicID = TopicID(t)
				res.NumPartitions, res.ReplicationFactor = int32(len(t.Partitions)), int16(t.ReplicationFactor)
				for _, e := range describeTopicConfig(snap, t, nil, false, false) {
					ce := kmsg.NewCreateTopicsResponseTopicConfig()
					ce.Name, ce.Value, ce.ReadOnly, ce.Source = e.Name, e.Value, e.ReadOnly, int8(e.Source)
					res.Configs = append(res.Configs, ce)
				}
			}
			res.ErrorCode, res.ErrorMessage = errorFields(err)
			return nil // each topic's error is in its answer
		})
	}
	_ = creating.Wait()
	created := slices.ContainsFunc(resp.Topics, func(t kmsg.CreateTopicsResponseTopic) bool { return t.ErrorCode == 0 })
	if created && !r.ValidateOnly {
		_, _ = b.model.Refresh(ctx) // the client's next Metadata sees the topics
	}
	return Reply{Msg: resp}
}

// createTopicsInFlight bounds the topics of one CreateTopics request being
// created at once.
const createTopicsInFlight = 16

// createTopic creates (or with validateOnly checks) one topic and returns it
// as created (as it would be, validating).
func (b *Broker) createTopic(ctx context.Context, c *Conn, snap *cluster.Snapshot, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool) (*cluster.Topic, error) {
	if snap == nil {
		return nil, protocol.BrokerNotAvailable.Err("no cluster model yet")
	}
	if !b.who(c, snap).may(cluster.OpCreate, rt.Topic) { // an admin may
		b.denied(c, "CreateTopics", rt.Topic)
		return nil, protocol.TopicAuthorizationFailed.Err("creating topic %s needs an admin principal or a create ACL on it", rt.Topic)
	}
	if len(rt.ReplicaAssignment) > 0 {
		return nil, protocol.InvalidRequest.Err("explicit replica assignments are not supported: Sluice places replicas (give a partition count and a replication factor)")
	}
	set := snap.Settings()
	parts, rf := int(rt.NumPartitions), int(rt.ReplicationFactor)
	if parts == -1 {
		parts = set.NumPartitions
	}
	alive := 0
	for _, n := range snap.Nodes {
		if n.Alive && !n.Decommissioned {
			alive++
		}
	}
	if rf == cluster.DefaultRF && validateOnly {
		rf, _ = set.DefaultReplicationFactor(alive) // metadata resolves it when creating
	}
	kv := map[string]*string{}
	for _, cfg := range rt.Configs {
		kv[cfg.Name] = cfg.Value
	}
	config, err := toTopicConfig(kv)
	if err != nil {
		return nil, err
	}
	if err := cluster.ValidateTopicName(rt.Topic); err != nil {
		return nil, protocol.InvalidTopic.Err("%v", err)
	}
	if rt.Topic == groups.OffsetsLogTopic {
		return nil, protocol.TopicAlreadyExists.Err("%s is an internal topic", rt.Topic)
	}
	if validateOnly {
		switch {
		case parts < 1 || parts > cluster.MaxPartitions:
			return nil, protocol.InvalidPartitions.Err("%d partitions: must be 1..%d", parts, cluster.MaxPartitions)
		case rf < 1:
			return nil, protocol.InvalidReplicationFactor.Err("replication factor %d must be at least 1", rf)
		}
		if _, ok := snap.Topic(rt.Topic); ok {
			return nil, protocol.TopicAlreadyExists.Err("topic %q already exists", rt.Topic)
		}
		if _, err := cluster.ParseTopicConfig(config, rf); err != nil {
			return nil, protocol.InvalidConfig.Err("%v", err)
		}
		if rf > alive {
			return nil, protocol.InvalidReplicationFactor.Err("replication factor %d is larger than the %d storage nodes available", rf, alive)
		}
		t := &cluster.Topic{Name: rt.Topic, ReplicationFactor: rf, Config: config, Partitions: make([]cluster.Partition, parts)}
		return t, nil
	}
	t, err := b.admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: rt.Topic, Partitions: parts, ReplicationFactor: rf, Config: config})
	if err != nil {
		return nil, err
	}
	c.Log().Info("kafka topic created", "topic", rt.Topic, "partitions", parts, "replication_factor", t.ReplicationFactor)
	return t, nil
}

// deleteTopics answers DeleteTopics, by name or (v6+) by topic id.
func (b *Broker) deleteTopics(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	snap := b.Snapshot(ctx)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	targets := r.Topics
	if r.Version < 6 {
		targets = nil
		for _, n := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			name := n
			rt.Topic = &name
			targets = append(targets, rt)
		}
	}
	for _, rt := range targets {
		res := kmsg.NewDeleteTopicsResponseTopic()
		res.Topic, res.TopicID = rt.Topic, rt.TopicID
		err := b.deleteTopic(ctx, c, snap, &rt, &res)
		res.ErrorCode, res.ErrorMessage = errorFields(err)
		resp.Topics = append(resp.Topics, res)
	}
	if len(targets) > 0 {
		_, _ = b.model.Refresh(ctx)
	}
	return Reply{Msg: resp}
}

func (b *Broker) deleteTopic(ctx context.Context, c *Conn, snap *cluster.Snapshot, rt *kmsg.DeleteTopicsRequestTopic, res *kmsg.DeleteTopicsResponseTopic) error {
	if snap == nil {
		return protocol.BrokerNotAvailable.Err("no cluster model yet")
	}
	if IsOffsetsLog(snap, rt.Topic, rt.TopicID) {
		return protocol.InvalidTopic.Err("%s is an internal topic: it cannot be deleted", groups.OffsetsLogTopic)
	}
	t, ok := topicOf(snap, rt.Topic, rt.TopicID)
	if !ok && rt.Topic == nil {
		return protocol.UnknownTopicID.Err("no topic has id %x", rt.TopicID)
	}
	name := *rt.Topic
	if ok {
		name = t.Name
	}
	if !b.who(c, snap).may(cluster.OpDelete, name) { // an admin may
		b.denied(c, "DeleteTopics", name)
		return protocol.TopicAuthorizationFailed.Err("deleting topic %s needs an admin principal or a delete ACL on it", name)
	}
	if !ok {
		return protocol.UnknownTopicOrPartition.Err("topic %q does not exist", name)
	}
	res.Topic, res.TopicID = &name, TopicID(t)
	if err := b.admin.DeleteTopic(ctx, name); err != nil {
		return err
	}
	c.Log().Info("kafka topic deleted", "topic", name)
	return nil
}

// createPartitions answers CreatePartitions: each topic grows to Count
// partitions (explicit assignments are refused).
func (b *Broker) createPartitions(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	snap := b.Snapshot(ctx)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	for _, rt := range r.Topics {
		res := kmsg.NewCreatePartitionsResponseTopic()
		res.Topic = rt.Topic
		err := b.createPartitionsOf(ctx, c, snap, &rt, r.ValidateOnly)
		res.ErrorCode, res.ErrorMessage = errorFields(err)
		resp.Topics = append(resp.Topics, res)
	}
	return Reply{Msg: resp}
}

func (b *Broker) createPartitionsOf(ctx context.Context, c *Conn, snap *cluster.Snapshot, rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	if snap == nil {
		return protocol.BrokerNotAvailable.Err("no cluster model yet")
	}
	if !b.who(c, snap).may(cluster.OpAlter, rt.Topic) { // an admin may
		b.denied(c, "CreatePartitions", rt.Topic)
		return protocol.TopicAuthorizationFailed.Err("adding partitions needs an admin principal or an alter ACL on the topic")
	}
	if len(rt.Assignment) > 0 {
		return protocol.InvalidReplicaAssignment.Err("explicit replica assignments are not supported: Sluice places replicas")
	}
	t, ok := snap.Topic(rt.Topic)
	switch {
	case !ok:
		return protocol.UnknownTopicOrPartition.Err("topic %q does not exist", rt.Topic)
	case int(rt.Count) <= len(t.Partitions):
		return protocol.InvalidPartitions.Err("topic %q has %d partitions; the count can only grow", rt.Topic, len(t.Partitions))
	case rt.Count > cluster.MaxPartitions:
		return protocol.InvalidPartitions.Err("%d partitions: at most %d", rt.Count, cluster.MaxPartitions)
	case validateOnly:
		return nil
	}
	if _, err := b.admin.AddPartitions(ctx, rt.Topic, cluster.AddPartitionsRequest{Partitions: int(rt.Count)}); err != nil {
		return err
	}
	c.Log().Info("kafka partitions added", "topic", rt.Topic, "partitions", rt.Count)
	_, _ = b.model.Refresh(ctx)
	return nil
}
