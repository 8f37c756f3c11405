package server

import (
	"context"
	"errors"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// CodeFor maps an internal error to its wire code; this is the one place the
// storage node does so.
func CodeFor(err error) protocol.Code {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return pe.Code
	case errors.Is(err, seglog.ErrCorruptData), errors.Is(err, seglog.ErrDiskFull), errors.Is(err, seglog.ErrFailed): // this node's disk, not the client's bytes
		return protocol.StorageError
	case errors.Is(err, seglog.ErrOffsetOutOfRange):
		return protocol.OffsetOutOfRange
	case errors.Is(err, seglog.ErrBatchTooLarge):
		return protocol.MessageTooLarge
	case errors.Is(err, record.ErrCorrupt), errors.Is(err, record.ErrShortBatch):
		return protocol.CorruptRecord
	case errors.Is(err, seglog.ErrClosed):
		return protocol.NotLeaderOrFollower
	case errors.Is(err, seglog.ErrStaleEpoch):
		return protocol.FencedLeaderEpoch
	case errors.Is(err, seglog.ErrInvalidProducerEpoch):
		return protocol.InvalidProducerEpoch
	case errors.Is(err, seglog.ErrOutOfOrderSequence):
		return protocol.OutOfOrderSequenceNumber
	case errors.Is(err, seglog.ErrDuplicateSequence):
		return protocol.DuplicateSequenceNumber
	case errors.Is(err, seglog.ErrMixedDuplicates):
		return protocol.InvalidRequest
	case errors.Is(err, seglog.ErrInvalidProducerBatch), errors.Is(err, seglog.ErrKeylessRecord), errors.Is(err, seglog.ErrControlBatch):
		return protocol.InvalidRecord
	case errors.Is(err, seglog.ErrInvalidTxnState):
		return protocol.InvalidTxnState
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.RequestTimedOut
	case errors.Is(err, protocol.ErrMalformedFrame):
		return protocol.InvalidRequest
	}
	return protocol.StorageError
}
