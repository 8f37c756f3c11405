package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
)

// topicName resolves a request's topic: by name, or (topic ids, v10+ of
// OffsetCommit and OffsetFetch) by id; "" when unknown.
func (s *Service) topicName(ctx context.Context, name string, id [16]byte, byID bool) string {
	if !byID {
		return name
	}
	if t, ok := kafka.TopicByID(s.broker.Snapshot(ctx), id); ok {
		return t.Name
	}
	return ""
}

// topicID is a topic's Kafka id (zero when unknown).
func (s *Service) topicID(ctx context.Context, name string) [16]byte {
	if snap := s.broker.Snapshot(ctx); snap != nil {
		if t, ok := snap.Topic(name); ok {
			return kafka.TopicID(t)
		}
	}
	return [16]byte{}
}

// offsetCommit answers OffsetCommit: the partitions the principal may
// consume are committed together, fenced by the member (its generation for
// a classic member, its member epoch for a KIP-848 one; none for a
// consumer outside any group's membership, allowed while the group has no
// members), all or nothing.
func (s *Service) offsetCommit(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.OffsetCommitRequest)
	resp := kmsg.NewPtrOffsetCommitResponse()
	cr := groups.CommitRequest{MemberID: r.MemberID, MemberEpoch: r.Generation}
	if r.MemberID == "" {
		cr.MemberEpoch = 0
	}
	type slot struct{ t, p int }
	var pending []slot
	usesGroups := s.broker.UsesGroups(c, "OffsetCommit", r.Group)
	for i, rt := range r.Topics {
		out := kmsg.NewOffsetCommitResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		name := s.topicName(ctx, rt.Topic, rt.TopicID, r.Version >= 10)
		code := int16(0)
		switch {
		case !usesGroups:
			code = int16(protocol.GroupAuthorizationFailed)
		case name == "" && r.Version >= 10:
			code = int16(protocol.UnknownTopicID)
		case !s.broker.Allowed(c, cluster.OpConsume, name):
			code = int16(protocol.TopicAuthorizationFailed)
		}
		for j, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			out.Partitions = append(out.Partitions, p)
			if code == 0 {
				cr.Offsets = append(cr.Offsets, groups.Offset{Topic: name, Partition: rp.Partition, Offset: rp.Offset, Metadata: deref(rp.Metadata),
					LeaderEpoch: groups.EpochOf(rp.LeaderEpoch)})
				pending = append(pending, slot{i, j})
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	if len(pending) == 0 {
		return kafka.Reply{Msg: resp}
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		code := protocol.KafkaOf(client.Commit(c.Context(), r.Group, cr), protocol.CoordinatorAnswer)
		for _, sl := range pending {
			resp.Topics[sl.t].Partitions[sl.p].ErrorCode = code
		}
		return kafka.Reply{Msg: resp}
	}}
}

// offsetFetch answers OffsetFetch for one group (v0-v7) or several (v8+):
// the committed offsets of the topics the principal may consume, -1 where
// none is committed (or it belongs to a deleted incarnation of the topic).
func (s *Service) offsetFetch(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.OffsetFetchRequest)
	resp := kmsg.NewPtrOffsetFetchResponse()
	reqs := r.Groups
	if r.Version < 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = r.Group
		if r.Topics != nil {
			g.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		for _, t := range r.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			g.Topics = append(g.Topics, gt)
		}
		reqs = []kmsg.OffsetFetchRequestGroup{g}
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		out := make([]kmsg.OffsetFetchResponseGroup, len(reqs))
		var asks []func()
		for i, g := range reqs {
			out[i] = kmsg.NewOffsetFetchResponseGroup()
			out[i].Group = g.Group
			if !s.broker.DescribesGroup(c, "OffsetFetch", g.Group) {
				out[i].ErrorCode = int16(protocol.GroupAuthorizationFailed)
				continue
			}
			asks = append(asks, func() { s.fetchGroupOffsets(c, client, r, g, &out[i]) })
		}
		runAll(asks)
		if r.Version >= 8 {
			resp.Groups = out
			return kafka.Reply{Msg: resp}
		}
		g := out[0]
		resp.ErrorCode = g.ErrorCode
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if r.Version < 2 && g.ErrorCode != 0 {
			// v0-v1 carry errors per partition only.
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					resp.Topics[i].Partitions[j].ErrorCode = g.ErrorCode
				}
			}
		}
		return kafka.Reply{Msg: resp}
	}}
}

