package kafkaapi

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
)

// Consumer groups over the Kafka protocol. The offsets service owns every
// group (its Raft group replicates their state and committed offsets); a
// frontend is the coordinator Kafka clients see (libs/server/kafka's
// FindCoordinator picks one per group), and each group request is relayed to the offsets service
// through libs/groups, the principal named so the offsets service applies
// the group rules the HTTP path has. Classic JoinGroup and SyncGroup wait
// there for the rebalance; the connection goes on meanwhile (Reply.Async).

// groupsFor is the offsets client acting for the connection's principal.
func (s *Service) groupsFor(c *kafka.Conn) *groups.Client {
	name, _ := c.Principal()
	return s.groups.For(name, c.Host())
}

// message is a Kafka nullable error message for err.
func message(err error) *string {
	if err == nil {
		return nil
	}
	m := protocol.MessageOf(err)
	return &m
}

// clientHost is the connection's client address as Kafka shows it.
func clientHost(c *kafka.Conn) string {
	host, _, err := net.SplitHostPort(c.Remote())
	if err != nil {
		return "/" + c.Remote()
	}
	return "/" + host
}

// joinGroup answers a classic JoinGroup once the offsets service ends the
// rebalance's join phase.
func (s *Service) joinGroup(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.JoinGroupRequest)
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation, resp.MemberID = -1, r.MemberID
	fail := func(code int16) kafka.Reply {
		resp.ErrorCode = code
		return kafka.Reply{Msg: resp}
	}
	if !s.broker.UsesGroups(c, "JoinGroup", r.Group) {
		return fail(int16(protocol.GroupAuthorizationFailed))
	}
	jr := groups.JoinRequest{MemberID: r.MemberID, InstanceID: deref(r.InstanceID), ClientID: c.ClientID(), ClientHost: clientHost(c),
		SessionTimeoutMs: r.SessionTimeoutMillis, RebalanceTimeoutMs: r.RebalanceTimeoutMillis, ProtocolType: r.ProtocolType,
		RequireKnownMemberID: r.Version >= 4}
	if r.Version == 0 {
		jr.RebalanceTimeoutMs = r.SessionTimeoutMillis
	}
	for _, p := range r.Protocols {
		gp := groups.Protocol{Name: p.Name, Metadata: p.Metadata}
		if r.ProtocolType == groups.ProtocolTypeConsumer {
			var meta kmsg.ConsumerMemberMetadata
			if meta.ReadFrom(p.Metadata) == nil {
				gp.Topics = meta.Topics
			}
		}
		jr.Protocols = append(jr.Protocols, gp)
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		out, err := client.Join(c.Context(), r.Group, jr)
		if err != nil {
			return fail(protocol.KafkaOf(err, protocol.CoordinatorAnswer))
		}
		resp.ErrorCode, resp.Generation, resp.LeaderID, resp.MemberID, resp.SkipAssignment = out.ErrorCode, out.Generation, out.Leader, out.MemberID, out.SkipAssignment
		if out.ErrorCode == 0 {
			resp.ProtocolType, resp.Protocol = kmsg.StringPtr(out.ProtocolType), kmsg.StringPtr(out.ProtocolName)
		}
		for _, m := range out.Members {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.ProtocolMetadata = m.MemberID, m.Metadata
			if m.InstanceID != "" {
				jm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			resp.Members = append(resp.Members, jm)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// syncGroup answers a classic SyncGroup with the member's assignment once
// the leader's is written.
func (s *Service) syncGroup(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.SyncGroupRequest)
	resp := kmsg.NewPtrSyncGroupResponse()
	if !s.broker.UsesGroups(c, "SyncGroup", r.Group) {
		resp.ErrorCode = int16(protocol.GroupAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	sr := groups.SyncRequest{MemberID: r.MemberID, InstanceID: deref(r.InstanceID), Generation: r.Generation,
		ProtocolType: deref(r.ProtocolType), ProtocolName: deref(r.Protocol)}
	for _, a := range r.GroupAssignment {
		ma := groups.MemberAssignment{MemberID: a.MemberID, Assignment: a.MemberAssignment}
		// Read as a consumer assignment when it is one; the offsets service
		// uses the partitions only for groups of protocol type consumer.
		var ca kmsg.ConsumerMemberAssignment
		if len(a.MemberAssignment) > 0 && ca.ReadFrom(a.MemberAssignment) == nil {
			for _, t := range ca.Topics {
				ma.Partitions = append(ma.Partitions, groups.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		sr.Assignments = append(sr.Assignments, ma)
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		out, err := client.Sync(c.Context(), r.Group, sr)
		if err != nil {
			resp.ErrorCode = protocol.KafkaOf(err, protocol.CoordinatorAnswer)
			return kafka.Reply{Msg: resp}
		}
		resp.ProtocolType, resp.Protocol, resp.MemberAssignment = kmsg.StringPtr(out.ProtocolType), kmsg.StringPtr(out.ProtocolName), out.Assignment
		return kafka.Reply{Msg: resp}
	}}
}

// heartbeat answers a classic Heartbeat.
func (s *Service) heartbeat(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.HeartbeatRequest)
	resp := kmsg.NewPtrHeartbeatResponse()
	if !s.broker.UsesGroups(c, "Heartbeat", r.Group) {
		resp.ErrorCode = int16(protocol.GroupAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		resp.ErrorCode = protocol.KafkaOf(client.ClassicHeartbeat(c.Context(), r.Group,
			groups.ClassicHeartbeatRequest{MemberID: r.MemberID, InstanceID: deref(r.InstanceID), Generation: r.Generation}), protocol.CoordinatorAnswer)
		return kafka.Reply{Msg: resp}
	}}
}

// leaveGroup answers LeaveGroup: one member (v0-v2) or several (v3+).
func (s *Service) leaveGroup(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.LeaveGroupRequest)
	resp := kmsg.NewPtrLeaveGroupResponse()
	if !s.broker.UsesGroups(c, "LeaveGroup", r.Group) {
		resp.ErrorCode = int16(protocol.GroupAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	lr := groups.LeaveRequest{}
	if r.Version < 3 {
		lr.Members = []groups.LeavingMember{{MemberID: r.MemberID}}
	}
	for _, m := range r.Members {
		lr.Members = append(lr.Members, groups.LeavingMember{MemberID: m.MemberID, InstanceID: deref(m.InstanceID), Reason: deref(m.Reason)})
	}
	client := s.groupsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		out, err := client.Leave(c.Context(), r.Group, lr)
		if err != nil {
			resp.ErrorCode = protocol.KafkaOf(err, protocol.CoordinatorAnswer)
			return kafka.Reply{Msg: resp}
		}
		for _, m := range out.Members {
			lm := kmsg.NewLeaveGroupResponseMember()
			lm.MemberID, lm.ErrorCode = m.MemberID, m.ErrorCode
			if m.InstanceID != "" {
				lm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			resp.Members = append(resp.Members, lm)
		}
		if r.Version < 3 && len(out.Members) == 1 {
			resp.ErrorCode, resp.Members = out.Members[0].ErrorCode, nil
		}
		return kafka.Reply{Msg: resp}
	}}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
