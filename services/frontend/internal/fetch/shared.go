package fetch

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
)

// Acquired is what ReadAcquired found besides the records it handed out.
type Acquired struct {
	// Gaps acknowledge the offsets of the ranges that hold no record
	// (compacted away, transaction markers).
	Gaps []shares.Ack
	// Defers send back the records whose delivery time has not come.
	Defers []shares.Ack
}

// ReadAcquired reads ranges a share group acquired of one partition (in
// offset order, as shares.ByPartition gives them) from the partition's
// leader, each batch once. batch, when set, gets every response's payload
// (whole batches, valid during the call); rec, when set, gets each record of a range
// whose delivery time has come (shares.DeliverAt, the topic delaying
// records delayMs) with its range. On an error nothing more is read.
func (f *Fetcher) ReadAcquired(ctx context.Context, ranges []shares.Acquired, delayMs, nowMs int64,
	batch func(payload []byte), rec func(r *record.Record, a shares.Acquired)) (Acquired, error) {
	var out Acquired
	if len(ranges) == 0 {
		return out, nil
	}
	i := 0                        // the range being read
	next := ranges[0].FirstOffset // its first offset not accounted for
	gapTo := func(upTo int64) {   // offsets next..upTo-1 of range i hold no record
		if a := ranges[i]; upTo > next {
			out.Gaps = append(out.Gaps, shares.Ack{Topic: a.Topic, Partition: a.Partition, FirstOffset: next, LastOffset: upTo - 1, Type: shares.AckGap})
		}
	}
	closeRange := func() { // range i is read to its end
		gapTo(ranges[i].LastOffset + 1)
		if i++; i < len(ranges) {
			next = ranges[i].FirstOffset
		}
	}
	first, last := ranges[0], ranges[len(ranges)-1]
	for at := first.FirstOffset; at <= last.LastOffset; {
		res, err := f.Fetch(ctx, Request{Topic: first.Topic, Partition: first.Partition, Offset: at, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
		if err != nil {
			return out, err
		}
		after, err := Records(res, func(r *record.Record) {
			for i < len(ranges) && ranges[i].LastOffset < r.Offset {
				closeRange()
			}
			if i == len(ranges) || r.Offset < ranges[i].FirstOffset {
				return
			}
			a := ranges[i]
			gapTo(r.Offset)
			next = r.Offset + 1
			if t := shares.DeliverAt(r.Headers, r.Timestamp, delayMs); t > nowMs {
				out.Defers = append(out.Defers, shares.Ack{Topic: a.Topic, Partition: a.Partition, FirstOffset: r.Offset, LastOffset: r.Offset, Type: shares.AckDefer, NotBeforeMs: t})
				return
			}
			if rec != nil {
				rec(r, a)
			}
		})
		if err == nil && after > at && batch != nil {
			batch(res.Payload)
		}
		res.Release()
		if err == nil && after <= at {
			err = protocol.OffsetNotAvailable.Err("%s-%d: no record at offset %d though it was acquired below the high watermark", first.Topic, first.Partition, at)
		}
		if err != nil {
			return out, err
		}
		at = after
	}
	for i < len(ranges) {
		closeRange()
	}
	return out, nil
}
