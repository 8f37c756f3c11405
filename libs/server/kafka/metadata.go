package kafka

import (
	"context"
	"encoding/hex"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Brokers lists the brokers of snap as Kafka clients see them: the
// registered frontends, then the alive storage nodes with a Kafka listener.
func Brokers(snap *cluster.Snapshot) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	add := func(id int32, addr, rack string) {
		hp, err := splitHostPort(addr)
		if err != nil {
			return
		}
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = id, hp.host, hp.port
		if rack != "" {
			br.Rack = &rack
		}
		out = append(out, br)
	}
	for _, f := range snap.Frontends {
		add(f.ID, f.KafkaAddr, f.Rack)
	}
	for _, n := range snap.Nodes {
		if n.Alive && n.KafkaAddr != "" {
			add(n.ID, n.KafkaAddr, n.Rack)
		}
	}
	return out
}

// controllerID is the broker admin clients send controller requests to: the
// first frontend, or without one the first storage node with a listener.
func controllerID(snap *cluster.Snapshot) int32 {
	if len(snap.Frontends) > 0 {
		return snap.Frontends[0].ID
	}
	for _, n := range snap.Nodes {
		if n.Alive && n.KafkaAddr != "" {
			return n.ID
		}
	}
	return -1
}

// TopicID returns a topic's id as Kafka's 16-byte UUID (zero for topics
// made before ids existed).
func TopicID(t *cluster.Topic) [16]byte {
	var id [16]byte
	if b, err := hex.DecodeString(t.ID); err == nil && len(b) == 16 {
		copy(id[:], b)
	}
	return id
}

// TopicByID finds a topic by its Kafka UUID (none in a nil model, none for
// the zero id).
func TopicByID(snap *cluster.Snapshot, id [16]byte) (*cluster.Topic, bool) {
	if snap == nil || id == ([16]byte{}) {
		return nil, false
	}
	for i := range snap.Topics {
		if TopicID(&snap.Topics[i]) == id {
			return &snap.Topics[i], true
		}
	}
	return nil, false
}

// topicOf finds a topic a request names: by name, or without one by id.
func topicOf(snap *cluster.Snapshot, name *string, id [16]byte) (*cluster.Topic, bool) {
	if name != nil {
		return snap.Topic(*name)
	}
	return TopicByID(snap, id)
}

// LeaderHint is the leader Kafka clients are told to go to for a partition
// (KIP-951's current leader in NOT_LEADER_OR_FOLLOWER answers): the
// frontend snap names as its Kafka leader, at the storage leader's epoch.
// It is false when snap has no such partition or no frontend.
func LeaderHint(snap *cluster.Snapshot, topic string, partition int32) (id, epoch int32, ok bool) {
	if snap == nil {
		return -1, -1, false
	}
	t, found := snap.Topic(topic)
	if !found || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1, false
	}
	f, found := snap.KafkaLeader(topic, partition)
	if !found {
		return -1, -1, false
	}
	return f.ID, t.Partitions[partition].LeaderEpoch, true
}

// AddLeaderEndpoints adds to a produce answer (v10+) the node endpoints of
// the leaders its partitions' hints name, so the client reaches them
// without a metadata round trip.
func AddLeaderEndpoints(snap *cluster.Snapshot, resp *kmsg.ProduceResponse) {
	if snap == nil {
		return
	}
	named := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.CurrentLeader.LeaderID >= 0 {
				named[p.CurrentLeader.LeaderID] = true
			}
		}
	}
	for _, b := range Brokers(snap) {
		if named[b.NodeID] {
			pb := kmsg.NewProduceResponseBroker()
			pb.NodeID, pb.Host, pb.Port, pb.Rack = b.NodeID, b.Host, b.Port, b.Rack
			resp.Brokers = append(resp.Brokers, pb)
		}
	}
}

// metadata answers Metadata: brokers, cluster and controller ids, and the
// topics asked for (every topic the principal may see when none are named),
// creating missing ones when the cluster allows it.
func (b *Broker) metadata(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	resp.ControllerID = -1
	snap := b.Snapshot(ctx)
	if snap == nil {
		for _, t := range r.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = t.Topic, t.TopicID, int16(protocol.LeaderNotAvailable)
			resp.Topics = append(resp.Topics, mt)
		}
		return Reply{Msg: resp}
	}
	w := b.who(c, snap)
	resp.Brokers = Brokers(snap)
	resp.ClusterID = &snap.ClusterID
	resp.ControllerID = controllerID(snap)
	if r.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = w.clusterOps()
	} else {
		resp.AuthorizedOperations = opsNotRequested
	}
	if r.Topics == nil || r.Version == 0 && len(r.Topics) == 0 { // v0 has no null: empty is every topic
		resp.Topics = b.everyTopicMetadata(snap, w, r.IncludeTopicAuthorizedOperations)
		return Reply{Msg: resp}
	}
	for _, rt := range r.Topics {
		resp.Topics = append(resp.Topics, b.namedTopicMetadata(ctx, c, snap, w, r, rt))
	}
	return Reply{Msg: resp}
}

// topicOpsIf is the principal's operations on a topic when asked, Kafka's
// "not requested" otherwise.
func (w who) topicOpsIf(asked bool, topic string) int32 {
	if asked {
		return w.topicOps(topic)
	}
	return opsNotRequested
}

