package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// Sentinel errors.
var (
	// ErrNotActive: this member is not the leader, or has just become leader
	// and is still catching up; the request should go to (or be retried on)
	// the leader.
	ErrNotActive = errors.New("controller is not active on this member")
	// ErrUnknownNode: a heartbeat from a node that never registered.
	ErrUnknownNode = errors.New("storage node is not registered")
	// ErrFencedEpoch: a heartbeat carrying another epoch than the node's
	// current registration; the node must register again.
	ErrFencedEpoch = errors.New("storage node epoch is fenced")
)

// Proposer commits commands to the replicated log (raftnode.Node).
type Proposer interface {
	// Propose commits cmd on this member, failing when it is not the leader
	// (never forwarding), and returns the FSM's result.
	Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error)
	// Barrier waits until every committed entry is applied to the FSM.
	Barrier(ctx context.Context) error
}

// session is the leader's view of one storage node's heartbeats.
type session struct {
	epoch    int64
	lastSeen time.Time
	// heard is true once the node itself reached this leader (heartbeat or
	// registration) with this epoch, as opposed to the grace period a new
	// leader grants; only then may a dead node be revived.
	heard bool
}

// Controller runs the leader-only logic. Construct with New, then Start; feed
// it leadership changes with SetLeader.
type Controller struct {
	cfg  Config
	raft Proposer
	fsm  *fsm.FSM
	log  *slog.Logger
	now  func() time.Time

	leaderSig chan struct{} // capacity 1: leadership may have changed
	kick      chan struct{} // capacity 1: check sessions now

	mu         sync.Mutex
	wantLeader bool              // latest leadership signal; guarded by mu
	active     bool              // leader and caught up; guarded by mu
	sessions   map[int32]session // by node id; guarded by mu; nil when not active

	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns a stopped controller.
func New(cfg Config, p Proposer, f *fsm.FSM, log *slog.Logger) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Controller{
		cfg: cfg, raft: p, fsm: f, log: log, now: time.Now,
		leaderSig: make(chan struct{}, 1), kick: make(chan struct{}, 1), stop: make(chan struct{}),
	}, nil
}

// Start runs the controller's goroutine until Stop.
func (c *Controller) Start() {
	c.wg.Add(1)
	go c.run()
}

// Stop ends the goroutine and waits for it.
func (c *Controller) Stop() {
	close(c.stop)
	c.wg.Wait()
	c.mu.Lock()
	c.active, c.sessions = false, nil
	c.mu.Unlock()
}

// SetLeader tells the controller whether this member leads. It never blocks.
func (c *Controller) SetLeader(isLeader bool) {
	c.mu.Lock()
	c.wantLeader = isLeader
	if !isLeader {
		// Stop answering at once; the loop finishes the hand-over.
		c.active, c.sessions = false, nil
	}
	c.mu.Unlock()
	signal(c.leaderSig)
}

// Active reports whether the controller runs (leader, caught up).
func (c *Controller) Active() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *Controller) run() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.interval())
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.leaderSig:
			c.syncLeadership()
		case <-t.C:
			c.syncLeadership() // retries a failed take-over
			c.checkSessions()
		case <-c.kick:
			c.checkSessions()
		}
	}
}

// syncLeadership activates the controller after this member became leader:
// barrier, cluster id, session table with a grace period for every node.
func (c *Controller) syncLeadership() {
	c.mu.Lock()
	need := c.wantLeader && !c.active
	c.mu.Unlock()
	if !need {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.raft.Barrier(ctx); err != nil {
		c.log.Warn("controller take-over: barrier failed; retrying", "err", err)
		return
	}
	if c.fsm.ClusterID() == "" {
		if err := c.initClusterID(ctx); err != nil {
			c.log.Warn("controller take-over: cluster id not set; retrying", "err", err)
			return
		}
	}
	now := c.now()
	sessions := map[int32]session{}
	for _, n := range c.fsm.Nodes() {
		sessions[n.ID] = session{epoch: n.Epoch, lastSeen: now}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.wantLeader { // lost it meanwhile
		return
	}
	c.active, c.sessions = true, sessions
	c.log.Info("controller active", "storage_nodes", len(sessions), "session_timeout", c.cfg.SessionTimeout)
}

func (c *Controller) initClusterID(ctx context.Context) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeInitCluster, InitCluster: &fsm.InitCluster{ClusterID: hex.EncodeToString(b[:])}})
	if err != nil {
		return err
	}
	return res.Err
}

