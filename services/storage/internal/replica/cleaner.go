package replica

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// The node's log cleaner (Kafka's LogCleaner with one thread): one
// goroutine that, every CleanerConfig.Every, rolls the quiet active segments
// of compacted replicas whose segment.ms passed and then cleans, dirtiest
// first, every compacted replica due for it: its dirty ratio is at least
// min.cleanable.dirty.ratio, its oldest dirty record is older than
// max.compaction.lag.ms, or its follow-up pass is due. Leaders and
// followers clean their own logs independently with the same rule
// (docs/architecture.md, "Compaction").
//
// The follow-up pass removes tombstones. A pass keeps the tombstones
// younger than delete.retention.ms; with no new writes no dirty bytes would
// bring another pass, and they would stay. So delete.retention.ms after the
// last pass that cleaned dirty records (or after the node first sees the
// replica, for the tombstones a restart forgot) one more pass runs: every
// tombstone that pass's predecessors covered has expired by then.

// CleanerConfig configures the node's cleaner.
type CleanerConfig struct {
	// Every is the interval between rounds over the compacted replicas.
	Every time.Duration
	// IOBytesPerSec bounds the bytes the cleaner reads and writes per
	// second, summed (Kafka's log.cleaner.io.max.bytes.per.second); 0 is no
	// bound.
	IOBytesPerSec int64
	// MapBytes is the key map's memory budget of one pass
	// (log.cleaner.dedupe.buffer.size); 0 is the log package's default.
	MapBytes int64
	// Nice is the OS scheduling priority (nice value, 1-19) of the thread
	// the cleaner runs on, so that appends and fetches get the CPU first
	// when it is short and the cleaner falls behind instead; 0 leaves it
	// at the process's.
	Nice int
	// Hook is seglog.CleanOptions.Hook of every pass (tests pause passes
	// with it); nil: none.
	Hook func(step string) error
}

// cleanerStats are the node's cleaner counters and its follow-up passes.
type cleanerStats struct {
	passes, failures, bytesRead, bytesWritten, recordsRemoved, rolls atomic.Int64

	mu       sync.Mutex
	followUp map[*Replica]time.Time // when the replica's follow-up pass is due (zero: none)
}

// cleanDue reports whether r's dirty records should be cleaned now, and its
// dirty ratio.
func cleanDue(r *Replica, now time.Time) (bool, float64) {
	cfg := r.State().Config
	closed, dirty, oldest := r.Log.DirtyBytes()
	if dirty == 0 {
		return false, 0
	}
	ratio := float64(dirty) / float64(closed)
	overdue := cfg.MaxCompactionLagMs < math.MaxInt64 && oldest >= 0 && now.UnixMilli()-oldest > cfg.MaxCompactionLagMs
	return ratio >= cfg.MinCleanableDirtyRatio || overdue, ratio
}

// followUpDue reports whether r's follow-up pass is due, first scheduling
// one a delete retention from now for a replica seen for the first time.
func (s *cleanerStats) followUpDue(r *Replica, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, seen := s.followUp[r]
	if !seen {
		s.followUp[r] = now.Add(time.Duration(r.State().Config.DeleteRetentionMs) * time.Millisecond)
		return false
	}
	return !at.IsZero() && !now.Before(at)
}

// passed records a pass on r: one that cleaned dirty records schedules a
// follow-up a delete retention later; the follow-up itself schedules none.
func (s *cleanerStats) passed(r *Replica, now time.Time, dirty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if dirty {
		s.followUp[r] = now.Add(time.Duration(r.State().Config.DeleteRetentionMs) * time.Millisecond)
	} else {
		s.followUp[r] = time.Time{}
	}
}

// forgetGone drops the follow-ups of replicas no longer open.
func (s *cleanerStats) forgetGone(open map[*Replica]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.followUp {
		if !open[r] {
			delete(s.followUp, r)
		}
	}
}

