package produce

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
)

// TestResendDecisions: which answers the frontend resends a batch after,
// which settle it, and which leave it open when time runs out, as protocol's
// produce outcome table and the frontend's time budget decide.
func TestResendDecisions(t *testing.T) {
	for _, tc := range []struct {
		err                     error
		resend, settles, isOpen bool
	}{
		{protocol.NetworkException.Err("reset"), true, false, true},
		{protocol.NotLeaderOrFollower.Err("moved"), true, false, true},
		{protocol.NotEnoughReplicas.Err("isr"), true, false, true},
		{protocol.StorageError.Err("disk"), true, false, true},
		{protocol.RequestTimedOut.Err("late"), false, false, true}, // no time left
		{protocol.NotEnoughReplicasAfterAppend.Err("isr"), false, false, false},
		{protocol.CorruptRecord.Err("crc"), false, true, false},
		{protocol.DuplicateSequenceNumber.Err("dup"), false, true, false},
		{protocol.UnknownServerError.Err("boom"), false, false, true},
		{protocol.TopicAuthorizationFailed.Err("no"), false, false, false},
		{errors.New("no code"), false, false, true},
	} {
		code := protocol.CodeOf(tc.err)
		if retriable(tc.err) != tc.resend || decisive(tc.err) != tc.settles || openOutcome(code) != tc.isOpen {
			t.Errorf("%v: resend %v settles %v open %v, want %v %v %v", tc.err, retriable(tc.err), decisive(tc.err), openOutcome(code), tc.resend, tc.settles, tc.isOpen)
		}
	}
}
