package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/storageclient"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// fetcher replicates one partition on a follower from its leader, for one
// leader epoch: it first truncates any suffix the leader does not have (found
// with OffsetForLeaderEpoch, never by falling back to the high watermark),
// then fetches and appends until its context ends. Under the fsync policy it
// flushes what it appended before the next fetch, whose FlushedOffset tells
// the leader how far the follower is durable.
type fetcher struct {
	r      *Replica
	pool   *storageclient.Pool
	leader string // the leader's internal address
	epoch  int32
	log    *slog.Logger
}

// fetchWait is how long a follower's fetch long-polls on the leader;
// callTimeout bounds a request beyond that (a silently cut link).
const (
	fetchWait   = 500 * time.Millisecond
	callTimeout = 5 * time.Second
)

func (f *fetcher) run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	truncated := false
	for ctx.Err() == nil {
		c, err := f.pool.Get(ctx, f.leader)
		if err == nil && !truncated {
			if err = f.truncate(ctx, c); err == nil {
				truncated = true
			}
		}
		if err == nil {
			err = f.fetchOnce(ctx, c)
		}
		if err == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errDiverged) {
			truncated = false
		}
		f.log.Debug("replica fetch failed; retrying", "partition", f.r.Key.String(), "leader", f.leader, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// errDiverged asks for a new truncation round.
var errDiverged = errors.New("replica: log diverged from the leader")

// errStaleRole: the replica left the role this fetcher was started for (it
// leads now, or follows at a newer leader epoch); the fetcher is about to be
// replaced.
var errStaleRole = errors.New("replica: the fetcher's leader epoch is over")

// asFollower runs fn, which changes the log or reads the offsets a fetch
// reports, while the replica still follows at the fetcher's epoch. setState
// changes roles under the same lock, so a replica that has just been made
// leader never has its new records reported to the old leader as replicated,
// nor its log appended to, cut or reset by the fetcher it had as a follower.
func (f *fetcher) asFollower(fn func() error) error {
	r := f.r
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	if s := r.State(); s.Leader == r.self || s.LeaderEpoch != f.epoch {
		return errStaleRole
	}
	return fn()
}

// truncate removes the suffix of the local log that the leader does not hold,
// in rounds: each asks the leader where the latest local epoch ends on its
// log and cuts there. When the leader answers with an epoch this log never
// had (KIP-279), the records of the local epoch below it may sit where the
// leader has others: the round cuts at the local end of that epoch and the
// next asks about it. The latest local epoch falls with every such round (a
// cache entry always covers a record), so the rounds end.
func (f *fetcher) truncate(ctx context.Context, c *storageclient.Conn) error {
	for {
		done, err := f.truncateRound(ctx, c)
		if err != nil || done {
			return err
		}
	}
}

// truncateRound is one round of truncate; done is false when another round
// must follow.
func (f *fetcher) truncateRound(ctx context.Context, c *storageclient.Conn) (done bool, err error) {
	l := f.r.Log
	latest := l.LatestEpoch()
	if latest < 0 || l.EndOffset() == l.StartOffset() {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var resp protocol.OffsetForLeaderEpochResponse
	req := &protocol.OffsetForLeaderEpochRequest{Topic: f.r.Key.Topic, Partition: f.r.Key.Partition, CurrentLeaderEpoch: f.epoch, LeaderEpoch: latest}
	if _, err := c.Call(ctx, protocol.APIOffsetForLeaderEpoch, req, nil, &resp); err != nil {
		return false, err
	}
	end, done := truncationPoint(l, resp)
	if end >= l.EndOffset() {
		if !done {
			// Cannot happen with a consistent cache; asking again would
			// ask the same question forever.
			return false, fmt.Errorf("%w: %s: truncation at epoch %d made no progress", errDiverged, f.r.Key, latest)
		}
		return true, nil
	}
	end, err = batchStart(l, end)
	if err != nil {
		return false, err
	}
	f.log.Warn("truncating a divergent suffix", "partition", f.r.Key.String(), "from", end, "log_end", l.EndOffset(),
		"local_epoch", latest, "leader_epoch", resp.LeaderEpoch, "final", done)
	return done, f.asFollower(func() error {
		if err := l.TruncateTo(end); err != nil {
			return fmt.Errorf("truncate %s to %d: %w", f.r.Key, end, err)
		}
		f.r.logCut()
		return nil
	})
}

// truncationPoint is where the leader's OffsetForLeaderEpoch answer says the
// local log stops agreeing with it, and whether that is final (Kafka's
// getOffsetTruncationState).
func truncationPoint(l *seglog.Log, resp protocol.OffsetForLeaderEpochResponse) (end int64, final bool) {
	localEnd, found := l.EndOffsetForEpoch(resp.LeaderEpoch)
	switch {
	case resp.LeaderEpoch < 0 || resp.EndOffset < 0 || found < 0:
		// The leader has no epoch at or below ours, or we have none at or
		// below the leader's: every local record is of an epoch the leader
		// never had, so none is known to be on the leader and the whole
		// local log goes. (Kafka keeps up to the leader's end when the
		// follower has no epoch at or below the leader's, for logs written
		// before epochs were tracked; every log here tracks them.)
		return l.StartOffset(), true
	case found != resp.LeaderEpoch:
		// This log never had the leader's epoch: its records of the
		// epoch below it are not known to be on the leader.
		return localEnd, false
	}
	return min(resp.EndOffset, localEnd), true
}

// fetchOnce fetches from the log end offset and appends what arrives.
func (f *fetcher) fetchOnce(ctx context.Context, c *storageclient.Conn) error {
	l := f.r.Log
	req := &protocol.FetchRequest{Topic: f.r.Key.Topic, Partition: f.r.Key.Partition,
		MaxBytes: 4 << 20, MaxWaitMs: int32(fetchWait.Milliseconds()), MinBytes: 1, ReplicaID: f.r.self,
		CurrentLeaderEpoch: f.epoch}
	if err := f.asFollower(func() error {
		req.Offset, req.FlushedOffset = l.EndOffset(), l.FlushedOffset()
		return nil
	}); err != nil {
		return err
	}
	var resp protocol.FetchResponse
	cctx, cancel := context.WithTimeout(ctx, fetchWait+callTimeout)
	res, err := c.Call(cctx, protocol.APIFetch, req, nil, &resp)
	cancel()
	if err != nil {
		if protocol.CodeOf(err) == protocol.OffsetOutOfRange {
			return f.outOfRange(ctx, c, err)
		}
		return err
	}
	defer res.Release()
	if len(res.Payload) > 0 {
		if err := f.asFollower(func() error {
			_, err := l.AppendReplica(res.Payload)
			return err
		}); err != nil {
			if errors.Is(err, seglog.ErrDiskFull) || errors.Is(err, errStaleRole) {
				return err // retried after a pause; nothing diverged
			}
			return fmt.Errorf("%w: append: %w", errDiverged, err)
		}
		if f.r.Durable() {
			if err := l.WaitFlushed(ctx, l.EndOffset()); err != nil {
				return err
			}
		}
	}
	return f.asFollower(func() error {
		f.r.SetFollowerHighWatermark(resp.HighWatermark)
		// Records the leader deleted (DeleteRecords) go here too, up to
		// what this replica has committed.
		if start := min(resp.LogStartOffset, f.r.HighWatermark()); start > l.StartOffset() {
			if _, err := l.RaiseStartOffset(start); err != nil {
				return err
			}
		}
		return nil
	})
}

// batchStart returns the base offset of the local batch holding offset, so a
// truncation never cuts a batch in two.
func batchStart(l *seglog.Log, offset int64) (int64, error) {
	if offset <= l.StartOffset() {
		return offset, nil
	}
	sl, err := l.Read(offset, 1, l.EndOffset())
	if err != nil {
		return 0, err
	}
	defer sl.Release()
	if sl.Size() < record.HeaderSize {
		return offset, nil
	}
	hdr := make([]byte, record.HeaderSize)
	if _, err := sl.File().ReadAt(hdr, sl.Pos()); err != nil {
		return 0, err
	}
	h, err := record.ParseHeader(hdr)
	if err != nil {
		return 0, err
	}
	return min(h.BaseOffset, offset), nil
}

// outOfRange handles a fetch offset the leader does not hold. Below the
// leader's log start (this replica was away longer than retention, or lost its
// disk) nothing local is still on the leader: the log restarts at the leader's
// start, its local log's with tiered storage (the history below stays
// remote). Otherwise the logs diverged and a truncation round follows.
func (f *fetcher) outOfRange(ctx context.Context, c *storageclient.Conn, cause error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var resp protocol.ListOffsetsResponse
	req := &protocol.ListOffsetsRequest{Topic: f.r.Key.Topic, Partition: f.r.Key.Partition, Timestamp: protocol.TimestampEarliestLocal, CurrentLeaderEpoch: -1}
	if _, err := c.Call(ctx, protocol.APIListOffsets, req, nil, &resp); err != nil {
		return fmt.Errorf("%w: %w", errDiverged, cause)
	}
	l := f.r.Log
	if l.EndOffset() >= resp.Offset {
		return fmt.Errorf("%w: %w", errDiverged, cause)
	}
	f.log.Warn("replica is behind the leader's log start; restarting its log there", "partition", f.r.Key.String(),
		"log_end", l.EndOffset(), "leader_start", resp.Offset)
	return f.asFollower(func() error { return l.ResetTo(resp.Offset) })
}
