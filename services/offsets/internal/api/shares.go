package api

import (
	"context"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// The share groups' routes (package libs/shares):
//
//	GET    /v1/share-groups                      list
//	GET    /v1/share-groups/{group}              describe
//	DELETE /v1/share-groups/{group}              delete
//	POST   /v1/share-groups/{group}/acquire      acquire records
//	POST   /v1/share-groups/{group}/acks         acknowledge records
//	POST   /v1/share-groups/{group}/leave        release a consumer's records
//	POST   /v1/share-groups/{group}/config       set configuration values
//	POST   /v1/share-groups/{group}/reset-offsets
//	POST   /v1/share-groups/{group}/delete-offsets

func (s *Server) shareRoutes(route func(method, pattern string, h routeHandler) service.Route) []service.Route {
	sh := s.shares
	none := func(err error) (any, error) { return nil, err }
	return []service.Route{
		route(http.MethodPost, "/v1/share-groups/{group}/acquire", postOp("group", func(c context.Context, g string, req shares.AcquireRequest) (any, error) {
			return sh.Acquire(c, g, req)
		})),
		route(http.MethodPost, "/v1/share-groups/{group}/acks", postOp("group", func(c context.Context, g string, req shares.AckRequest) (any, error) {
			return sh.Ack(c, g, req)
		})),
		route(http.MethodPost, "/v1/share-groups/{group}/leave", postOp("group", func(c context.Context, g string, req shares.LeaveRequest) (any, error) {
			return none(sh.Leave(c, g, req.MemberID))
		})),
		route(http.MethodPost, "/v1/share-groups/{group}/config", postOp("group", func(c context.Context, g string, req shares.ConfigRequest) (any, error) {
			return none(sh.Configure(c, g, req.Set))
		})),
		route(http.MethodPost, "/v1/share-groups/{group}/reset-offsets", postOp("group", func(c context.Context, g string, req shares.ResetRequest) (any, error) {
			offs, err := s.resetTargets(c, req)
			if err != nil {
				return nil, err
			}
			reset := sharefsm.Reset{Topic: req.Topic}
			out := groups.ResetResponse{Offsets: []groups.Committed{}}
			for _, o := range offs {
				reset.Partitions = append(reset.Partitions, shares.PartitionReset{Partition: o.Partition, Offset: o.Offset})
				out.Offsets = append(out.Offsets, groups.Committed{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
			}
			if !req.DryRun {
				if err := sh.Reset(c, g, reset); err != nil {
					return nil, err
				}
			}
			return out, nil
		})),
		route(http.MethodPost, "/v1/share-groups/{group}/delete-offsets", postOp("group", func(c context.Context, g string, req shares.DeleteOffsetsRequest) (any, error) {
			return none(sh.Reset(c, g, sharefsm.Reset{Topic: req.Topic, Drop: true}))
		})),
		route(http.MethodDelete, "/v1/share-groups/{group}", func(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error {
			if err := sh.Delete(c, p.Get("group")); err != nil {
				return err
			}
			service.WriteJSON(ctx, http.StatusOK, struct{}{})
			return nil
		}),
		route(http.MethodGet, "/v1/share-groups/{group}", func(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error {
			if err := s.node.Linearize(c); err != nil {
				return protocol.NotCoordinator.Err("%v", err)
			}
			d, err := sh.Describe(c, p.Get("group"))
			if err != nil {
				return err
			}
			service.WriteJSON(ctx, http.StatusOK, d)
			return nil
		}),
		route(http.MethodGet, "/v1/share-groups", func(c context.Context, ctx *fasthttp.RequestCtx, _ service.Params) error {
			if err := s.node.Linearize(c); err != nil {
				return protocol.NotCoordinator.Err("%v", err)
			}
			sees := s.shows(ctx, (*cluster.Snapshot).ListsGroup)
			out := shares.ListResponse{Groups: []shares.Listing{}}
			for _, l := range sh.List() {
				if sees(l.Group) {
					out.Groups = append(out.Groups, l)
				}
			}
			service.WriteJSON(ctx, http.StatusOK, out)
			return nil
		}),
	}
}
