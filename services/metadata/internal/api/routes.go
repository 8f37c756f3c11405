package api

import (
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// What the principal of a request needs (authorization on):
//
//   - reading the model, the topics, a topic and a partition's remote log:
//     any principal (the model without token hashes, and without principals
//     and ACLs unless admin);
//   - a producer id: a produce ACL on some topic;
//   - node and frontend registration, heartbeats and shutdown, ISR changes,
//     leadership resignation, remote log changes, the remote garbage and Raft
//     relays: the cluster's services alone;
//   - creating or deleting a topic, adding partitions to it, changing its
//     configs: an admin, or a create, delete, alter or alter_configs ACL
//     covering it;
//   - cluster changes: an admin, or a cluster ACL allowing alter (reassignments,
//     decommissions, leader elections, ACLs) or alter_configs (cluster
//     settings, quotas);
//   - principals (which may be made admins): an admin.
//
// needCreate is creating a topic's need: an admin, or a create ACL on it.
func needCreate(ctx *fasthttp.RequestCtx, _ service.Params) cluster.Need {
	return cluster.CreateTopicNeed(ctx.PostBody())
}

// onCluster is the need of op on the cluster: an admin, or a cluster ACL
// allowing it.
func onCluster(op string) cluster.Need { return cluster.Need{Cluster: op} }

var (
	needRead    = cluster.Need{Read: true}
	needAdmin   = cluster.Need{Admin: true}
	needService = cluster.Need{Service: true}
)

// newRoutes is the metadata API's route table. Changes run on the Raft
// leader; reads are answered by any member from its own state.
func (s *Server) newRoutes() *service.Router {
	// onPartition parses the {topic} and {partition} of a route's path.
	onPartition := func(h func(*fasthttp.RequestCtx, string, int32)) func(*fasthttp.RequestCtx, service.Params) {
		return func(ctx *fasthttp.RequestCtx, p service.Params) {
			id, err := strconv.ParseInt(p.Get("partition"), 10, 32)
			if err != nil || id < 0 {
				writeError(ctx, bad(protocol.UnknownTopicOrPartition, "partition %q of topic %q is not a partition number", p.Get("partition"), p.Get("topic")))
				return
			}
			h(ctx, p.Get("topic"), int32(id))
		}
	}
	decommission := func(on bool) func(*fasthttp.RequestCtx, service.Params) {
		return func(ctx *fasthttp.RequestCtx, p service.Params) {
			id, err := parseNodeID(p.Get("node"))
			if err != nil {
				writeError(ctx, err)
				return
			}
			s.decommission(ctx, id, on)
		}
	}
	const (
		get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
	)
	return service.NewRouter(
		service.Route{Method: get, Pattern: "/v1/cluster", Need: needRead, Handle: service.Plain(s.getCluster)},
		service.Route{Method: put, Pattern: "/v1/cluster/config", Leader: true, Need: onCluster(cluster.OpAlterConfigs), Handle: service.Plain(s.setClusterConfig)},
		service.Route{Method: get, Pattern: "/v1/topics", Need: needRead, Handle: service.Plain(s.listTopics)},
		service.Route{Method: post, Pattern: "/v1/topics", Leader: true, NeedOf: needCreate, Handle: service.Plain(s.createTopic)},
		service.Route{Method: get, Pattern: "/v1/topics/{topic}", Need: needRead, Handle: service.Named("topic", s.describeTopic)},
		service.Route{Method: del, Pattern: "/v1/topics/{topic}", Leader: true, NeedOf: service.OnTopic(cluster.OpDelete), Handle: service.Named("topic", s.deleteTopic)},
		service.Route{Method: patch, Pattern: "/v1/topics/{topic}/config", Leader: true, NeedOf: service.OnTopic(cluster.OpAlterConfigs),
			Handle: service.Named("topic", s.alterTopicConfig)},
		service.Route{Method: post, Pattern: "/v1/topics/{topic}/partitions", Leader: true, NeedOf: service.OnTopic(cluster.OpAlter),
			Handle: service.Named("topic", s.addPartitions)},
		service.Route{Method: post, Pattern: "/v1/topics/{topic}/partitions/{partition}/reassignment", Leader: true, Need: onCluster(cluster.OpAlter),
			Handle: onPartition(s.reassignPartition)},
		service.Route{Method: del, Pattern: "/v1/topics/{topic}/partitions/{partition}/reassignment", Leader: true, Need: onCluster(cluster.OpAlter),
			Handle: onPartition(s.cancelReassignment)},
		service.Route{Method: get, Pattern: "/v1/topics/{topic}/partitions/{partition}/remote", Need: needRead, Handle: onPartition(s.remoteLog)},
		service.Route{Method: post, Pattern: "/v1/nodes/{node}/decommission", Leader: true, Need: onCluster(cluster.OpAlter), Handle: decommission(true)},
		service.Route{Method: del, Pattern: "/v1/nodes/{node}/decommission", Leader: true, Need: onCluster(cluster.OpAlter), Handle: decommission(false)},
		service.Route{Method: post, Pattern: "/v1/nodes/register", Leader: true, Need: needService, Handle: service.Plain(s.register)},
		service.Route{Method: post, Pattern: "/v1/nodes/heartbeat", Leader: true, Need: needService, Handle: service.Plain(s.heartbeat)},
		service.Route{Method: post, Pattern: "/v1/nodes/shutdown", Leader: true, Need: needService, Handle: service.Plain(s.shutdown)},
		service.Route{Method: post, Pattern: "/v1/frontends/register", Leader: true, Need: needService, Handle: service.Plain(s.registerFrontend)},
		service.Route{Method: post, Pattern: "/v1/frontends/heartbeat", Leader: true, Need: needService, Handle: service.Plain(s.frontendHeartbeat)},
		service.Route{Method: put, Pattern: "/v1/principals", Leader: true, Need: needAdmin, Handle: service.Plain(s.setPrincipal)},
		service.Route{Method: put, Pattern: "/v1/acls", Leader: true, Need: onCluster(cluster.OpAlter), Handle: service.Plain(s.setACL)},
		service.Route{Method: put, Pattern: "/v1/quotas", Leader: true, Need: onCluster(cluster.OpAlterConfigs), Handle: service.Plain(s.setQuota)},
		service.Route{Method: post, Pattern: "/v1/producers", Leader: true, Need: cluster.Need{Op: cluster.OpProduce}, Handle: service.Plain(s.initProducerID)},
		service.Route{Method: post, Pattern: "/v1/partitions/elect", Leader: true, Need: onCluster(cluster.OpAlter), Handle: service.Plain(s.electLeaders)},
		service.Route{Method: post, Pattern: "/v1/partitions/resign", Leader: true, Need: needService, Handle: service.Plain(s.resignLeadership)},
		service.Route{Method: post, Pattern: "/v1/partitions/alter", Leader: true, Need: needService, Handle: service.Plain(s.alterPartition)},
		service.Route{Method: post, Pattern: "/v1/remote/segments", Leader: true, Need: needService, Handle: service.Plain(s.addRemoteSegment)},
		service.Route{Method: post, Pattern: "/v1/remote/drop", Leader: true, Need: needService, Handle: service.Plain(s.dropRemoteSegments)},
		service.Route{Method: get, Pattern: "/v1/remote/garbage", Need: needService, Handle: service.Plain(s.remoteGarbage)},
		service.Route{Method: post, Pattern: "/v1/remote/garbage/clear", Leader: true, Need: needService, Handle: service.Plain(s.clearRemoteGarbage)},
		// A follower's proposal relayed to the leader: applyForwarded
		// refuses it when this member is no longer the leader.
		service.Route{Method: post, Pattern: raftnode.ApplyPath, Need: needService, Handle: service.Plain(s.applyForwarded)},
	)
}
