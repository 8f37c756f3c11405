package log

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/libs/record"
)

// OffsetForTimestamp returns the first offset whose record timestamp is >= ts,
// with that record's timestamp (Kafka's ListOffsets by time), or -1, -1 when
// no record is that recent.
//
// The time index gives the first batch whose max timestamp reaches ts without
// any scan (entries are kept for every batch that raises the segment's max).
// That batch's records are then decoded with record.Iterator (decompressing if
// needed) to find the first record at or after ts. Timestamps need not grow
// inside a batch or across batches; the answer is the first record in offset
// order within the first batch that reaches ts, as in Kafka.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return -1, -1, ErrClosed
	}
	var v segView
	var rel uint32
	found := false
	for _, s := range l.segs {
		if n := len(s.times); n > 0 && s.times[n-1].ts >= ts {
			rel = s.times[firstTimeAtOrAfter(s.times, ts)].rel
			v, found = l.viewLocked(s), true
			break
		}
	}
	l.mu.RUnlock()
	if !found {
		return -1, -1, nil
	}
	defer v.seg.release()

	base := v.seg.base + int64(rel)
	sc := getScanner(v.seg.log, v.size)
	defer putScanner(sc)
	pos, _, err := v.find(sc, base, func(h record.Header) bool {
		return h.BaseOffset >= base
	})
	if err != nil {
		if errors.Is(err, errNotFound) {
			err = fmt.Errorf("%w: time index names offset %d, not in segment %d", record.ErrCorrupt, base, v.seg.base)
		}
		return -1, -1, err
	}
	_, batch, err := sc.batch(pos)
	if err != nil {
		return -1, -1, v.corrupt(pos, err)
	}
	it := record.NewIterator(batch)
	for it.Next() {
		if r := it.Record(); r.Timestamp >= ts {
			return r.Offset, r.Timestamp, nil
		}
	}
	if err := it.Err(); err != nil {
		return -1, -1, v.corrupt(pos, err)
	}
	// A control batch, or records whose timestamps the header overstates:
	// answer with the batch itself.
	h := it.Batch()
	return h.BaseOffset, h.MaxTimestamp, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (the first such record in offset order), Kafka's
// ListOffsets MAX_TIMESTAMP (KIP-734), or -1, -1 for a log without records.
// The time indexes name the largest timestamp of each segment without a
// scan; OffsetForTimestamp then finds its record.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return -1, -1, ErrClosed
	}
	maxTs, found := int64(0), false
	for _, s := range l.segs {
		if n := len(s.times); n > 0 && (!found || s.times[n-1].ts > maxTs) {
			maxTs, found = s.times[n-1].ts, true
		}
	}
	l.mu.RUnlock()
	if !found {
		return -1, -1, nil
	}
	return l.OffsetForTimestamp(maxTs)
}
