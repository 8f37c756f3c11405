package kafkaapi

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/shares"
)

// Kafka's share groups (KIP-932) over the offsets service's share groups:
//
//   - ShareGroupHeartbeat: the frontend FindCoordinator names for the group
//     keeps its members in memory and gives every member every partition
//     of the topics it subscribes to (share groups share partitions; the
//     offsets service hands each record to one member). A member's epoch
//     grows when its assignment changes. A frontend that restarted answers
//     UNKNOWN_MEMBER_ID and the member joins again.
//   - ShareFetch and ShareAcknowledge: the frontend that leads a partition
//     for Kafka clients keeps each member's share session (its partitions
//     and epoch), sends the acknowledgements to the offsets service,
//     acquires records there and reads their batches from the storage
//     leaders. Records whose delivery time has not come are deferred and
//     left out of the acquired ranges.
//   - ShareGroupDescribe: the members this frontend coordinates.

// Share-group timings under Kafka's defaults.
const (
	shareHeartbeatInterval = 5 * time.Second
	shareSessionTimeout    = 45 * time.Second
	maxShareWait           = 10 * time.Second
)

// shareState is the frontend's memory of Kafka share consumers.
type shareState struct {
	mu       sync.Mutex                       // guards the maps
	members  map[shareMemberKey]*shareMember  // members of the groups this frontend coordinates
	sessions map[shareMemberKey]*shareSession // share sessions of the partitions it leads
}

type shareMemberKey struct{ group, member string }

type shareMember struct {
	epoch          int32
	topics         []string
	assigned       map[string][]int32
	clientID, host string
	rack           string
	seen           time.Time
}

type shareSession struct {
	epoch int32
	parts map[groups.TP]bool
}

func (s *Service) sharesFor(c *kafka.Conn) *shares.Client {
	name, _ := c.Principal()
	return s.shares.For(name, c.Host())
}

// shareGroupHeartbeat answers ShareGroupHeartbeat.
func (s *Service) shareGroupHeartbeat(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ShareGroupHeartbeatRequest)
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.MemberID = kmsg.StringPtr(r.MemberID)
	fail := func(code protocol.Code, err error) kafka.Reply {
		resp.ErrorCode, resp.ErrorMessage = int16(code), message(err)
		return kafka.Reply{Msg: resp}
	}
	if !s.broker.UsesGroups(c, "ShareGroupHeartbeat", r.GroupID) {
		return fail(protocol.GroupAuthorizationFailed, nil)
	}
	if err := groups.ValidateGroupID(r.GroupID); err != nil {
		return fail(protocol.InvalidGroupID, protocol.InvalidGroupID.Err("%v", err))
	}
	if r.MemberID == "" {
		return fail(protocol.InvalidRequest, protocol.InvalidRequest.Err("a share group member names itself (a member id is required)"))
	}
	for _, name := range r.SubscribedTopicNames {
		if !s.broker.Allowed(c, cluster.OpConsume, name) {
			return fail(protocol.TopicAuthorizationFailed, protocol.TopicAuthorizationFailed.Err("the principal may not read topic %s", name))
		}
	}
	key := shareMemberKey{r.GroupID, r.MemberID}
	if r.MemberEpoch < 0 {
		return s.shareMemberLeaves(c, r, resp)
	}
	snap := s.broker.Snapshot(ctx)
	now := time.Now()
	s.share.mu.Lock()
	defer s.share.mu.Unlock()
	s.expireShareMembersLocked(now)
	m := s.share.members[key]
	switch {
	case r.MemberEpoch == 0:
		if r.SubscribedTopicNames == nil {
			return fail(protocol.InvalidRequest, protocol.InvalidRequest.Err("joining a share group needs the subscribed topic names"))
		}
		m = &shareMember{}
		s.share.members[key] = m
	case m == nil:
		return fail(protocol.UnknownMemberID, protocol.UnknownMemberID.Err("member %s is not in share group %s here (its session expired or this coordinator restarted): join again", r.MemberID, r.GroupID))
	case r.MemberEpoch != m.epoch:
		return fail(protocol.FencedMemberEpoch, protocol.FencedMemberEpoch.Err("member %s of share group %s is at epoch %d, not %d", r.MemberID, r.GroupID, m.epoch, r.MemberEpoch))
	}
	m.seen, m.clientID, m.host = now, c.ClientID(), clientHost(c)
	if r.RackID != nil {
		m.rack = *r.RackID
	}
	if r.SubscribedTopicNames != nil {
		m.topics = slices.Sorted(slices.Values(r.SubscribedTopicNames))
	}
	assigned := shareAssignment(snap, m.topics)
	if r.MemberEpoch == 0 || !maps.EqualFunc(m.assigned, assigned, slices.Equal) {
		m.epoch++
		m.assigned = assigned
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for name, ps := range assigned {
			t, _ := snap.Topic(name)
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = kafka.TopicID(t), ps
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(shareHeartbeatInterval / time.Millisecond)
	return kafka.Reply{Msg: resp}
}

// shareMemberLeaves answers a member leaving its share group (epoch -1):
// it is forgotten here, and its records go to the others at once.
func (s *Service) shareMemberLeaves(c *kafka.Conn, r *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse) kafka.Reply {
	s.share.mu.Lock()
	delete(s.share.members, shareMemberKey{r.GroupID, r.MemberID})
	s.share.mu.Unlock()
	client := s.sharesFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		if err := client.Leave(c.Context(), r.GroupID, r.MemberID); err != nil && protocol.CodeOf(err) != protocol.GroupIDNotFound {
			s.log.Info("releasing a leaving share member's records failed; their locks will expire", "group", r.GroupID, "member", r.MemberID, "err", err)
		}
		resp.MemberEpoch = r.MemberEpoch
		return kafka.Reply{Msg: resp}
	}}
}