// fetchGroupOffsets fills one group's part of an OffsetFetch answer.
func (s *Service) fetchGroupOffsets(c *kafka.Conn, client *groups.Client, r *kmsg.OffsetFetchRequest, g kmsg.OffsetFetchRequestGroup, out *kmsg.OffsetFetchResponseGroup) {
	ctx := c.Context()
	id := ""
	if r.Version >= 9 {
		id = deref(g.MemberID) // a KIP-848 member's read is checked
	}
	res, err := client.MemberOffsets(ctx, g.Group, id, g.MemberEpoch)
	if err != nil && protocol.CodeOf(err) != protocol.GroupIDNotFound {
		out.ErrorCode = protocol.KafkaOf(err, protocol.CoordinatorAnswer)
		return
	}
	got := committedOffsets{byTP: map[groups.TP]groups.Committed{}, unstable: map[groups.TP]bool{}}
	if r.RequireStable {
		for _, tp := range res.Pending {
			got.unstable[tp] = true
		}
	}
	snap := s.broker.Snapshot(ctx)
	for _, o := range res.Offsets {
		if snap != nil {
			if t, ok := snap.Topic(o.Topic); ok && o.Stale(t.ID) {
				continue
			}
		}
		got.byTP[groups.TP{Topic: o.Topic, Partition: o.Partition}] = o
	}
	if g.Topics == nil {
		out.Topics = s.everyCommittedTopic(c, res.Offsets, got)
		return
	}
	for _, rt := range g.Topics {
		t := kmsg.NewOffsetFetchResponseGroupTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name := s.topicName(ctx, rt.Topic, rt.TopicID, r.Version >= 10)
		allowed := name != "" && s.broker.Describes(c, "OffsetFetch", name)
		for _, p := range rt.Partitions {
			rp := got.partition(name, p)
			switch {
			case name == "":
				rp.ErrorCode = int16(protocol.UnknownTopicID)
			case !allowed:
				rp.Offset, rp.Metadata, rp.ErrorCode = -1, nil, int16(protocol.TopicAuthorizationFailed)
			}
			t.Partitions = append(t.Partitions, rp)
		}
		out.Topics = append(out.Topics, t)
	}
}

// committedOffsets are a group's offsets as OffsetFetch answers them: by
// partition (those of a topic deleted since left out), and the partitions
// whose offsets an open transaction holds, when the request asked.
type committedOffsets struct {
	byTP     map[groups.TP]groups.Committed
	unstable map[groups.TP]bool
}

// partition is a partition's answer.
func (got committedOffsets) partition(topic string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
	if o, ok := got.byTP[groups.TP{Topic: topic, Partition: p}]; ok {
		rp.Offset, rp.Metadata, rp.LeaderEpoch = o.Offset, kmsg.StringPtr(o.Metadata), groups.Epoch(o.LeaderEpoch)
	}
	if got.unstable[groups.TP{Topic: topic, Partition: p}] {
		rp.ErrorCode = int16(protocol.UnstableOffsetCommit)
	}
	return rp
}

// everyCommittedTopic answers a request naming no topics: every topic the
// group committed that the principal may describe, in the order of
// committed.
func (s *Service) everyCommittedTopic(c *kafka.Conn, committed []groups.Committed, got committedOffsets) []kmsg.OffsetFetchResponseGroupTopic {
	byTopic := map[string][]int32{}
	var order []string
	for _, o := range committed {
		tp := groups.TP{Topic: o.Topic, Partition: o.Partition}
		if _, ok := got.byTP[tp]; !ok || !s.broker.Describes(c, "", o.Topic) {
			continue
		}
		if _, seen := byTopic[o.Topic]; !seen {
			order = append(order, o.Topic)
		}
		byTopic[o.Topic] = append(byTopic[o.Topic], o.Partition)
	}
	var out []kmsg.OffsetFetchResponseGroupTopic
	for _, name := range order {
		t := kmsg.NewOffsetFetchResponseGroupTopic()
		t.Topic, t.TopicID = name, s.topicID(c.Context(), name)
		for _, p := range byTopic[name] {
			t.Partitions = append(t.Partitions, got.partition(name, p))
		}
		out = append(out, t)
	}
	return out
}

// offsetDelete answers OffsetDelete: a topic's committed offsets go unless a
// member of the group reads it.
func (s *Service) offsetDelete(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.OffsetDeleteRequest)
	resp := kmsg.NewPtrOffsetDeleteResponse()
	if !s.broker.UsesGroups(c, "OffsetDelete", r.Group) {
		resp.ErrorCode = int16(protocol.GroupAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		for _, rt := range r.Topics {
			t := kmsg.NewOffsetDeleteResponseTopic()
			t.Topic = rt.Topic
			var parts []int32
			for _, p := range rt.Partitions {
				parts = append(parts, p.Partition)
			}
			code := int16(protocol.TopicAuthorizationFailed)
			if s.broker.Allowed(c, cluster.OpConsume, rt.Topic) {
				err := client.DeleteOffsets(c.Context(), r.Group, groups.DeleteOffsetsRequest{Topic: rt.Topic, Partitions: parts})
				if code = protocol.KafkaOf(err, protocol.CoordinatorAnswer); code == int16(protocol.GroupIDNotFound) {
					resp.ErrorCode = code
				}
			}
			for _, p := range parts {
				tp := kmsg.NewOffsetDeleteResponseTopicPartition()
				tp.Partition, tp.ErrorCode = p, code
				t.Partitions = append(t.Partitions, tp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return kafka.Reply{Msg: resp}
	}}
}
