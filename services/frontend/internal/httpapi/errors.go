package httpapi

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// statusOf maps a wire error code to the HTTP status of the frontend's
// answers. This is the one place where codes become statuses.
func statusOf(c protocol.Code) int {
	switch c {
	case protocol.None:
		return fasthttp.StatusOK
	case protocol.UnknownTopicOrPartition, protocol.OffsetOutOfRange:
		// OFFSET_OUT_OF_RANGE: nothing is at that offset (any more, or
		// yet); the message names the partition's range.
		return fasthttp.StatusNotFound
	case protocol.TopicAlreadyExists:
		return fasthttp.StatusConflict
	case protocol.InvalidTopic, protocol.InvalidPartitions, protocol.InvalidReplicationFactor,
		protocol.InvalidConfig, protocol.InvalidRequest, protocol.InvalidRequiredAcks,
		protocol.InvalidTimestamp, protocol.InvalidRecord, protocol.PolicyViolation,
		protocol.CorruptRecord, protocol.UnsupportedVersion, protocol.InvalidFetchSize:
		return fasthttp.StatusBadRequest
	case protocol.MessageTooLarge, protocol.RecordListTooLarge:
		return fasthttp.StatusRequestEntityTooLarge
	case protocol.ThrottlingQuotaExceeded:
		return fasthttp.StatusTooManyRequests
	case protocol.RequestTimedOut:
		return fasthttp.StatusGatewayTimeout
	case protocol.NotController, protocol.LeaderNotAvailable, protocol.BrokerNotAvailable,
		protocol.NetworkException, protocol.NotEnoughReplicas, protocol.NotLeaderOrFollower,
		protocol.FencedLeaderEpoch, protocol.UnknownLeaderEpoch:
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusInternalServerError
}

// classify returns the wire code and HTTP status of an error from the admin
// client, the producer or the cache. An error without a code is the metadata
// service (or the frontend's view of it) being unreachable, or a timeout.
func classify(err error) (protocol.Code, int) {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return pe.Code, statusOf(pe.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.RequestTimedOut, fasthttp.StatusGatewayTimeout
	}
	// The rest carry no code: transport errors of cluster.Client,
	// produce.ErrMetadataUnavailable, metacache.ErrNoSnapshot and ErrStopped,
	// cluster.ErrNoAddress. All mean the metadata service cannot be reached
	// from here; another frontend may do better.
	return protocol.NetworkException, fasthttp.StatusServiceUnavailable
}

// writeErr answers with the status and JSON body of err.
func writeErr(ctx *fasthttp.RequestCtx, err error) {
	code, status := classify(err)
	writeError(ctx, status, code, err.Error())
}

// writeError answers with the JSON error body every Sluice HTTP API uses.
func writeError(ctx *fasthttp.RequestCtx, status int, code protocol.Code, msg string) {
	writeJSON(ctx, status, cluster.ErrorBody{ErrorCode: int16(code), Error: msg})
}

// writeJSON answers with v encoded as JSON.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = fasthttp.StatusInternalServerError
		b, _ = json.Marshal(cluster.ErrorBody{ErrorCode: int16(protocol.UnknownServerError), Error: "encoding the answer: " + err.Error()})
	}
	ctx.Response.ResetBody()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