// shareAssignment is a share group member's assignment: every partition
// of the topics it subscribes to that exist.
func shareAssignment(snap *cluster.Snapshot, topics []string) map[string][]int32 {
	assigned := map[string][]int32{}
	if snap == nil {
		return assigned
	}
	for _, name := range topics {
		if t, ok := snap.Topic(name); ok {
			for _, p := range t.Partitions {
				assigned[name] = append(assigned[name], p.ID)
			}
		}
	}
	return assigned
}

// expireShareMembersLocked forgets members silent for a session timeout;
// their records go to others when their locks expire.
func (s *Service) expireShareMembersLocked(now time.Time) {
	for k, m := range s.share.members {
		if now.Sub(m.seen) > shareSessionTimeout {
			delete(s.share.members, k)
		}
	}
}

// shareGroupDescribe answers ShareGroupDescribe with the members this
// frontend coordinates.
func (s *Service) shareGroupDescribe(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ShareGroupDescribeRequest)
	resp := kmsg.NewPtrShareGroupDescribeResponse()
	client := s.sharesFor(c)
	snap := s.broker.Snapshot(ctx)
	return kafka.Reply{Async: func() kafka.Reply {
		for _, id := range r.GroupIDs {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.Assignor, g.AuthorizedOperations = id, "simple", s.groupOps(c, id, r.IncludeAuthorizedOperations)
			if !s.broker.DescribesGroup(c, "ShareGroupDescribe", id) {
				g.ErrorCode = int16(protocol.GroupAuthorizationFailed)
				resp.Groups = append(resp.Groups, g)
				continue
			}
			s.share.mu.Lock()
			for k, m := range s.share.members {
				if k.group != id {
					continue
				}
				dm := kmsg.NewShareGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost, dm.SubscribedTopicNames = k.member, m.epoch, m.clientID, m.host, m.topics
				if m.rack != "" {
					dm.RackID = kmsg.StringPtr(m.rack)
				}
				for name, ps := range m.assigned {
					if snap == nil {
						break
					}
					if t, ok := snap.Topic(name); ok {
						at := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
						at.TopicID, at.Topic, at.Partitions = kafka.TopicID(t), name, ps
						dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, at)
					}
				}
				g.Members = append(g.Members, dm)
				g.GroupEpoch = max(g.GroupEpoch, m.epoch)
			}
			s.share.mu.Unlock()
			sort.Slice(g.Members, func(i, j int) bool { return g.Members[i].MemberID < g.Members[j].MemberID })
			g.AssignmentEpoch = g.GroupEpoch
			switch {
			case len(g.Members) > 0:
				g.GroupState = "Stable"
			default:
				if _, err := client.Describe(c.Context(), id); err != nil {
					g.ErrorCode, g.ErrorMessage = protocol.KafkaOf(err, protocol.CoordinatorAnswer), message(err)
				}
				g.GroupState = "Empty"
			}
			resp.Groups = append(resp.Groups, g)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// kafkaAcks turns a partition's Kafka acknowledgement batches into the
// offsets service's acknowledgements: one kind for a batch, or one per
// offset. Renewals (type 4) are taken only in requests that say they carry
// them (IsRenewAck, v2).
func kafkaAcks(tp groups.TP, batches []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, renew bool) ([]shares.Ack, error) {
	var out []shares.Ack
	for _, b := range batches {
		n := b.LastOffset - b.FirstOffset + 1
		if n <= 0 || (len(b.AcknowledgeTypes) != 1 && int64(len(b.AcknowledgeTypes)) != n) {
			return nil, protocol.InvalidRequest.Err("%s: acknowledgement batch %d-%d has %d types", tp, b.FirstOffset, b.LastOffset, len(b.AcknowledgeTypes))
		}
		for i, t := range b.AcknowledgeTypes {
			if t < 0 || t > int8(shares.AckRenew) || (t == int8(shares.AckRenew) && !renew) {
				return nil, protocol.InvalidRequest.Err("%s: acknowledgement type %d is not one this broker takes here (0 to 3, and 4 in a renewal request)", tp, t)
			}
			first, last := b.FirstOffset+int64(i), b.FirstOffset+int64(i)
			if len(b.AcknowledgeTypes) == 1 {
				first, last = b.FirstOffset, b.LastOffset
			}
			a := shares.Ack{Topic: tp.Topic, Partition: tp.Partition, FirstOffset: first, LastOffset: last, Type: shares.AckType(t)}
			if k := len(out); k > 0 && out[k-1].Extends(a) {
				out[k-1].LastOffset = last
				continue
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// ackBatches is the acknowledgement batches of ShareAcknowledge in
// ShareFetch's type (they are the same fields).
func ackBatches(in []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	out := make([]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, len(in))
	for i, b := range in {
		out[i] = kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, AcknowledgeTypes: b.AcknowledgeTypes}
	}
	return out
}

// shareSessionStep checks a request's session epoch against the member's
// session and moves it on: 0 opens a new session, -1 closes it, any other
// must be the session's current epoch. It returns the session (nil once
// closed) or the request's top-level error.
func (s *Service) shareSessionStep(key shareMemberKey, epoch int32, add []groups.TP, forget []groups.TP) (*shareSession, error) {
	s.share.mu.Lock()
	defer s.share.mu.Unlock()
	sess := s.share.sessions[key]
	switch {
	case epoch == 0:
		sess = &shareSession{epoch: 0, parts: map[groups.TP]bool{}}
		s.share.sessions[key] = sess
	case epoch == -1:
		delete(s.share.sessions, key)
		return nil, nil
	case sess == nil:
		return nil, protocol.ShareSessionNotFound.Err("no share session of member %s of group %s on this broker", key.member, key.group)
	case sess.epoch != epoch:
		return nil, protocol.InvalidShareSessionEpoch.Err("the share session is at epoch %d, not %d", sess.epoch, epoch)
	}
	sess.epoch++
	if sess.epoch <= 0 {
		sess.epoch = 1 // Kafka's wrap
	}
	for _, tp := range add {
		sess.parts[tp] = true
	}
	for _, tp := range forget {
		delete(sess.parts, tp)
	}
	out := &shareSession{epoch: sess.epoch, parts: make(map[groups.TP]bool, len(sess.parts))}
	for tp := range sess.parts {
		out.parts[tp] = true
	}
	return out, nil
}

// shareCaller is a share group's member as the frontend acts for it: the
// offsets service's client for the connection's principal, the group and
// the member id.
type shareCaller struct {
	client        *shares.Client
	group, member string
}

// sendAcks sends a request's acknowledgements and returns each
// partition's error (nil when applied) and the group's lock duration in
// milliseconds (0 when not known).
func (sc shareCaller) sendAcks(ctx context.Context, acks []shares.Ack) (map[groups.TP]error, int64) {
	out := map[groups.TP]error{}
	if len(acks) == 0 {
		return out, 0
	}
	resp, err := sc.client.Ack(ctx, sc.group, shares.AckRequest{MemberID: sc.member, Acks: acks})
	if err != nil {
		return ackFailure(acks, err), 0
	}
	return ackErrors(resp.Results), resp.LockDurationMs
}

// ackErrors returns the partitions' errors of acknowledgement results.
func ackErrors(results []shares.AckResult) map[groups.TP]error {
	out := map[groups.TP]error{}
	for _, r := range results {
		if r.ErrorCode != 0 {
			out[groups.TP{Topic: r.Topic, Partition: r.Partition}] = protocol.Code(r.ErrorCode).Err("%s", r.Error)
		}
	}
	return out
}

// ackFailure gives every acknowledged partition the request's error.
func ackFailure(acks []shares.Ack, err error) map[groups.TP]error {
	out := map[groups.TP]error{}
	for _, a := range acks {
		out[groups.TP{Topic: a.Topic, Partition: a.Partition}] = err
	}
	return out
}

// shareCaller checks the group and member of a ShareFetch or
// ShareAcknowledge (api) and the connection's right to use groups; the code
// is the request's top-level error (NONE when it may go on).
func (s *Service) shareCaller(c *kafka.Conn, api string, group, member *string) (string, string, protocol.Code) {
	switch {
	case group == nil || member == nil || *member == "":
		return "", "", protocol.InvalidRequest
	case !s.broker.UsesGroups(c, api, *group):
		return "", "", protocol.GroupAuthorizationFailed
	}
	return *group, *member, protocol.None
}

// shareAcknowledge answers ShareAcknowledge.
func (s *Service) shareAcknowledge(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ShareAcknowledgeRequest)
	resp := kmsg.NewPtrShareAcknowledgeResponse()
	group, member, code := s.shareCaller(c, "ShareAcknowledge", r.GroupID, r.MemberID)
	if code != protocol.None {
		resp.ErrorCode = int16(code)
		return kafka.Reply{Msg: resp}
	}
	snap := s.broker.Snapshot(ctx)
	var acks []shares.Ack
	bad := map[groups.TP]error{}
	for _, t := range r.Topics {
		topic, ok := kafka.TopicByID(snap, t.TopicID)
		for _, p := range t.Partitions {
			tp := groups.TP{Partition: p.Partition}
			if !ok {
				bad[tp] = protocol.UnknownTopicID.Err("no topic has this id")
				continue
			}
			tp.Topic = topic.Name
			a, err := kafkaAcks(tp, ackBatches(p.AcknowledgementBatches), r.IsRenewAck)
			if err != nil {
				bad[tp] = err
				continue
			}
			acks = append(acks, a...)
		}
	}
	if r.ShareSessionEpoch == 0 {
		resp.ErrorCode, resp.ErrorMessage = int16(protocol.InvalidShareSessionEpoch), kmsg.StringPtr("acknowledging needs an open share session (epoch 0 opens one)")
		return kafka.Reply{Msg: resp}
	}
	if _, err := s.shareSessionStep(shareMemberKey{group, member}, r.ShareSessionEpoch, nil, nil); err != nil {
		resp.ErrorCode, resp.ErrorMessage = int16(protocol.CodeOf(err)), message(err)
		return kafka.Reply{Msg: resp}
	}
	sc := shareCaller{s.sharesFor(c), group, member}
	return kafka.Reply{Async: func() kafka.Reply {
		errs, lockMs := sc.sendAcks(c.Context(), acks)
		if lockMs > 0 {
			resp.AcquisitionLockTimeoutMillis = int32(lockMs)
		}
		for tp, err := range bad {
			errs[tp] = err
		}
		byTopic := map[[16]byte]int{} // index in resp.Topics, which grows
		for _, t := range r.Topics {
			topic, _ := kafka.TopicByID(snap, t.TopicID)
			i, ok := byTopic[t.TopicID]
			if !ok {
				nt := kmsg.NewShareAcknowledgeResponseTopic()
				nt.TopicID = t.TopicID
				resp.Topics = append(resp.Topics, nt)
				i = len(resp.Topics) - 1
				byTopic[t.TopicID] = i
			}
			rt := &resp.Topics[i]
			for _, p := range t.Partitions {
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition = p.Partition
				name := ""
				if topic != nil {
					name = topic.Name
				}
				if err := errs[groups.TP{Topic: name, Partition: p.Partition}]; err != nil {
					rp.ErrorCode, rp.ErrorMessage = int16(protocol.CodeOf(err)), message(err)
				}
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = s.member.ID(), leaderEpoch(snap, name, p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		return kafka.Reply{Msg: resp}
	}}
}

// leaderEpoch is a partition's leader epoch (-1 when unknown).
func leaderEpoch(snap *cluster.Snapshot, topic string, partition int32) int32 {
	if snap == nil {
		return -1
	}
	if t, ok := snap.Topic(topic); ok && int(partition) < len(t.Partitions) && partition >= 0 {
		return t.Partitions[partition].LeaderEpoch
	}
	return -1
}
