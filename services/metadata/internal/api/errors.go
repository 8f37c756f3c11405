package api

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/controller"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
	"github.com/sluicemq/sluice/services/metadata/internal/placement"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// mapping is the one table from this service's internal errors to wire
// codes; the HTTP status is the code's (protocol's table). The first match
// wins.
var mapping = []struct {
	err  error
	code protocol.Code
}{
	{fsm.ErrTopicExists, protocol.TopicAlreadyExists},
	{fsm.ErrUnknownTopic, protocol.UnknownTopicOrPartition},
	{fsm.ErrUnknownPartition, protocol.UnknownTopicOrPartition},
	{fsm.ErrInvalidTopic, protocol.InvalidTopic},
	{fsm.ErrInvalidConfig, protocol.InvalidConfig},
	{fsm.ErrStalePartitionCount, protocol.InvalidPartitions},
	{fsm.ErrMalformedCommand, protocol.InvalidRequest},
	{fsm.ErrUnknownNode, protocol.UnknownNode},
	{fsm.ErrStaleNodeEpoch, protocol.StaleBrokerEpoch},
	{fsm.ErrFencedLeaderEpoch, protocol.FencedLeaderEpoch},
	{fsm.ErrStalePartitionEpoch, protocol.InvalidUpdateVersion},
	{fsm.ErrInvalidPartitionState, protocol.InvalidRequest},
	// Kafka answers INVALID_REQUEST when AlterPartition comes from a node that
	// is not the leader at the current leader epoch, and INELIGIBLE_REPLICA
	// when it adds a fenced or shutting-down node (INVALID_REQUEST here).
	{fsm.ErrNotPartitionLeader, protocol.InvalidRequest},
	{fsm.ErrIneligibleReplica, protocol.InvalidRequest},
	// A segment that does not start at the remote log's end: the uploader
	// must read the remote log again and carry on from its end. Kafka has no
	// code of its own for this; OFFSET_OUT_OF_RANGE ("outside the range the
	// partition holds") says what happened, is not retriable as it is, and
	// keeps the case apart from INVALID_REQUEST, which a malformed segment
	// (fsm.ErrInvalidRemoteSegment, a malformed command) and a request from
	// a node that does not lead answer: those are bugs or lost leadership,
	// not a position to re-read.
	{fsm.ErrRemoteLogGap, protocol.OffsetOutOfRange},
	{fsm.ErrInvalidReassignment, protocol.InvalidReplicaAssignment},
	{fsm.ErrReassignmentInProgress, protocol.ReassignmentInProgress},
	{fsm.ErrNoReassignmentInProgress, protocol.NoReassignmentInProgress},
	{fsm.ErrReassignmentNotReady, protocol.LeaderNotAvailable},
	{fsm.ErrInvalidQuota, protocol.InvalidRequest},
	{fsm.ErrInvalidPrincipal, protocol.InvalidRequest},
	{fsm.ErrUnknownPrincipal, protocol.ResourceNotFound},
	{fsm.ErrProducerIDsExhausted, protocol.UnknownServerError},
	{placement.ErrNotEnoughNodes, protocol.InvalidReplicationFactor},
	{placement.ErrInvalidRequest, protocol.InvalidPartitions},
	{controller.ErrUnknownNode, protocol.UnknownNode},
	{controller.ErrFencedEpoch, protocol.StaleBrokerEpoch},
	{controller.ErrUnknownFrontend, protocol.StaleBrokerEpoch},
	{controller.ErrNoOtherLeader, protocol.LeaderNotAvailable},
	{controller.ErrNotActive, protocol.NotController},
	{raftnode.ErrNotLeader, protocol.NotController},
	{raftnode.ErrNoLeader, protocol.NotController},
	{raftnode.ErrLeaderAddressUnknown, protocol.NotController},
	{raftnode.ErrForward, protocol.NotController},
	{raftnode.ErrNotStarted, protocol.NotController},
	{raftnode.ErrTimeout, protocol.RequestTimedOut},
	{context.DeadlineExceeded, protocol.RequestTimedOut},
}

// wireError is err with the wire code of its first match in mapping; an
// error that carries a code (request validation, an answer relayed from the
// leader) or matches nothing is returned as it is.
func wireError(err error) error {
	for _, m := range mapping {
		if errors.Is(err, m.err) {
			return &protocol.Error{Code: m.code, Message: err.Error()}
		}
	}
	return err
}

// errorBody is err as the wire's ErrorBody.
func errorBody(err error) cluster.ErrorBody {
	err = wireError(err)
	return cluster.ErrorBody{ErrorCode: int16(protocol.CodeOf(err)), Error: protocol.MessageOf(err)}
}

func writeError(ctx *fasthttp.RequestCtx, err error) { service.WriteError(ctx, wireError(err)) }

// bad builds a 400-class validation error with a wire code.
func bad(code protocol.Code, format string, args ...any) error { return code.Err(format, args...) }
