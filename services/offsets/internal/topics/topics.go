// Package topics follows the cluster's topics through the metadata watch: the
// coordinator needs each subscribed topic's partition count, and lag needs
// partition leaders. One goroutine long-polls metadata and keeps the latest
// snapshot.
package topics

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Source is the metadata watch.
type Source interface {
	Watch(ctx context.Context, since uint64, wait time.Duration) (*cluster.Snapshot, error)
}

// Watcher holds the latest cluster snapshot.
type Watcher struct {
	src  Source
	log  *slog.Logger
	wait time.Duration

	snap atomic.Pointer[cluster.Snapshot]

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a watcher; Start starts it.
func New(src Source, log *slog.Logger) *Watcher {
	return &Watcher{src: src, log: log, wait: 10 * time.Second}
}

// Start starts the watch goroutine; Stop ends it.
func (w *Watcher) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Add(1)
	go w.run(ctx)
}

// Stop stops the watch and waits for it.
func (w *Watcher) Stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}

func (w *Watcher) run(ctx context.Context) {
	defer w.wg.Done()
	backoff := 100 * time.Millisecond
	failing := false
	for ctx.Err() == nil {
		var since uint64
		if s := w.snap.Load(); s != nil {
			since = s.Version
		}
		s, err := w.src.Watch(ctx, since, w.wait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				w.log.Warn("metadata watch failed; retrying", "err", err)
				failing = true
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		failing, backoff = false, 100*time.Millisecond
		if cur := w.snap.Load(); cur == nil || s.Version >= cur.Version {
			w.snap.Store(s)
		}
	}
}

// Snapshot returns the latest snapshot (nil before the first).
func (w *Watcher) Snapshot() *cluster.Snapshot { return w.snap.Load() }

// Partitions returns the partition count of every topic; ok is false before
// the first snapshot.
func (w *Watcher) Partitions() (map[string]int32, bool) {
	s := w.snap.Load()
	if s == nil {
		return nil, false
	}
	out := make(map[string]int32, len(s.Topics))
	for _, t := range s.Topics {
		out[t.Name] = int32(len(t.Partitions))
	}
	return out, true
}