func (c *Controller) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ProposeTimeout)
	go func() { // tie the proposal to the controller's life
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Register commits a storage node's registration and opens its session. It
// returns the node's new epoch.
func (c *Controller) Register(ctx context.Context, req cluster.RegisterRequest) (int64, error) {
	if !c.Active() {
		return 0, ErrNotActive
	}
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeRegisterNode, RegisterNode: &fsm.RegisterNode{
		ID: req.ID, Addr: req.Addr, AdvertisedAddr: req.AdvertisedAddr, Rack: req.Rack,
	}})
	if err != nil {
		return 0, err
	}
	if res.Err != nil {
		return 0, res.Err
	}
	c.mu.Lock()
	if c.sessions != nil {
		c.sessions[req.ID] = session{epoch: res.Epoch, lastSeen: c.now(), heard: true}
	}
	c.mu.Unlock()
	c.log.Info("storage node registered", "node", req.ID, "epoch", res.Epoch, "addr", req.Addr, "rack", req.Rack)
	return res.Epoch, nil
}

// Heartbeat renews a storage node's session. It is in-memory only; a node
// that was marked dead is revived by the session check that it triggers.
func (c *Controller) Heartbeat(req cluster.HeartbeatRequest) error {
	n, ok := c.fsm.Node(req.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return ErrNotActive
	}
	if !ok {
		return fmt.Errorf("%w: node %d", ErrUnknownNode, req.ID)
	}
	if req.Epoch != n.Epoch {
		return fmt.Errorf("%w: node %d sent epoch %d, its registration is at epoch %d; register again", ErrFencedEpoch, req.ID, req.Epoch, n.Epoch)
	}
	c.sessions[req.ID] = session{epoch: n.Epoch, lastSeen: c.now(), heard: true}
	if !n.Alive {
		signal(c.kick)
	}
	return nil
}

// checkSessions proposes liveness changes: dead for lapsed sessions, alive for
// dead nodes that heartbeat again.
func (c *Controller) checkSessions() {
	nodes := c.fsm.Nodes()
	var changes []fsm.SetNodeAlive
	c.mu.Lock()
	if !c.active {
		c.mu.Unlock()
		return
	}
	now := c.now()
	for _, n := range nodes {
		s, ok := c.sessions[n.ID]
		if !ok || s.epoch != n.Epoch {
			// Registered through an earlier leader's log or replaced: grace.
			s = session{epoch: n.Epoch, lastSeen: now}
			c.sessions[n.ID] = s
		}
		fresh := now.Sub(s.lastSeen) <= c.cfg.SessionTimeout
		switch {
		case n.Alive && !fresh:
			changes = append(changes, fsm.SetNodeAlive{ID: n.ID, Epoch: n.Epoch, Alive: false})
		case !n.Alive && fresh && s.heard:
			changes = append(changes, fsm.SetNodeAlive{ID: n.ID, Epoch: n.Epoch, Alive: true})
		}
	}
	c.mu.Unlock()
	for _, ch := range changes {
		c.setAlive(ch)
	}
	c.reconcilePartitions()
}

func (c *Controller) setAlive(ch fsm.SetNodeAlive) {
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.raft.Propose(ctx, fsm.Command{Type: fsm.TypeSetNodeAlive, SetNodeAlive: &ch})
	if err == nil {
		err = res.Err
	}
	switch {
	case errors.Is(err, fsm.ErrStaleNodeEpoch):
		c.log.Debug("liveness change overtaken by a registration", "node", ch.ID, "err", err)
	case err != nil:
		c.log.Warn("liveness change not committed; will retry", "node", ch.ID, "alive", ch.Alive, "err", err)
	case ch.Alive:
		c.log.Info("storage node alive again", "node", ch.ID, "epoch", ch.Epoch)
	default:
		c.log.Warn("storage node session expired: marked dead", "node", ch.ID, "epoch", ch.Epoch, "session_timeout", c.cfg.SessionTimeout)
	}
}
