package replica

import (
	"github.com/sluicemq/sluice/libs/protocol"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// ConsumerView is what a consumer fetch at an isolation level may read of
// the partition: below Bound, which is the high watermark for
// read_uncommitted and the last stable offset for read_committed.
type ConsumerView struct {
	HighWatermark    int64
	LastStableOffset int64
	Bound            int64
	Committed        bool
}

// ConsumerView returns the partition's view for a consumer at isolation
// (protocol.ReadUncommitted or protocol.ReadCommitted). The one place the
// storage protocol and the Kafka listener take it from.
func (r *Replica) ConsumerView(isolation int8) ConsumerView {
	hw := r.HighWatermark()
	v := ConsumerView{HighWatermark: hw, LastStableOffset: min(hw, r.Log.LastStableOffset()), Bound: hw}
	if isolation == protocol.ReadCommitted {
		v.Bound, v.Committed = v.LastStableOffset, true
	}
	return v
}

// Aborted returns, for a read_committed fetch at offset that read sl, the
// aborted transactions with records in it (nil for read_uncommitted or an
// empty read). Where the end of sl cannot be read, the view's bound stands
// in for it (more transactions than needed; readers skip the extra ones).
func (v ConsumerView) Aborted(l *seglog.Log, offset int64, sl seglog.Slice) []protocol.AbortedTxn {
	if !v.Committed || sl.Size() == 0 {
		return nil
	}
	end, err := sl.NextOffset()
	if err != nil || end > v.Bound {
		end = v.Bound
	}
	txns := l.AbortedTxns(offset, end-1)
	if len(txns) == 0 {
		return nil
	}
	out := make([]protocol.AbortedTxn, len(txns))
	for i, a := range txns {
		out[i] = protocol.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
	}
	return out
}
