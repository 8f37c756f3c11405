package log

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/libs/record"
)

// What a compacted log (Config.Compact) does beyond Clean: leader appends
// must give every record a key, follower appends may skip the offsets the
// leader's cleaner removed, a quiet active segment rolls once segment.ms
// has passed so it becomes cleanable, and DirtyBytes tells the cleaner how
// much there is to do.

// checkKeys refuses a batch holding a record without a key: on a compacted
// topic such a record could never be cleaned (Kafka refuses it too).
// Compressed batches are decompressed to look. b is one validated batch.
func checkKeys(b []byte, h *record.Header, it **record.Iterator) error {
	keyless := int64(-1)
	if h.Compression() == record.CodecNone {
		err := record.EachRaw(b, h, func(r record.RawRecord) {
			if r.Key == nil && keyless < 0 {
				keyless = r.Offset - h.BaseOffset
			}
		})
		if err != nil {
			return err
		}
	} else {
		if *it == nil {
			*it = record.NewIterator(nil)
		}
		(*it).Reset(b)
		for (*it).Next() {
			if r := (*it).Record(); r.Key == nil && keyless < 0 {
				keyless = r.Offset - h.BaseOffset
			}
		}
		if err := (*it).Err(); err != nil {
			return err
		}
	}
	if keyless >= 0 {
		return fmt.Errorf("%w: record %d of the batch has no key, and a compacted topic keeps records by key", ErrKeylessRecord, keyless)
	}
	return nil
}

// RollIfDue rolls the active segment when it holds records and its first
// append is at least segment.ms old, as the next append would, so that the
// records of a quiet compacted log become cleanable. It reports whether it
// rolled.
func (l *Log) RollIfDue(now time.Time) (bool, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err, cfg := l.checkLocked(), l.cfg
	s := l.segs[len(l.segs)-1]
	l.mu.RUnlock()
	if err != nil {
		return false, err
	}
	if s.size == 0 || s.firstAppend.IsZero() || now.Sub(s.firstAppend) < time.Duration(cfg.SegmentMs)*time.Millisecond {
		return false, nil
	}
	if _, err := l.roll(); err != nil {
		return false, err
	}
	return true, nil
}

// DirtyBytes measures the cleanable range, the closed segments wholly below
// the last stable offset: closed is their size, dirty the size of those holding
// offsets at or above the first dirty offset (Kafka's dirty ratio is
// dirty/closed). oldestDirtyMs is the timestamp of the first dirty
// segment's first indexed batch (-1 when none), which max.compaction.lag.ms
// is measured against.
func (l *Log) DirtyBytes() (closed, dirty, oldestDirtyMs int64) {
	hw, firstDirty := l.LastStableOffset(), l.FirstDirtyOffset()
	oldestDirtyMs = -1
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.next > hw {
			break
		}
		closed += s.size
		if s.next > firstDirty {
			if dirty == 0 {
				oldestDirtyMs = s.modMs
				if len(s.times) > 0 && s.times[0].ts >= 0 {
					oldestDirtyMs = s.times[0].ts
				}
			}
			dirty += s.size
		}
	}
	return closed, dirty, oldestDirtyMs
}