// everyTopicMetadata is the metadata of every topic the principal may see,
// the offsets log's included.
func (b *Broker) everyTopicMetadata(snap *cluster.Snapshot, w who, askedOps bool) []kmsg.MetadataResponseTopic {
	var out []kmsg.MetadataResponseTopic
	for i := range snap.Topics {
		t := &snap.Topics[i]
		if w.describe(t.Name) {
			mt := b.topicMetadata(snap, t)
			mt.AuthorizedOperations = w.topicOpsIf(askedOps, t.Name)
			out = append(out, mt)
		}
	}
	if mt, ok := offsetsLogMetadata(snap); ok && w.describe(groups.OffsetsLogTopic) {
		mt.AuthorizedOperations = w.topicOpsIf(askedOps, groups.OffsetsLogTopic)
		out = append(out, mt)
	}
	return out
}

// namedTopicMetadata is the metadata of a topic a request names, by name
// or id: the topic's, or why there is none (creating it when the request
// and the cluster allow).
func (b *Broker) namedTopicMetadata(ctx context.Context, c *Conn, snap *cluster.Snapshot, w who, r *kmsg.MetadataRequest,
	rt kmsg.MetadataRequestTopic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.AuthorizedOperations = rt.Topic, rt.TopicID, opsNotRequested
	t, ok := topicOf(snap, rt.Topic, rt.TopicID)
	switch {
	case IsOffsetsLog(snap, rt.Topic, rt.TopicID) && !w.describe(groups.OffsetsLogTopic):
		mt.ErrorCode = b.denied(c, "Metadata", groups.OffsetsLogTopic)
	case IsOffsetsLog(snap, rt.Topic, rt.TopicID):
		internal, listed := offsetsLogMetadata(snap)
		if !listed {
			mt.ErrorCode = int16(protocol.LeaderNotAvailable) // no frontend serves it yet
			break
		}
		mt = internal
		mt.AuthorizedOperations = w.topicOpsIf(r.IncludeTopicAuthorizedOperations, groups.OffsetsLogTopic)
	case ok && !w.describe(t.Name):
		mt.ErrorCode = b.denied(c, "Metadata", t.Name)
	case ok:
		mt = b.topicMetadata(snap, t)
		mt.AuthorizedOperations = w.topicOpsIf(r.IncludeTopicAuthorizedOperations, t.Name)
	case rt.Topic == nil:
		mt.ErrorCode = int16(protocol.UnknownTopicID)
	case (r.Version < 4 || r.AllowAutoTopicCreation) && snap.Settings().AutoCreateTopics &&
		(w.may(cluster.OpProduce, *rt.Topic) || w.may(cluster.OpCreate, *rt.Topic)):
		mt.ErrorCode = b.autoCreate(ctx, c, snap, *rt.Topic)
	case !w.describe(*rt.Topic):
		// Kafka answers TOPIC_AUTHORIZATION_FAILED for a topic the
		// principal may not see, whether or not it exists.
		mt.ErrorCode = int16(protocol.TopicAuthorizationFailed)
	default:
		mt.ErrorCode = int16(protocol.UnknownTopicOrPartition)
	}
	return mt
}

// autoCreate creates a topic a Metadata request named, with the cluster's
// default shape; the answer is LEADER_NOT_AVAILABLE (the client asks again
// until leaders are elected), or why it could not be created.
func (b *Broker) autoCreate(ctx context.Context, c *Conn, snap *cluster.Snapshot, name string) int16 {
	if err := cluster.ValidateTopicName(name); err != nil {
		return int16(protocol.InvalidTopic)
	}
	set := snap.Settings()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	t, err := b.admin.CreateTopic(ctx, cluster.CreateTopicRequest{Name: name, Partitions: set.NumPartitions, ReplicationFactor: cluster.DefaultRF})
	switch {
	case err != nil && protocol.CodeOf(err) != protocol.TopicAlreadyExists:
		c.Log().Warn("kafka topic auto-creation failed", "topic", name, "err", err)
		return protocol.KafkaOf(err, protocol.AdminAnswer)
	case err == nil:
		c.Log().Info("kafka topic auto-created", "topic", name, "partitions", set.NumPartitions, "replication_factor", t.ReplicationFactor)
	}
	_, _ = b.model.Refresh(ctx)
	return int16(protocol.LeaderNotAvailable)
}

// topicMetadata describes a topic: each partition led, for Kafka clients,
// by the frontend cluster.Snapshot.KafkaLeader names, at the storage
// leader's epoch, with the storage replicas and ISR.
func (b *Broker) topicMetadata(snap *cluster.Snapshot, t *cluster.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID = &name, TopicID(t)
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.LeaderEpoch = p.ID, p.LeaderEpoch
		mp.Replicas, mp.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		mp.OfflineReplicas = []int32{}
		for _, id := range p.Replicas {
			if n, ok := snap.Node(id); !ok || !n.Alive {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		mp.Leader = -1
		if f, ok := snap.KafkaLeader(t.Name, p.ID); ok && p.Leader >= 0 {
			mp.Leader = f.ID
		} else {
			mp.ErrorCode = int16(protocol.LeaderNotAvailable)
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// kafkaTopic describes a topic as Metadata does: a data topic, or the
// internal __consumer_offsets when a frontend serves it.
func (b *Broker) kafkaTopic(snap *cluster.Snapshot, name string) (kmsg.MetadataResponseTopic, bool) {
	if name == groups.OffsetsLogTopic {
		return offsetsLogMetadata(snap)
	}
	t, ok := snap.Topic(name)
	if !ok {
		return kmsg.MetadataResponseTopic{}, false
	}
	return b.topicMetadata(snap, t), true
}
