// Package api is the metadata service's HTTP API (fasthttp, JSON). Its routes
// and bodies are exactly those of libs/cluster's Client:
//
//	GET    /v1/cluster[?since=V&wait_ms=M][&consistent=true]  cluster.Snapshot
//	POST   /v1/topics            cluster.CreateTopicRequest -> 201 cluster.Topic
//	GET    /v1/topics[?consistent=true]                        {"topics":[...]}
//	GET    /v1/topics/{name}[?consistent=true]                 cluster.Topic
//	DELETE /v1/topics/{name}                                   {}
//	PATCH  /v1/topics/{name}/config  cluster.AlterTopicConfigRequest -> cluster.Topic
//	POST   /v1/topics/{name}/partitions  cluster.AddPartitionsRequest -> cluster.Topic
//	POST   /v1/nodes/register    cluster.RegisterRequest -> cluster.RegisterResponse
//	POST   /v1/nodes/heartbeat   cluster.HeartbeatRequest -> {}
//	POST   /v1/nodes/shutdown    cluster.ShutdownRequest -> cluster.ShutdownResponse
//	POST   /v1/partitions/alter  cluster.AlterPartitionRequest -> cluster.Partition
//	POST   /v1/producers         {} -> cluster.InitProducerIDResponse
//	GET    /v1/topics/{name}/partitions/{p}/remote[?consistent=true]  cluster.RemoteLog
//	POST   /v1/remote/segments   cluster.AddRemoteSegmentRequest -> cluster.RemoteSummary
//	POST   /v1/remote/drop       cluster.DropRemoteSegmentsRequest -> cluster.DropRemoteSegmentsResponse
//	GET    /v1/remote/garbage[?consistent=true]                [cluster.RemoteLog...]
//	POST   /v1/remote/garbage/clear  cluster.ClearRemoteGarbageRequest -> {}
//	POST   /v1/internal/apply    a forwarded fsm.Command -> raftnode.ApplyResponse
//
// Every member answers every route. Writes (topic create/delete, register,
// heartbeat, shutdown, partition alter, topic config, added partitions, producer id,
// remote log changes) run on the Raft leader: another
// member relays the request to the leader's HTTP API unchanged and relays the
// answer back (raftnode.Forward); a relayed request reaching a non-leader gets
// 503 NOT_CONTROLLER, so nothing loops and clients try the next address. Reads are served from the local FSM
// (possibly slightly stale on a follower); with consistent=true they are
// linearizable: the leader answers after VerifyLeader and Barrier, and
// followers relay them. Write answers come from the leader after the entry is
// applied, so they are linearizable too.
//
// GET /v1/cluster with since=V long-polls: it answers as soon as the local
// version exceeds V or after wait_ms (capped at Config.MaxWait), with the
// current snapshot either way.
//
// Every error is a cluster.ErrorBody {error_code, error} with a wire code from
// libs/protocol and an HTTP status: 400 bad input (the reason in the message),
// 404 unknown topic or node (and OFFSET_OUT_OF_RANGE, a remote segment that
// does not continue the remote log), 409 conflicts and stale epochs
// (STALE_BROKER_EPOCH for a node's registration, INVALID_UPDATE_VERSION for
// a partition epoch; a stale leader epoch, FENCED_LEADER_EPOCH, is a
// retriable 503 as everywhere), 413
// body too large, 503 no leader reachable (NOT_CONTROLLER, retriable), 504 timeout, 500
// otherwise. errors.go is the one place internal errors become codes.
package api
