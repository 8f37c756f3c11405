package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/controller"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/placement"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// errBodyTooLarge is reported by fasthttp's error handler.
var errBodyTooLarge = errors.New("request body is too large")

// mapping is the one table from internal errors to HTTP status and wire code.
// The first match wins.
var mapping = []struct {
	err    error
	status int
	code   protocol.Code
}{
	{fsm.ErrTopicExists, http.StatusConflict, protocol.TopicAlreadyExists},
	{fsm.ErrUnknownTopic, http.StatusNotFound, protocol.UnknownTopicOrPartition},
	{fsm.ErrUnknownPartition, http.StatusNotFound, protocol.UnknownTopicOrPartition},
	{fsm.ErrInvalidTopic, http.StatusBadRequest, protocol.InvalidTopic},
	{fsm.ErrInvalidConfig, http.StatusBadRequest, protocol.InvalidConfig},
	{fsm.ErrStalePartitionCount, http.StatusConflict, protocol.InvalidPartitions},
	{fsm.ErrMalformedCommand, http.StatusBadRequest, protocol.InvalidRequest},
	{fsm.ErrUnknownNode, http.StatusNotFound, protocol.UnknownNode},
	{fsm.ErrStaleNodeEpoch, http.StatusConflict, protocol.StaleBrokerEpoch},
	{fsm.ErrFencedLeaderEpoch, http.StatusConflict, protocol.FencedLeaderEpoch},
	{fsm.ErrStalePartitionEpoch, http.StatusConflict, protocol.InvalidUpdateVersion},
	{fsm.ErrInvalidPartitionState, http.StatusBadRequest, protocol.InvalidRequest},
	// Kafka answers INVALID_REQUEST when AlterPartition comes from a node that
	// is not the leader at the current leader epoch, and INELIGIBLE_REPLICA
	// when it adds a fenced or shutting-down node (INVALID_REQUEST here).
	{fsm.ErrNotPartitionLeader, http.StatusBadRequest, protocol.InvalidRequest},
	{fsm.ErrIneligibleReplica, http.StatusBadRequest, protocol.InvalidRequest},
	{fsm.ErrInvalidReassignment, http.StatusBadRequest, protocol.InvalidReplicaAssignment},
	{fsm.ErrReassignmentInProgress, http.StatusConflict, protocol.ReassignmentInProgress},
	{fsm.ErrNoReassignmentInProgress, http.StatusConflict, protocol.NoReassignmentInProgress},
	{fsm.ErrReassignmentNotReady, http.StatusConflict, protocol.LeaderNotAvailable},
	{fsm.ErrInvalidQuota, http.StatusBadRequest, protocol.InvalidRequest},
	{fsm.ErrInvalidPrincipal, http.StatusBadRequest, protocol.InvalidRequest},
	{fsm.ErrUnknownPrincipal, http.StatusNotFound, protocol.InvalidRequest},
	{fsm.ErrProducerIDsExhausted, http.StatusInternalServerError, protocol.UnknownServerError},
	{placement.ErrNotEnoughNodes, http.StatusBadRequest, protocol.InvalidReplicationFactor},
	{placement.ErrInvalidRequest, http.StatusBadRequest, protocol.InvalidPartitions},
	{controller.ErrUnknownNode, http.StatusNotFound, protocol.UnknownNode},
	{controller.ErrFencedEpoch, http.StatusConflict, protocol.StaleBrokerEpoch},
	{controller.ErrUnknownFrontend, http.StatusConflict, protocol.StaleBrokerEpoch},
	{controller.ErrNoOtherLeader, http.StatusConflict, protocol.LeaderNotAvailable},
	{controller.ErrNotActive, http.StatusServiceUnavailable, protocol.NotController},
	{raftnode.ErrNotLeader, http.StatusServiceUnavailable, protocol.NotController},
	{raftnode.ErrNoLeader, http.StatusServiceUnavailable, protocol.NotController},
	{raftnode.ErrLeaderAddressUnknown, http.StatusServiceUnavailable, protocol.NotController},
	{raftnode.ErrForward, http.StatusServiceUnavailable, protocol.NotController},
	{raftnode.ErrNotStarted, http.StatusServiceUnavailable, protocol.NotController},
	{raftnode.ErrTimeout, http.StatusGatewayTimeout, protocol.RequestTimedOut},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, protocol.RequestTimedOut},
	{errBodyTooLarge, http.StatusRequestEntityTooLarge, protocol.InvalidRequest},
}

// classify returns the HTTP status and wire code of err.
func classify(err error) (int, protocol.Code) {
	for _, m := range mapping {
		if errors.Is(err, m.err) {
			return m.status, m.code
		}
	}
	var pe *protocol.Error
	if errors.As(err, &pe) { // request validation, or an answer relayed from the leader
		return statusOf(pe.Code), pe.Code
	}
	return http.StatusInternalServerError, protocol.UnknownServerError
}

// statusOf is the HTTP status of a bare wire code.
func statusOf(c protocol.Code) int {
	switch c {
	case protocol.UnknownTopicOrPartition, protocol.UnknownNode:
		return http.StatusNotFound
	case protocol.TopicAlreadyExists, protocol.FencedLeaderEpoch, protocol.StaleBrokerEpoch, protocol.InvalidUpdateVersion:
		return http.StatusConflict
	case protocol.NotController:
		return http.StatusServiceUnavailable
	case protocol.TopicAuthorizationFailed, protocol.GroupAuthorizationFailed, protocol.ClusterAuthorizationFailed:
		return http.StatusForbidden
	case protocol.RequestTimedOut:
		return http.StatusGatewayTimeout
	case protocol.InvalidTopic, protocol.InvalidPartitions, protocol.InvalidReplicationFactor,
		protocol.InvalidConfig, protocol.InvalidRequest, protocol.PolicyViolation:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// errorBody is err as the wire's ErrorBody.
func errorBody(err error) (int, cluster.ErrorBody) {
	status, code := classify(err)
	return status, cluster.ErrorBody{ErrorCode: int16(code), Error: protocol.MessageOf(err)}
}

func errorBodyOf(code protocol.Code, msg string) cluster.ErrorBody {
	return cluster.ErrorBody{ErrorCode: int16(code), Error: msg}
}

func writeError(ctx *fasthttp.RequestCtx, err error) {
	status, body := errorBody(err)
	writeJSON(ctx, status, body)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(cluster.ErrorBody{ErrorCode: int16(protocol.UnknownServerError), Error: "encoding the answer: " + err.Error()})
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// bad builds a 400-class validation error with a wire code.
func bad(code protocol.Code, format string, args ...any) error { return code.Err(format, args...) }
