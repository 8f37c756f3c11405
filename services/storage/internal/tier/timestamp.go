package tier

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// listTimeout bounds the remote reads of one ListOffset; the reads go on
// in the background and fill the cache for the next try.
const listTimeout = 10 * time.Second

// Searches reports whether ListOffset reads the remote log for a query:
// by timestamp or for the largest timestamp, on a partition with a remote
// log.
func (t *Tier) Searches(r *replica.Replica, timestamp int64) bool {
	return t != nil && r.Remote().Segments > 0 && (timestamp >= 0 || timestamp == protocol.TimestampMax)
}

// ListOffset answers ListOffsets for a leader replica across both tiers: by
// timestamp and for the largest timestamp, the remote log first (its
// records are the older ones), then the local log; the other queries as
// the replica answers them. It waits for the remote reads it needs (a
// segment's index and one block), within ctx.
func (t *Tier) ListOffset(ctx context.Context, r *replica.Replica, timestamp int64, isolation int8) (protocol.ListOffsetsResponse, error) {
	if !t.Searches(r, timestamp) {
		return r.ListOffset(timestamp, isolation)
	}
	none := protocol.ListOffsetsResponse{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	p, err := t.load(ctx, r, r.State().LeaderEpoch)
	if err != nil {
		return none, protocol.StorageError.Err("%s: %v", r.Key, err)
	}
	segs := t.remoteLog(p).Segments
	ts := timestamp
	if timestamp == protocol.TimestampMax {
		// The remote log answers when its largest timestamp is above the
		// local log's (the first record with the largest one wins).
		local, err := r.ListOffset(timestamp, isolation)
		if err != nil {
			return local, err
		}
		ts = -1
		for _, s := range segs {
			ts = max(ts, s.MaxTimestamp)
		}
		if ts < 0 || local.Offset >= 0 && local.Timestamp >= ts {
			return local, nil
		}
	}
	i := 0
	for i < len(segs) && segs[i].MaxTimestamp < ts {
		i++
	}
	if i == len(segs) {
		return r.ListOffset(timestamp, isolation) // no remote record is that recent
	}
	off, at, err := t.offsetForTimestamp(ctx, &segs[i], ts)
	if err != nil {
		return none, protocol.StorageError.Err("%s: %v", r.Key, err)
	}
	return protocol.ListOffsetsResponse{Offset: off, Timestamp: at, LeaderEpoch: r.Log.EpochAt(off)}, nil
}

// offsetForTimestamp finds in seg, whose largest timestamp reaches ts, the
// first record whose timestamp does: the first block that reaches it, its
// first batch that does, that batch's first record that does (the batch
// itself for a control batch).
func (t *Tier) offsetForTimestamp(ctx context.Context, seg *cluster.RemoteSegment, ts int64) (int64, int64, error) {
	idx, err := await(ctx, func() (*segIndex, <-chan struct{}, error) { return t.rd.index(seg) })
	if err != nil {
		return 0, 0, err
	}
	b := 0
	for b < len(idx.blocks) && idx.blocks[b].maxTs < ts {
		b++
	}
	if b == len(idx.blocks) {
		return 0, 0, fmt.Errorf("%w %s: its largest timestamp is %d, no block reaches it", errCorruptObject, seg.Object, seg.MaxTimestamp)
	}
	e, err := await(ctx, func() (*cacheEntry, <-chan struct{}, error) { return t.rd.block(seg, idx, b) })
	if err != nil {
		return 0, 0, err
	}
	defer t.rd.cache.unref(e)
	found, at := int64(-1), record.Header{}
	if err := walkBlock(seg, e, func(pos int64, h record.Header) bool {
		if h.MaxTimestamp < ts {
			return true
		}
		found, at = pos, h
		return false
	}); err != nil {
		return 0, 0, err
	}
	if found >= 0 {
		batch := make([]byte, at.Size())
		if _, err := e.f.ReadAt(batch, found); err != nil {
			return 0, 0, fmt.Errorf("remote segment %s: read cached block: %w", seg.Object, err)
		}
		it := record.NewIterator(batch)
		for it.Next() {
			if rec := it.Record(); rec.Timestamp >= ts {
				return rec.Offset, rec.Timestamp, nil
			}
		}
		if err := it.Err(); err != nil {
			return 0, 0, fmt.Errorf("%w %s: %w", errCorruptObject, seg.Object, err)
		}
		return at.BaseOffset, at.MaxTimestamp, nil // a control batch
	}
	return 0, 0, fmt.Errorf("%w %s: block %d's largest timestamp reaches %d, none of its batches does", errCorruptObject, seg.Object, b, ts)
}

// await calls get until it answers without a wait channel, waiting on each
// channel it gives, or until ctx ends.
func await[T any](ctx context.Context, get func() (T, <-chan struct{}, error)) (T, error) {
	for {
		v, wait, err := get()
		if err != nil || wait == nil {
			return v, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}
