package server

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// TestCodeFor: log errors reach the wire as the codes Kafka clients know,
// however wrapped.
func TestCodeFor(t *testing.T) {
	for err, want := range map[error]protocol.Code{
		seglog.ErrControlBatch:         protocol.InvalidRecord,
		seglog.ErrInvalidTxnState:      protocol.InvalidTxnState,
		seglog.ErrKeylessRecord:        protocol.InvalidRecord,
		seglog.ErrInvalidProducerBatch: protocol.InvalidRecord,
		seglog.ErrInvalidProducerEpoch: protocol.InvalidProducerEpoch,
		seglog.ErrOutOfOrderSequence:   protocol.OutOfOrderSequenceNumber,
		seglog.ErrStaleEpoch:           protocol.FencedLeaderEpoch,
		seglog.ErrOffsetOutOfRange:     protocol.OffsetOutOfRange,
	} {
		if got := CodeFor(fmt.Errorf("partition t-0: %w", err)); got != want {
			t.Errorf("CodeFor(%v) = %v, want %v", err, got, want)
		}
	}
}
