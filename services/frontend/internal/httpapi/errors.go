package httpapi

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
)

// wireError is err as the frontend answers it: an error with a wire code
// (from the admin client, the producer, or relayed from metadata or offsets
// with the status they answered) as it is, a timeout as REQUEST_TIMED_OUT.
// The rest carry no code: transport errors of cluster.Client,
// produce.ErrMetadataUnavailable, metacache.ErrNoSnapshot and ErrStopped,
// cluster.ErrNoAddress. All mean the metadata service cannot be reached from
// here (NETWORK_EXCEPTION); another frontend may do better.
func wireError(err error) error {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.RequestTimedOut.Err("%v", err)
	}
	return protocol.NetworkException.Err("%v", err)
}

// writeErr answers with the status and JSON body of err; the message is err's
// whole text.
func writeErr(ctx *fasthttp.RequestCtx, err error) {
	werr := wireError(err)
	service.WriteStatus(ctx, protocol.HTTPStatusOf(werr), protocol.CodeOf(werr), err.Error())
}
