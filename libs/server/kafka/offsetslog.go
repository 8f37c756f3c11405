package kafka

import (
	"crypto/sha256"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// Kafka's internal topic __consumer_offsets, served by the frontends from
// the offsets service's change log (groups.OffsetsLogRecord): listed as
// internal, readable with Kafka's own key and value formats, never written
// by clients.

// OffsetsLogTopicID is __consumer_offsets' topic id in a cluster: derived
// from the cluster id, so every listener names the same one.
func OffsetsLogTopicID(snap *cluster.Snapshot) [16]byte {
	if snap == nil {
		return [16]byte{}
	}
	if c := offsetsLogID.Load(); c != nil && c.cluster == snap.ClusterID {
		return c.id // fetches by topic id ask for it per topic
	}
	c := &clusterTopicID{cluster: snap.ClusterID}
	sum := sha256.Sum256([]byte("sluice internal topic " + groups.OffsetsLogTopic + " " + snap.ClusterID))
	copy(c.id[:], sum[:])
	c.id[6] = c.id[6]&0x0f | 0x40 // a version 4 UUID, as Kafka's
	c.id[8] = c.id[8]&0x3f | 0x80
	offsetsLogID.Store(c)
	return c.id
}

// clusterTopicID is a cluster's __consumer_offsets id, as last computed.
type clusterTopicID struct {
	cluster string
	id      [16]byte
}

var offsetsLogID atomic.Pointer[clusterTopicID]

// IsOffsetsLog reports whether a request's topic (by name, or by id when
// the name is nil or empty) is __consumer_offsets.
func IsOffsetsLog(snap *cluster.Snapshot, name *string, id [16]byte) bool {
	if name != nil && *name != "" {
		return *name == groups.OffsetsLogTopic
	}
	return snap != nil && id != [16]byte{} && id == OffsetsLogTopicID(snap)
}

// offsetsLogMetadata describes __consumer_offsets: internal, each partition
// led by a frontend (as the data topics are), at leader epoch 0, its only
// replica that frontend. Without frontends it is not listed.
func offsetsLogMetadata(snap *cluster.Snapshot) (kmsg.MetadataResponseTopic, bool) {
	mt := kmsg.NewMetadataResponseTopic()
	if len(snap.Frontends) == 0 {
		return mt, false
	}
	name := groups.OffsetsLogTopic
	mt.Topic, mt.TopicID, mt.IsInternal = &name, OffsetsLogTopicID(snap), true
	for p := range int32(groups.OffsetsLogPartitions) {
		f, _ := snap.KafkaLeader(name, p)
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, f.ID, 0
		mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{f.ID}, []int32{f.ID}, []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt, true
}

// OffsetsLogBatches encodes change-log records as Kafka writes them to
// __consumer_offsets, one record batch each (positions are far apart): a
// committed offset as an OffsetCommitKey v1 and OffsetCommitValue v3, a
// group as a GroupMetadataKey v2 and GroupMetadataValue v3, a consumer
// protocol member's subscription and assignment in Kafka's consumer
// protocol encoding. It stops before maxBytes is passed, the first record
// always included.
func OffsetsLogBatches(recs []groups.OffsetsLogRecord, maxBytes int) ([]byte, error) {
	var out []byte
	b := record.NewBuilder(record.CodecNone)
	for _, r := range recs {
		key, value, ts := offsetsLogRecord(r)
		b.Reset()
		b.Append(record.Record{Timestamp: ts, Key: key, Value: value})
		batch, err := b.Build()
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && len(out)+len(batch) > maxBytes {
			break
		}
		record.SetBaseOffset(batch, r.Position)
		out = append(out, batch...)
	}
	return out, nil
}

func offsetsLogRecord(r groups.OffsetsLogRecord) (key, value []byte, ts int64) {
	if o := r.Offset; o != nil {
		k := kmsg.OffsetCommitKey{Version: 1, Group: r.Group, Topic: o.Topic, Partition: o.Partition}
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.Metadata, v.CommitTimestamp, v.LeaderEpoch = 3, o.Offset, o.Metadata, o.CommitTimeMs, -1
		if o.LeaderEpoch != nil {
			v.LeaderEpoch = *o.LeaderEpoch
		}
		return k.AppendTo(nil), v.AppendTo(nil), o.CommitTimeMs
	}
	s := r.State
	k := kmsg.GroupMetadataKey{Version: 2, Group: r.Group}
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.Generation, v.CurrentStateTimestamp = 3, s.Epoch, -1
	v.ProtocolType = s.ProtocolType
	if s.Protocol != groups.ProtocolClassic {
		v.ProtocolType = "consumer"
	}
	switch {
	case s.Protocol == groups.ProtocolClassic && s.ProtocolName != "":
		v.Protocol = kmsg.StringPtr(s.ProtocolName)
	case s.Protocol != groups.ProtocolClassic && len(s.Members) > 0:
		v.Protocol = kmsg.StringPtr(s.Assignor)
	}
	if s.Leader != "" {
		v.Leader = kmsg.StringPtr(s.Leader)
	}
	for _, m := range s.Members {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.ClientID, vm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
		vm.SessionTimeoutMillis, vm.RebalanceTimeoutMillis = m.SessionTimeoutMs, m.RebalanceTimeoutMs
		if m.InstanceID != "" {
			vm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		vm.Subscription, vm.Assignment = m.Metadata, m.AssignmentBytes
		if s.Protocol != groups.ProtocolClassic {
			md := kmsg.NewConsumerMemberMetadata()
			md.Topics = m.Topics
			vm.Subscription = md.AppendTo(nil)
			a := kmsg.NewConsumerMemberAssignment()
			for _, tp := range m.Assignment {
				at := kmsg.NewConsumerMemberAssignmentTopic()
				at.Topic, at.Partitions = tp.Topic, tp.Partitions
				a.Topics = append(a.Topics, at)
			}
			vm.Assignment = a.AppendTo(nil)
		}
		v.Members = append(v.Members, vm)
	}
	return k.AppendTo(nil), v.AppendTo(nil), -1
}

// OffsetsLogWriteRefused is the refusal of a write to __consumer_offsets,
// as Kafka refuses appends to its internal topics.
var OffsetsLogWriteRefused = protocol.InvalidTopic.Err("%s is an internal topic: clients cannot write to it", groups.OffsetsLogTopic)
