package api

import (
	"context"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/txns"
)

// The transaction coordinator's routes (package libs/txns):
//
//	POST /v1/txns/{id}/init        start a producer session
//	POST /v1/txns/{id}/partitions  add partitions (or verify them)
//	POST /v1/txns/{id}/groups      add a consumer group
//	POST /v1/txns/{id}/offsets     a group's offsets within the transaction
//	POST /v1/txns/{id}/end         commit or abort
//	GET  /v1/txns/{id}             describe
//	GET  /v1/txns[?state=S...]     list

// errNoTxns answers the routes of a server built without a transaction
// coordinator.
var errNoTxns = protocol.CoordinatorNotAvailable.Err("this offsets replica runs no transaction coordinator")

// txnOp serves one POST route of a transactional id (postOp), on a server
// with a transaction coordinator.
func txnOp[In any](s *Server, op func(c context.Context, id string, req In) (any, error)) routeHandler {
	return postOp("txn", func(c context.Context, id string, req In) (any, error) {
		if s.txns == nil {
			return nil, errNoTxns
		}
		return op(c, id, req)
	})
}

func (s *Server) txnRoutes(route func(method, pattern string, h routeHandler) service.Route) []service.Route {
	none := func(err error) (any, error) { return nil, err }
	return []service.Route{
		route(http.MethodPost, "/v1/txns/{txn}/init", txnOp(s, func(c context.Context, id string, req txns.InitRequest) (any, error) {
			return s.txns.Init(c, id, req)
		})),
		route(http.MethodPost, "/v1/txns/{txn}/partitions", txnOp(s, func(c context.Context, id string, req txns.AddPartitionsRequest) (any, error) {
			return none(s.txns.AddPartitions(c, id, req))
		})),
		route(http.MethodPost, "/v1/txns/{txn}/groups", txnOp(s, func(c context.Context, id string, req txns.AddGroupRequest) (any, error) {
			return none(s.txns.AddGroup(c, id, req))
		})),
		route(http.MethodPost, "/v1/txns/{txn}/offsets", txnOp(s, func(c context.Context, id string, req txns.CommitOffsetsRequest) (any, error) {
			s.stampTopicIDs(req.Offsets)
			return none(s.txns.CommitOffsets(c, id, req))
		})),
		route(http.MethodPost, "/v1/txns/{txn}/end", txnOp(s, func(c context.Context, id string, req txns.EndRequest) (any, error) {
			return s.txns.End(c, id, req)
		})),
		route(http.MethodGet, "/v1/txns/{txn}", func(c context.Context, ctx *fasthttp.RequestCtx, p service.Params) error {
			if s.txns == nil {
				return errNoTxns
			}
			if err := s.node.Linearize(c); err != nil {
				return protocol.NotCoordinator.Err("%v", err)
			}
			d, err := s.txns.Describe(p.Get("txn"))
			if err != nil {
				return err
			}
			service.WriteJSON(ctx, http.StatusOK, d)
			return nil
		}),
		route(http.MethodGet, "/v1/txns", func(c context.Context, ctx *fasthttp.RequestCtx, _ service.Params) error {
			if s.txns == nil {
				return errNoTxns
			}
			if err := s.node.Linearize(c); err != nil {
				return protocol.NotCoordinator.Err("%v", err)
			}
			var states []string
			for _, v := range ctx.QueryArgs().PeekMulti("state") {
				states = append(states, string(v))
			}
			list, err := s.txns.List(states)
			if err != nil {
				return err
			}
			sees := s.shows(ctx, func(access *cluster.Snapshot, p *cluster.Principal, id string) bool {
				return access.DescribesResource(p, cluster.ResourceTransactionalID, id)
			})
			out := txns.ListResponse{Transactions: []txns.Description{}}
			for _, d := range list {
				if sees(d.ID) {
					out.Transactions = append(out.Transactions, d)
				}
			}
			service.WriteJSON(ctx, http.StatusOK, out)
			return nil
		}),
	}
}