// RunCleaner runs one round of the cleaner: roll the due active segments of
// compacted replicas, then clean each replica due for it, dirtiest first.
// throttle, when not nil, paces the passes' I/O.
func (m *Manager) RunCleaner(ctx context.Context, now time.Time, cfg CleanerConfig, throttle func(int) error) {
	type due struct {
		r     *Replica
		ratio float64
		dirty bool // due for its dirty records, not as a follow-up
	}
	var todo []due
	open := map[*Replica]bool{}
	for _, r := range m.Replicas() {
		if !r.State().Config.Compact {
			continue
		}
		open[r] = true
		if rolled, err := r.Log.RollIfDue(now); err != nil {
			m.log.Warn("cleaner: rolling a quiet segment failed", "partition", r.Key.String(), "err", err)
		} else if rolled {
			m.cleaner.rolls.Add(1)
		}
		if ok, ratio := cleanDue(r, now); ok {
			todo = append(todo, due{r, ratio, true})
		} else if m.cleaner.followUpDue(r, now) {
			todo = append(todo, due{r, ratio, false})
		}
	}
	m.cleaner.forgetGone(open)
	slices.SortFunc(todo, func(a, b due) int {
		switch {
		case a.ratio > b.ratio:
			return -1
		case a.ratio < b.ratio:
			return 1
		}
		return 0
	})
	for _, d := range todo {
		if ctx.Err() != nil {
			return
		}
		if m.cleanOne(d.r, now, cfg, throttle) {
			m.cleaner.passed(d.r, now, d.dirty)
		}
	}
}

// cleanOne runs one pass on r and reports whether it completed. A failure
// is logged and counted and the replica keeps serving: corrupt data goes to
// the repair from the leader, a failed log to ReportFailed; an aborted pass
// is redone next round.
func (m *Manager) cleanOne(r *Replica, now time.Time, cfg CleanerConfig, throttle func(int) error) bool {
	tc := r.State().Config
	st, err := r.Log.Clean(seglog.CleanOptions{
		Now:              now,
		DeleteRetention:  time.Duration(tc.DeleteRetentionMs) * time.Millisecond,
		MinCompactionLag: time.Duration(tc.MinCompactionLagMs) * time.Millisecond,
		MapBytes:         cfg.MapBytes,
		Throttle:         throttle,
		Hook:             cfg.Hook,
	})
	m.cleaner.bytesRead.Add(st.BytesRead)
	m.cleaner.bytesWritten.Add(st.BytesWritten)
	m.cleaner.recordsRemoved.Add(st.RecordsRemoved)
	if err != nil && m.gone(r) {
		// Deleted or moved away during the pass: its log closed and its
		// directory went; nothing failed.
		m.log.Info("cleaning pass stopped: the replica left this node", "partition", r.Key.String(), "err", err)
		return false
	}
	if err != nil {
		m.cleaner.failures.Add(1)
		m.log.Error("cleaning pass failed; the partition keeps serving", "partition", r.Key.String(), "err", err)
		switch {
		case errors.As(err, new(*seglog.CorruptError)):
			m.ReportCorrupt(r, err)
		case errors.Is(err, seglog.ErrFailed):
			m.ReportFailed(r, err)
		}
		return false
	}
	m.cleaner.passes.Add(1)
	if st.SegmentsCleaned > 0 {
		m.log.Info("cleaned partition", "partition", r.Key.String(), "segments", st.SegmentsCleaned,
			"records_removed", st.RecordsRemoved, "bytes_read", st.BytesRead, "bytes_written", st.BytesWritten,
			"first_dirty", st.FirstDirty, "took", st.Duration)
	}
	return true
}

// gone reports whether r is no longer the open replica of its partition.
func (m *Manager) gone(r *Replica) bool {
	cur, err := m.Get(r.Key.Topic, r.Key.Partition)
	return err != nil || cur != r
}

// CleanerLoop runs RunCleaner every cfg.Every until ctx ends, on a thread
// of its own at cfg.Nice.
func (m *Manager) CleanerLoop(ctx context.Context, cfg CleanerConfig) {
	if cfg.Nice > 0 {
		// Never unlocked: the thread ends with the goroutine, taking its
		// priority with it, instead of going back to the runtime's pool.
		runtime.LockOSThread()
		if err := lowerThreadPriority(cfg.Nice); err != nil {
			m.log.Warn("cleaner: its thread keeps the process's priority", "nice", cfg.Nice, "err", err)
		}
	}
	var throttle func(int) error
	if cfg.IOBytesPerSec > 0 {
		// A burst of a second's budget, and at least 4 MiB (a few read
		// chunks); larger chunks are taken in bursts.
		lim := rate.NewLimiter(rate.Limit(cfg.IOBytesPerSec), int(max(cfg.IOBytesPerSec, 4<<20)))
		throttle = func(n int) error {
			for n > 0 {
				step := min(n, lim.Burst())
				if err := lim.WaitN(ctx, step); err != nil {
					return err
				}
				n -= step
			}
			return nil
		}
	}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.RunCleaner(ctx, now, cfg, throttle)
		}
	}
}
