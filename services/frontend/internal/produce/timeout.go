package produce

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
)

// ErrTimedOut is returned, together with the results, by Produce and
// ProduceBatches when the request's timeout (Config.Timeout) passed before
// every partition answered (HTTP 504, REQUEST_TIMED_OUT). Acknowledged
// records and batches keep their offsets; the others carry REQUEST_TIMED_OUT
// saying whether their outcome is unknown or they were never sent.
var ErrTimedOut = protocol.RequestTimedOut.Err("produce request timed out")

// timedOut returns ErrTimedOut for a request some of whose records have an
// unknown outcome: their leader did not answer within the timeout, or an
// attempt that got no answer was followed by a refusal.
func (p *Producer) timedOut() error {
	return fmt.Errorf("%w: not every record's outcome was known within %v (-produce-timeout); results say which records were acknowledged", ErrTimedOut, p.cfg.Timeout)
}

// settle returns the error to report for a batch of partition part whose
// last attempt failed with err. A REQUEST_TIMED_OUT from the leader means the
// request's own time ran out there (the storage request carries what remains
// of it), so it and, once the deadline has passed, every error that leaves
// the outcome open (a lost connection, a leader change, an unanswered call)
// become REQUEST_TIMED_OUT saying the outcome is unknown. Definite answers
// (CORRUPT_RECORD, MESSAGE_TOO_LARGE, NOT_ENOUGH_REPLICAS_AFTER_APPEND ...)
// are kept.
func (p *Producer) settle(ctx context.Context, part int32, err error) error {
	var uo unknownOutcome
	if err == nil || errors.As(err, &uo) {
		return err
	}
	code := protocol.CodeOf(err)
	expired := errors.Is(ctx.Err(), context.DeadlineExceeded)
	if code != protocol.RequestTimedOut && !(expired && openOutcome(code)) {
		return err
	}
	return protocol.RequestTimedOut.Err("outcome unknown: the leader of partition %d did not acknowledge within %v (-produce-timeout); last error: %v",
		part, p.cfg.Timeout, err)
}

// openOutcome reports whether a failed attempt with code may still have
// appended the batch, or failed only for want of time (protocol's produce
// outcome table).
func openOutcome(code protocol.Code) bool { return code.Open() }

// storageTimeoutMs is the timeout a storage request carries: what remains of
// ctx, less a margin, so that a leader waiting on replicas answers
// REQUEST_TIMED_OUT just before the frontend stops waiting. Otherwise the
// frontend would give up first and drop the pooled connection the call was
// on (storageclient does so on a deadline), failing the other requests
// sharing it.
func storageTimeoutMs(ctx context.Context, whole time.Duration) int32 {
	left := whole
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	left -= min(left/10, 500*time.Millisecond)
	return int32(max(left/time.Millisecond, 1))
}

// unknownOutcome is a REQUEST_TIMED_OUT that already says why the outcome is
// unknown (sendWithRetry): settle keeps its words.
type unknownOutcome struct{ err error }

func (u unknownOutcome) Error() string { return u.err.Error() }
func (u unknownOutcome) Unwrap() error { return u.err }
