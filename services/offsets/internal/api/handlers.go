package api

import (
	"context"
	"net/http"
	"sort"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

func (s *Server) heartbeat(c context.Context, ctx *fasthttp.RequestCtx, group string) error {
	var req groups.HeartbeatRequest
	if err := decode(ctx, &req); err != nil {
		return err
	}
	if name, check := s.cfg.Authz.Principal(ctx); check {
		access := s.ends.Access()
		p, _ := access.Principal(name)
		p = p.At(s.cfg.Authz.ClientHost(ctx))
		req.Readable = func(topic string) bool { return p != nil && access.Allowed(p, cluster.OpConsume, topic) }
	}
	resp, err := s.coord.Heartbeat(c, group, req)
	if err != nil {
		return err
	}
	service.WriteJSON(ctx, http.StatusOK, resp)
	return nil
}

func (s *Server) commit(c context.Context, ctx *fasthttp.RequestCtx, group string) error {
	var req groups.CommitRequest
	if err := decode(ctx, &req); err != nil {
		return err
	}
	s.stampTopicIDs(req.Offsets)
	if err := s.coord.Commit(c, group, req); err != nil {
		return err
	}
	service.WriteJSON(ctx, http.StatusOK, struct{}{})
	return nil
}

// offsetsLog answers a page of one partition of the groups' change log.
func (s *Server) offsetsLog(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error {
	partition, err := strconv.ParseInt(p.Get("partition"), 10, 32)
	if err != nil || partition < 0 || partition >= groups.OffsetsLogPartitions {
		return protocol.UnknownTopicOrPartition.Err("%s has partitions 0-%d, not %q", groups.OffsetsLogTopic, groups.OffsetsLogPartitions-1, p.Get("partition"))
	}
	args := ctx.QueryArgs()
	from, err := strconv.ParseInt(string(args.Peek("from")), 10, 64)
	if err != nil && args.Has("from") || from < 0 {
		return protocol.InvalidRequest.Err("from %q is not a position (a number, 0 or more)", args.Peek("from"))
	}
	limit, err := strconv.Atoi(string(args.Peek("limit")))
	if err != nil && args.Has("limit") || limit < 0 {
		return protocol.InvalidRequest.Err("limit %q is not a number of records", args.Peek("limit"))
	}
	if err := s.node.Linearize(c); err != nil {
		return protocol.NotCoordinator.Err("%v", err)
	}
	page, err := s.fsm.OffsetsLog(int32(partition), from, limit)
	if err != nil {
		return err
	}
	service.WriteJSON(ctx, http.StatusOK, page)
	return nil
}

func (s *Server) offsets(c context.Context, ctx *fasthttp.RequestCtx, group string) error {
	if err := s.node.Linearize(c); err != nil {
		return protocol.NotCoordinator.Err("%v", err)
	}
	if id := string(ctx.QueryArgs().Peek("member_id")); id != "" {
		epoch, err := strconv.ParseInt(string(ctx.QueryArgs().Peek("member_epoch")), 10, 32)
		if err != nil {
			return protocol.InvalidRequest.Err("member_epoch %q is not a number", ctx.QueryArgs().Peek("member_epoch"))
		}
		g, _ := s.fsm.Group(group)
		if err := fsm.CheckFetch(g, group, id, int32(epoch)); err != nil {
			return err
		}
	}
	offs, err := s.fsm.Offsets(group, string(ctx.QueryArgs().Peek("topic")))
	if err != nil {
		return err
	}
	pending, err := s.fsm.PendingTxnOffsets(group)
	if err != nil {
		return err
	}
	service.WriteJSON(ctx, http.StatusOK, groups.OffsetsResponse{Group: group, Offsets: offs, Pending: pending})
	return nil
}

func (s *Server) list(c context.Context, ctx *fasthttp.RequestCtx) error {
	if err := s.node.Linearize(c); err != nil {
		return protocol.NotCoordinator.Err("%v", err)
	}
	// As Kafka's ListGroups, a principal sees the groups it may describe.
	sees := s.shows(ctx, (*cluster.Snapshot).ListsGroup)
	out := groups.ListResponse{Groups: []groups.Listing{}}
	for _, name := range s.fsm.GroupNames() {
		if !sees(name) {
			continue
		}
		l := groups.Listing{Group: name, State: groups.StateEmpty}
		if g, ok := s.fsm.Group(name); ok {
			l.State, l.Members, l.Protocol, l.ProtocolType = s.stateOf(g), len(g.Members), g.ProtocolLabel(), g.ProtocolType
		}
		out.Groups = append(out.Groups, l)
	}
	service.WriteJSON(ctx, http.StatusOK, out)
	return nil
}

func (s *Server) delete(c context.Context, ctx *fasthttp.RequestCtx, group string) error {
	if err := s.coord.Delete(c, group); err != nil {
		return err
	}
	service.WriteJSON(ctx, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) reset(c context.Context, ctx *fasthttp.RequestCtx, group string) error {
	var req groups.ResetRequest
	if err := decode(ctx, &req); err != nil {
		return err
	}
	if g, ok := s.fsm.Group(group); ok && len(g.Members) > 0 {
		return protocol.NonEmptyGroup.Err("group %s has %d active members; stop them before resetting its offsets", group, len(g.Members))
	}
	offs, err := s.resetTargets(c, req)
	if err != nil {
		return err
	}
	s.stampTopicIDs(offs)
	if !req.DryRun {
		if err := s.coord.Reset(c, group, offs); err != nil {
			return err
		}
	}
	out := groups.ResetResponse{Offsets: make([]groups.Committed, 0, len(offs))}
	for _, o := range offs {
		out.Offsets = append(out.Offsets, groups.Committed{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	service.WriteJSON(ctx, http.StatusOK, out)
	return nil
}

// resetTargets computes the new offset of each partition a reset names.
func (s *Server) resetTargets(c context.Context, req groups.ResetRequest) ([]groups.Offset, error) {
	n, ok := s.ends.Topic(req.Topic)
	if !ok {
		return nil, protocol.UnknownTopicOrPartition.Err("no topic %q", req.Topic)
	}
	parts := req.Partitions
	if len(parts) == 0 {
		for p := int32(0); p < n; p++ {
			parts = append(parts, p)
		}
	}
	var out []groups.Offset
	for _, p := range parts {
		if p < 0 || p >= n {
			return nil, protocol.UnknownTopicOrPartition.Err("topic %q has no partition %d", req.Topic, p)
		}
		off, err := s.resetTarget(c, req, p)
		if err != nil {
			return nil, err
		}
		out = append(out, groups.Offset{Topic: req.Topic, Partition: p, Offset: off})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

func (s *Server) resetTarget(c context.Context, req groups.ResetRequest, p int32) (int64, error) {
	switch req.To {
	case groups.ResetEarliest:
		return s.ends.ListOffset(c, req.Topic, p, protocol.TimestampEarliest)
	case groups.ResetLatest:
		return s.ends.ListOffset(c, req.Topic, p, protocol.TimestampLatest)
	case groups.ResetTimestamp:
		if req.TimestampMs < 0 {
			return 0, protocol.InvalidRequest.Err("timestamp_ms %d is negative", req.TimestampMs)
		}
		off, err := s.ends.ListOffset(c, req.Topic, p, req.TimestampMs)
		if err == nil && off < 0 { // no record at or after it: the end
			off, err = s.ends.ListOffset(c, req.Topic, p, protocol.TimestampLatest)
		}
		return off, err
	case groups.ResetOffset:
		if req.Offset < 0 {
			return 0, protocol.InvalidRequest.Err("offset %d is negative", req.Offset)
		}
		start, err := s.ends.ListOffset(c, req.Topic, p, protocol.TimestampEarliest)
		if err != nil {
			return 0, err
		}
		end, err := s.ends.ListOffset(c, req.Topic, p, protocol.TimestampLatest)
		if err != nil {
			return 0, err
		}
		return min(max(req.Offset, start), end), nil // as Kafka's tool: clamp into the log's range
	}
	return 0, protocol.InvalidRequest.Err("reset target %q: want earliest, latest, timestamp or offset", req.To)
}

// stampTopicIDs names, in the offsets a client gave without one, the topic
// incarnation this service's metadata knows: an offset a client read from an
// earlier incarnation it still had in its cache keeps the ID it names.
func (s *Server) stampTopicIDs(offs []groups.Offset) {
	var ids map[string]string
	for i := range offs {
		if offs[i].TopicID != "" {
			continue
		}
		if ids == nil {
			ids = s.topicIDs()
		}
		offs[i].TopicID = ids[offs[i].Topic]
	}
}

// topicIDs maps each topic of the latest metadata to its incarnation's ID.
func (s *Server) topicIDs() map[string]string {
	snap := s.ends.Access()
	ids := make(map[string]string, len(snap.Topics))
	for _, t := range snap.Topics {
		ids[t.Name] = t.ID
	}
	return ids
}

// handleJSON decodes a request body into a Req, runs fn and answers its
// result as JSON.
func handleJSON[Req, Resp any](c context.Context, ctx *fasthttp.RequestCtx, fn func(context.Context, Req) (Resp, error)) error {
	var req Req
	if err := decode(ctx, &req); err != nil {
		return err
	}
	resp, err := fn(c, req)
	if err != nil {
		return err
	}
	service.WriteJSON(ctx, http.StatusOK, resp)
	return nil
}

// classic serves the classic protocol's routes (POST .../classic/{op}).
func (s *Server) classic(c context.Context, ctx *fasthttp.RequestCtx, group, op string) error {
	switch op {
	case "join":
		return handleJSON(c, ctx, func(c context.Context, r groups.JoinRequest) (*groups.JoinResponse, error) {
			return s.coord.Join(c, group, r)
		})
	case "sync":
		return handleJSON(c, ctx, func(c context.Context, r groups.SyncRequest) (*groups.SyncResponse, error) {
			return s.coord.Sync(c, group, r)
		})
	case "heartbeat":
		return handleJSON(c, ctx, func(c context.Context, r groups.ClassicHeartbeatRequest) (struct{}, error) {
			return struct{}{}, s.coord.ClassicHeartbeat(c, group, r)
		})
	case "leave":
		return handleJSON(c, ctx, func(c context.Context, r groups.LeaveRequest) (*groups.LeaveResponse, error) {
			return s.coord.Leave(c, group, r)
		})
	}
	return protocol.InvalidRequest.Err("no classic group operation %q", op)
}

func (s *Server) deleteOffsets(c context.Context, ctx *fasthttp.RequestCtx, group string) error {
	return handleJSON(c, ctx, func(c context.Context, r groups.DeleteOffsetsRequest) (struct{}, error) {
		return struct{}{}, s.coord.DeleteOffsets(c, group, r)
	})
}
