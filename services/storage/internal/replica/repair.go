package replica

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// Damaged logs. Corrupt data found in a replica's log (by a read, which then
// serves none of it, or by the scrubber) is cut away and fetched again from
// the leader. A leader cannot cut its own log first: its followers would
// follow it into the loss. It hands the partition to another in-sync replica
// (metadata's resign), refuses appends from the moment metadata accepted, and
// cuts once it is a follower. A follower stops fetching and leaves the ISR
// (the same resign) before it cuts, so that it is never elected, nor added
// back to the ISR, while the cut records are missing. With no other in-sync
// replica a leader stays leader of a partition whose reads past the damage
// fail (appends go on), and says so: the operator decides.

// resignWait bounds how long a resigning leader waits for the snapshot that
// makes it a follower.
const resignWait = 30 * time.Second

// ReportCorrupt starts the repair of r's log after err (a
// *seglog.CorruptError; other errors are ignored). One repair runs per replica
// at a time; the call returns at once.
func (m *Manager) ReportCorrupt(r *Replica, err error) {
	var ce *seglog.CorruptError
	if !errors.As(err, &ce) || m.repl == nil || !r.repairing.CompareAndSwap(false, true) {
		return
	}
	m.corruptFound.Add(1)
	m.log.Error("corrupt data in a replica's log: repairing it from the leader", "partition", r.Key.String(), "err", ce)
	m.goRepair(r, func(ctx context.Context) { m.repair(ctx, r, ce) })
}

// goRepair runs work on r in the background, r.repairing being set by the
// caller: no fetcher runs meanwhile, and one starts again when work is done.
func (m *Manager) goRepair(r *Replica, work func(ctx context.Context)) {
	rs := m.repl
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		defer func() {
			r.repairing.Store(false)
			m.reconcileFetcher(r)
		}()
		work(rs.ctx)
	}()
}

// repair is ReportCorrupt's work: stop fetching, leave the ISR (handing the
// partition over if leading), cut the log at the damage, fetch again.
func (m *Manager) repair(ctx context.Context, r *Replica, ce *seglog.CorruptError) {
	// A follower that went on fetching while it resigns would look caught
	// up to its leader, which would add it back to the ISR.
	m.stopFetcher(r.Key)
	if !m.resign(ctx, r) {
		return
	}
	if err := m.cutDamaged(r, ce); err != nil {
		switch {
		case errors.Is(err, seglog.ErrStaleDamageReport):
			m.log.Info("the damage was reported before a later cut of the log; nothing to repair", "partition", r.Key.String(), "err", err)
		case errors.Is(err, errLeadsAgain):
			m.log.Warn("a damaged replica was elected leader before its log was cut; the next read or scrub of the damage repairs it again",
				"partition", r.Key.String())
		default:
			m.log.Error("cutting a damaged log failed", "partition", r.Key.String(), "err", err)
		}
		return
	}
	m.log.Warn("damaged log cut; fetching the rest from the leader", "partition", r.Key.String(), "end_offset", r.Log.EndOffset())
}

// errLeadsAgain: a damaged replica became leader between its resignation and
// the cut of its log.
var errLeadsAgain = errors.New("replica: the damaged replica leads again")

// cutDamaged cuts r's log at the damage ce reports, unless r leads. The cut
// runs under the role lock, as the fetcher's changes do: a follower elected
// leader after resign returned (the old leader died) must not cut records its
// own followers would then give up to match it.
func (m *Manager) cutDamaged(r *Replica, ce *seglog.CorruptError) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	if r.State().Leader == m.self {
		return errLeadsAgain
	}
	if err := r.Log.TruncateCorrupt(ce); err != nil {
		return err
	}
	r.logCut()
	return nil
}

// handOverIfCutShort resigns, in the background, the leadership of a
// replica whose log recovery cut short; as a follower it is fine (it fetches
// what it lacks, and joins the ISR only once caught up).
func (m *Manager) handOverIfCutShort(r *Replica) {
	if !r.cutShort.Load() {
		return
	}
	if r.State().Leader != m.self {
		r.cutShort.Store(false)
		return
	}
	if m.repl == nil || !r.repairing.CompareAndSwap(false, true) {
		return
	}
	m.goRepair(r, func(ctx context.Context) {
		if m.resign(ctx, r) {
			r.cutShort.Store(false)
		}
	})
}

