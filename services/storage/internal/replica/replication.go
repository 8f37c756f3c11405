package replica

import (
	"context"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// Replication is what the manager needs to replicate: connections to other
// storage nodes, a way to ask metadata for ISR changes, and the lag bound.
type Replication struct {
	Pool *storageclient.Pool
	// Alter sends an ISR change to metadata (filling in the node's epoch).
	Alter func(ctx context.Context, req cluster.AlterPartitionRequest) (*cluster.Partition, error)
	// MaxLag is replica.lag.time.max.ms: a follower that has not caught up
	// for longer leaves the ISR.
	MaxLag time.Duration
	// Resign asks metadata to move a partition this node leads to another
	// in-sync replica because its copy is damaged (filling in the node's
	// epoch).
	Resign func(ctx context.Context, req cluster.ResignRequest) (*cluster.Partition, error)
}

// replicationState is the manager's replication machinery.
type replicationState struct {
	cfg Replication

	mu       sync.Mutex           // guards fetchers and nodes
	fetchers map[Key]*fetchHandle // running follower fetchers
	nodes    map[int32]string     // node id -> internal address, from the last snapshot

	ctx    context.Context // ends when the manager closes
	cancel context.CancelFunc
	wg     sync.WaitGroup // fetchers and ISR change requests
}

type fetchHandle struct {
	leader string
	epoch  int32
	cancel context.CancelFunc
	done   chan struct{}
}

// EnableReplication turns on follower fetching and ISR maintenance; call it
// before the first Apply.
func (m *Manager) EnableReplication(cfg Replication) {
	ctx, cancel := context.WithCancel(context.Background())
	m.repl = &replicationState{cfg: cfg, fetchers: map[Key]*fetchHandle{}, nodes: map[int32]string{}, ctx: ctx, cancel: cancel}
}

// MaxLag returns the ISR lag bound (0 without replication).
func (m *Manager) MaxLag() time.Duration {
	if m.repl == nil {
		return 0
	}
	return m.repl.cfg.MaxLag
}

// setNodes remembers the nodes' internal addresses from a snapshot.
func (m *Manager) setNodes(nodes []cluster.Node) {
	if m.repl == nil {
		return
	}
	m.repl.mu.Lock()
	defer m.repl.mu.Unlock()
	m.repl.nodes = map[int32]string{}
	for _, n := range nodes {
		m.repl.nodes[n.ID] = n.Addr
	}
}

// reconcileFetcher runs a fetcher for r exactly when this node follows a live
// leader, restarting it when the leader or its epoch changes.
func (m *Manager) reconcileFetcher(r *Replica) {
	if m.repl == nil {
		return
	}
	s := r.State()
	rs := m.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	addr := rs.nodes[s.Leader]
	want := s.Leader >= 0 && s.Leader != m.self && addr != "" && !r.repairing.Load()
	cur := rs.fetchers[r.Key]
	if cur != nil && want && cur.leader == addr && cur.epoch == s.LeaderEpoch {
		return
	}
	if cur != nil {
		cur.cancel()
		<-cur.done
		delete(rs.fetchers, r.Key)
	}
	if !want || rs.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(rs.ctx)
	h := &fetchHandle{leader: addr, epoch: s.LeaderEpoch, cancel: cancel, done: make(chan struct{})}
	rs.fetchers[r.Key] = h
	f := &fetcher{r: r, pool: rs.cfg.Pool, leader: addr, epoch: s.LeaderEpoch, log: m.log}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		defer close(h.done)
		f.run(ctx)
	}()
}

// stopFetcher stops r's fetcher, if any (before its log is deleted or closed).
func (m *Manager) stopFetcher(k Key) {
	if m.repl == nil {
		return
	}
	m.repl.mu.Lock()
	h := m.repl.fetchers[k]
	delete(m.repl.fetchers, k)
	m.repl.mu.Unlock()
	if h != nil {
		h.cancel()
		<-h.done
	}
}

// Alter sends an ISR change in the background and applies the answer.
// A change whose outcome is unknown is asked again (Replica.Altered) until it
// is decided, after a pause that doubles up to two seconds.
func (m *Manager) Alter(r *Replica, req *cluster.AlterPartitionRequest) {
	if req == nil {
		return
	}
	if m.repl == nil || m.repl.cfg.Alter == nil {
		r.Altered(req, nil, errNotSent)
		return
	}
	rs := m.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ctx.Err() != nil { // closing: closeReplication waits for what was started
		r.Altered(req, nil, errNotSent)
		return
	}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		pause := 100 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(rs.ctx, 10*time.Second)
			p, err := rs.cfg.Alter(ctx, *req)
			cancel()
			if err != nil {
				m.log.Warn("ISR change refused or unanswered", "partition", r.Key.String(), "isr", req.ISR, "err", err)
			} else {
				m.log.Info("ISR changed", "partition", r.Key.String(), "isr", p.ISR, "partition_epoch", p.PartitionEpoch)
			}
			if !r.Altered(req, p, err) {
				return
			}
			select {
			case <-rs.ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 2*time.Second)
		}
	}()
}

// ISRLoop drops lagging followers from the ISRs this node leads, checking every
// half lag period, until ctx ends.
func (m *Manager) ISRLoop(ctx context.Context) {
	if m.repl == nil || m.repl.cfg.MaxLag <= 0 {
		return
	}
	t := time.NewTicker(m.repl.cfg.MaxLag / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, r := range m.Replicas() {
				if req := r.ShrinkIfLagging(now, m.repl.cfg.MaxLag); req != nil {
					m.Alter(r, req)
				}
			}
		}
	}
}

// closeReplication stops every fetcher and ISR request and waits for them.
func (m *Manager) closeReplication() {
	if m.repl == nil {
		return
	}
	m.repl.cancel()
	m.repl.mu.Lock()
	for k, h := range m.repl.fetchers {
		h.cancel()
		delete(m.repl.fetchers, k)
	}
	m.repl.mu.Unlock()
	m.repl.wg.Wait()
}
