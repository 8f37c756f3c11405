package kafkaapi

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
)

// Kafka's names of the coordinator's assignors (KIP-848's server
// assignors): "uniform" is Kafka's sticky balanced one.
var serverAssignors = map[string]string{
	"uniform":    groups.AssignorSticky,
	"range":      groups.AssignorRange,
	"sticky":     groups.AssignorSticky,
	"roundrobin": groups.AssignorRoundRobin,
}

// consumerGroupHeartbeat answers KIP-848's heartbeat with the coordinator's
// own protocol, which it is: topic ids become names and back, and fields a
// client leaves out because they did not change stay as they were.
func (s *Service) consumerGroupHeartbeat(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	fail := func(code protocol.Code, err error) kafka.Reply {
		resp.ErrorCode, resp.ErrorMessage = int16(code), message(err)
		return kafka.Reply{Msg: resp}
	}
	if !s.broker.UsesGroups(c, "ConsumerGroupHeartbeat", r.Group) {
		return fail(protocol.GroupAuthorizationFailed, nil)
	}
	hr := groups.HeartbeatRequest{MemberID: r.MemberID, MemberEpoch: r.MemberEpoch, ClientID: c.ClientID(), InstanceID: deref(r.InstanceID),
		Topics: r.SubscribedTopicNames, TopicsUnchanged: r.SubscribedTopicNames == nil, OwnedUnchanged: r.Topics == nil,
		TopicRegex: r.SubscribedTopicRegex} // checked by the coordinator
	if r.RebalanceTimeoutMillis > 0 {
		hr.RebalanceTimeoutMs = r.RebalanceTimeoutMillis
	}
	if r.ServerAssignor != nil {
		a, ok := serverAssignors[*r.ServerAssignor]
		if !ok {
			return fail(protocol.UnsupportedAssignor, protocol.UnsupportedAssignor.Err("no assignor %q: use uniform or range", *r.ServerAssignor))
		}
		hr.Assignor = a
	}
	for _, name := range r.SubscribedTopicNames {
		if !s.broker.Allowed(c, cluster.OpConsume, name) {
			return fail(protocol.TopicAuthorizationFailed, protocol.TopicAuthorizationFailed.Err("the principal may not read topic %s", name))
		}
	}
	snap := s.broker.Snapshot(ctx)
	hr.Owned = []groups.TopicPartitions{}
	for _, t := range r.Topics {
		if topic, ok := kafka.TopicByID(snap, t.TopicID); ok {
			hr.Owned = append(hr.Owned, groups.TopicPartitions{Topic: topic.Name, Partitions: t.Partitions})
		}
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		out, err := client.Heartbeat(c.Context(), r.Group, hr)
		if err != nil {
			return fail(protocol.Code(protocol.KafkaOf(err, protocol.CoordinatorAnswer)), err)
		}
		resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = kmsg.StringPtr(out.MemberID), out.MemberEpoch, out.HeartbeatIntervalMs
		if r.MemberEpoch < 0 {
			resp.MemberEpoch = r.MemberEpoch // a leave is echoed
			return kafka.Reply{Msg: resp}
		}
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		snap := s.broker.Snapshot(c.Context())
		for _, tp := range out.Assignment {
			if snap == nil {
				break
			}
			t, ok := snap.Topic(tp.Topic)
			if !ok {
				continue // deleted meanwhile: the next heartbeat drops it
			}
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = kafka.TopicID(t), tp.Partitions
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
		return kafka.Reply{Msg: resp}
	}}
}

// kafkaState is a group state under Kafka's name.
func kafkaState(state string) string {
	switch state {
	case groups.StateEmpty:
		return "Empty"
	case groups.StateStable:
		return "Stable"
	case groups.StateReconciling:
		return "Reconciling"
	case groups.StatePreparingRebalance:
		return "PreparingRebalance"
	case groups.StateCompletingRebalance:
		return "CompletingRebalance"
	}
	return "Dead"
}