// resign makes sure r is neither leader nor in the ISR before its log is cut,
// so that it cannot be elected with the records the cut takes (a follower
// still in the ISR could be, were its leader to die before it caught up). It
// reports false when the repair must stop: no other replica can lead (the
// damaged copy may be all the partition has), or the manager is closing.
func (m *Manager) resign(ctx context.Context, r *Replica) bool {
	deadline := time.Now().Add(resignWait)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		s := r.State()
		leading := s.Leader == m.self
		if !leading && !slices.Contains(s.ISR, m.self) {
			return true
		}
		if m.repl.cfg.Resign == nil {
			if !leading {
				return true // no metadata to ask: nothing elects it either
			}
			m.log.Error("a damaged replica leads and cannot resign (no metadata)", "partition", r.Key.String())
			return false
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := m.repl.cfg.Resign(rctx, cluster.ResignRequest{Topic: r.Key.Topic, Partition: r.Key.Partition, LeaderID: m.self, LeaderEpoch: s.LeaderEpoch})
		cancel()
		switch {
		case err == nil && leading:
			// No appends while the partition moves: producers go to the
			// next leader as soon as they learn it. (Fencing before metadata
			// accepts would leave a leader that cannot resign refusing
			// every append.)
			r.Log.Fence(s.LeaderEpoch + 1)
			m.log.Warn("resigned the leadership of a damaged replica", "partition", r.Key.String(), "leader_epoch", s.LeaderEpoch)
		case err == nil:
			m.log.Warn("a damaged follower left the ISR", "partition", r.Key.String(), "leader_epoch", s.LeaderEpoch)
		case protocol.CodeOf(err) == protocol.LeaderNotAvailable:
			m.log.Error("a damaged replica is all its partition can elect: it stays in the ISR uncut, and reads past the damage fail",
				"partition", r.Key.String(), "leading", leading, "err", err)
			return false
		default:
			m.log.Warn("resigning a damaged replica failed; retrying", "partition", r.Key.String(), "leading", leading, "err", err)
		}
		if time.Now().After(deadline) {
			m.log.Error("a damaged replica still leads or is in the ISR; giving up its repair for now", "partition", r.Key.String())
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.Changed(): // the snapshot that makes it a follower
		case <-time.After(backoff):
		}
	}
}

// Failed logs. A log whose write or fsync failed refuses every append and
// flush from then on (seglog.ErrFailed, the log's fail-stop), so the leader
// of its partition can acknowledge nothing more: producers are answered
// KAFKA_STORAGE_ERROR. The leader hands the partition to another in-sync
// replica with the resignation above, once, in the background, and producers
// move to the new leader. This replica then follows with a log that refuses
// every fetched batch until the node restarts: Open recovers the log from
// what the disk holds, and the fetcher truncates it to the new leader's and
// catches up. With no other in-sync replica it stays leader and every
// produce fails until the restart.

// ReportFailed hands over r's leadership, in the background, after err
// failed r's log (seglog.ErrFailed; other errors, and replicas this node does
// not lead, are ignored). It asks once per opened log and returns at once.
func (m *Manager) ReportFailed(r *Replica, err error) {
	if !errors.Is(err, seglog.ErrFailed) || r.State().Leader != m.self || !r.failReported.CompareAndSwap(false, true) {
		return
	}
	m.log.Error("a partition's log failed: handing its leadership over; the node must restart to recover the log",
		"partition", r.Key.String(), "err", err)
	if m.repl == nil || !r.repairing.CompareAndSwap(false, true) {
		return // nobody to hand over to, or a repair that resigns first is running
	}
	m.goRepair(r, func(ctx context.Context) { m.resign(ctx, r) })
}

// CorruptFound returns how many damaged logs this node found: corrupt data
// reported by reads and the scrubber, and logs recovery cut short.
func (m *Manager) CorruptFound() int64 { return m.corruptFound.Load() }

// ScrubLoop validates every replica's log at rate bytes per second (0: it
// does nothing) until ctx ends, starting at once and going over the logs
// again every interval; damage it finds is repaired as ReportCorrupt does.
func (m *Manager) ScrubLoop(ctx context.Context, rate int64, interval time.Duration) {
	if rate <= 0 {
		return
	}
	for {
		for _, r := range m.Replicas() {
			err := r.Log.Verify(ctx, rate)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				m.ReportCorrupt(r, err)
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