// listGroups answers ListGroups with the groups this frontend coordinates
// (clients ask every broker and merge the answers), with their protocol
// type, state and type (classic or consumer), filtered as asked.
func (s *Service) listGroups(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ListGroupsRequest)
	resp := kmsg.NewPtrListGroupsResponse()
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		list, err := client.List(c.Context())
		if err != nil {
			resp.ErrorCode = protocol.KafkaOf(err, protocol.CoordinatorAnswer)
			return kafka.Reply{Msg: resp}
		}
		snap := s.broker.Snapshot(c.Context())
		self := s.member.ID()
		for _, l := range list {
			if f, ok := kafka.GroupCoordinator(snap, l.Group); ok && f.ID != self {
				continue // another frontend coordinates it and lists it
			}
			if !s.broker.ListsGroup(c, l.Group) {
				continue // as Kafka lists only the groups the principal may describe
			}
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.GroupState, g.GroupType = l.Group, kafkaState(l.State), l.Protocol
			if g.GroupType == "" {
				g.GroupType = groups.ProtocolConsumer
			}
			g.ProtocolType = l.ProtocolType
			if g.GroupType == groups.ProtocolConsumer {
				g.ProtocolType = groups.ProtocolTypeConsumer
			}
			if len(r.StatesFilter) > 0 && !slices.ContainsFunc(r.StatesFilter, func(s string) bool { return strings.EqualFold(s, g.GroupState) }) {
				continue
			}
			if len(r.TypesFilter) > 0 && !slices.ContainsFunc(r.TypesFilter, func(s string) bool { return strings.EqualFold(s, g.GroupType) }) {
				continue
			}
			resp.Groups = append(resp.Groups, g)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// describeEach describes each named group concurrently for the
// connection's principal; a group it may not describe is answered
// GROUP_AUTHORIZATION_FAILED.
func (s *Service) describeEach(c *kafka.Conn, api string, names []string) ([]*groups.Description, []error) {
	ds, errs := make([]*groups.Description, len(names)), make([]error, len(names))
	client := s.groupsFor(c)
	var asks []func()
	for i, name := range names {
		if !s.broker.DescribesGroup(c, api, name) {
			errs[i] = protocol.GroupAuthorizationFailed.Err("the principal may not describe group %s", name)
			continue
		}
		asks = append(asks, func() { ds[i], errs[i] = client.Describe(c.Context(), name) })
	}
	runAll(asks)
	return ds, errs
}

// groupOps is a described group's authorized-operations field: Kafka's
// "not requested" unless the request asked for it.
func (s *Service) groupOps(c *kafka.Conn, group string, asked bool) int32 {
	if !asked {
		return math.MinInt32
	}
	return s.broker.GroupOperations(c, group)
}

// describeGroups answers DescribeGroups. A classic group's members carry
// their metadata and assignment as the leader encoded them; a consumer
// group's members get their assignment encoded as a consumer protocol
// assignment, so tools written for classic groups show them too.
func (s *Service) describeGroups(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DescribeGroupsRequest)
	resp := kmsg.NewPtrDescribeGroupsResponse()
	return kafka.Reply{Async: func() kafka.Reply {
		ds, errs := s.describeEach(c, "DescribeGroups", r.Groups)
		for i, name := range r.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.AuthorizedOperations = name, s.groupOps(c, name, r.IncludeAuthorizedOperations)
			switch {
			case protocol.CodeOf(errs[i]) == protocol.GroupIDNotFound:
				g.State = "Dead"
			case errs[i] != nil:
				g.ErrorCode, g.ErrorMessage = protocol.KafkaOf(errs[i], protocol.CoordinatorAnswer), message(errs[i])
			default:
				d := ds[i]
				g.State, g.ProtocolType, g.Protocol = kafkaState(d.State), d.ProtocolType, d.ProtocolName
				if d.Protocol != groups.ProtocolClassic {
					g.ProtocolType, g.Protocol = groups.ProtocolTypeConsumer, d.Assignor
				}
				for _, m := range d.Members {
					gm := kmsg.NewDescribeGroupsResponseGroupMember()
					gm.MemberID, gm.ClientID, gm.ClientHost, gm.ProtocolMetadata, gm.MemberAssignment = m.MemberID, m.ClientID, m.ClientHost, m.Metadata, m.AssignmentBytes
					if m.InstanceID != "" {
						gm.InstanceID = kmsg.StringPtr(m.InstanceID)
					}
					if d.Protocol != groups.ProtocolClassic {
						meta := kmsg.NewConsumerMemberMetadata()
						meta.Version, meta.Topics = 0, m.Topics
						gm.ProtocolMetadata = meta.AppendTo(nil)
						ca := kmsg.NewConsumerMemberAssignment()
						for _, tp := range m.Assignment {
							ca.Topics = append(ca.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: tp.Topic, Partitions: tp.Partitions})
						}
						gm.MemberAssignment = ca.AppendTo(nil)
					}
					g.Members = append(g.Members, gm)
				}
			}
			resp.Groups = append(resp.Groups, g)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// consumerGroupDescribe answers KIP-848's ConsumerGroupDescribe; classic
// groups are GROUP_ID_NOT_FOUND there, as in Kafka.
func (s *Service) consumerGroupDescribe(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ConsumerGroupDescribeRequest)
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	return kafka.Reply{Async: func() kafka.Reply {
		ds, errs := s.describeEach(c, "ConsumerGroupDescribe", r.Groups)
		snap := s.broker.Snapshot(c.Context())
		assignment := func(tps []groups.TopicPartitions) kmsg.Assignment {
			a := kmsg.NewAssignment()
			for _, tp := range tps {
				at := kmsg.NewAssignmentTopicPartition()
				at.Topic, at.Partitions = tp.Topic, tp.Partitions
				if snap != nil {
					if t, ok := snap.Topic(tp.Topic); ok {
						at.TopicID = kafka.TopicID(t)
					}
				}
				a.TopicPartitions = append(a.TopicPartitions, at)
			}
			return a
		}
		for i, name := range r.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.AuthorizedOperations = name, s.groupOps(c, name, r.IncludeAuthorizedOperations)
			switch {
			case errs[i] != nil:
				g.ErrorCode, g.ErrorMessage = protocol.KafkaOf(errs[i], protocol.CoordinatorAnswer), message(errs[i])
			case ds[i].Protocol == groups.ProtocolClassic:
				g.ErrorCode = int16(protocol.GroupIDNotFound)
				g.ErrorMessage = kmsg.StringPtr("group " + name + " is a classic group: use DescribeGroups")
			default:
				d := ds[i]
				g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = kafkaState(d.State), d.GroupEpoch, d.GroupEpoch, d.Assignor
				for _, m := range d.Members {
					gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
					gm.MemberID, gm.MemberEpoch, gm.ClientID, gm.SubscribedTopics = m.MemberID, m.MemberEpoch, m.ClientID, m.Topics
					gm.Assignment = assignment(m.Assignment)
					gm.TargetAssignment = assignment(m.Assignment)
					gm.MemberType = 1 // a consumer-protocol member
					g.Members = append(g.Members, gm)
				}
			}
			resp.Groups = append(resp.Groups, g)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// deleteGroups answers DeleteGroups: groups without members go with their
// offsets; deleting needs an admin or a delete ACL on the group, as over
// HTTP.
func (s *Service) deleteGroups(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DeleteGroupsRequest)
	resp := kmsg.NewPtrDeleteGroupsResponse()
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		for _, name := range r.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group = name
			if !s.broker.DeletesGroup(c, name) {
				g.ErrorCode = int16(protocol.GroupAuthorizationFailed)
			} else if err := client.Delete(c.Context(), name); err != nil {
				g.ErrorCode, g.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return kafka.Reply{Msg: resp}
	}}
}
