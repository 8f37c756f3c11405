package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// Sentinel errors.
var (
	// ErrNotActive: this member is not the leader, or has just become leader
	// and is still catching up; the request should go to (or be retried on)
	// the leader.
	ErrNotActive = errors.New("controller is not active on this member")
	// ErrUnknownNode: a request from a node that never registered.
	ErrUnknownNode = errors.New("storage node is not registered")
	// ErrFencedEpoch: a heartbeat or shutdown request carrying another epoch
	// than the node's current registration, or from a node that was fenced;
	// the node must register again.
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

// Controller runs the leader-only logic. Construct with New, then Start; feed
// it leadership changes with SetLeader.
//
// Lock order: opMu before mu, reserving before mu; opMu and reserving are
// never held together. opMu serializes the controller's own partition and
// liveness decisions (session checks, elections, preferred leaders,
// controlled shutdowns) so that each is taken from a state no other decision
// is changing; reserving serializes producer id block reservations; mu
// guards the fields below it and is never held across a proposal.
type Controller struct {
	cfg  Config
	raft Proposer
	fsm  *fsm.FSM
	log  *slog.Logger
	now  func() time.Time

	leaderSig chan struct{} // capacity 1: leadership may have changed
	kick      chan struct{} // capacity 1: check sessions and partitions now

	opMu sync.Mutex
	// reserving is a lock taken with a context: full (capacity 1) while a
	// producer id block is being reserved.
	reserving chan struct{}

	mu         sync.Mutex
	wantLeader bool              // latest leadership signal; guarded by mu
	active     bool              // leader and caught up; guarded by mu
	sessions   map[int32]session // alive nodes by id; guarded by mu; nil when not active
	fsessions  map[int32]session // registered frontends by id; guarded by mu; nil when not active
	pids       idBlock           // producer ids left to hand out; guarded by mu; empty when not active
	pidTerm    uint64            // bumped each time the controller stops being active; guarded by mu

	metrics metrics

	base   context.Context // cancelled by Stop: ends proposals in flight
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup
}

// New returns a stopped controller.
func New(cfg Config, p Proposer, f *fsm.FSM, log *slog.Logger) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	return &Controller{
		cfg: cfg, raft: p, fsm: f, log: log, now: time.Now,
		leaderSig: make(chan struct{}, 1), kick: make(chan struct{}, 1), reserving: make(chan struct{}, 1),
		base: base, cancel: cancel, stop: make(chan struct{}), metrics: newMetrics(),
	}, nil
}

// Start runs the controller's goroutine until Stop.
func (c *Controller) Start() {
	c.wg.Add(1)
	go c.run()
}

// Stop ends the goroutine, cancels proposals in flight and waits.
func (c *Controller) Stop() {
	close(c.stop)
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	c.active, c.sessions, c.fsessions = false, nil, nil
	c.dropProducerIDsLocked()
	c.mu.Unlock()
}

// SetLeader tells the controller whether this member leads. It never blocks.
func (c *Controller) SetLeader(isLeader bool) {
	c.mu.Lock()
	c.wantLeader = isLeader
	if !isLeader {
		// Stop answering at once; the loop finishes the hand-over.
		c.active, c.sessions, c.fsessions = false, nil, nil
		c.dropProducerIDsLocked()
	}
	c.mu.Unlock()
	signal(c.leaderSig)
}

// ErrTakingOver is the readiness error of a leader whose controller has not
// finished its take-over (barrier, session table) and refuses controller
// requests with ErrNotActive until it has.
var ErrTakingOver = errors.New("controller: this member leads and is still taking over")

// Ready is the controller's readiness check: a member that leads is ready
// once its controller is active; one that does not lead answers controller
// requests by forwarding them and is ready for this check.
func (c *Controller) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wantLeader && !c.active {
		return ErrTakingOver
	}
	return nil
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
	var preferred <-chan time.Time // nil (never ready) when disabled
	if c.cfg.PreferredLeaderInterval > 0 {
		pt := time.NewTicker(c.cfg.PreferredLeaderInterval)
		defer pt.Stop()
		preferred = pt.C
	}
	for {
		select {
		case <-c.stop:
			return
		case <-c.leaderSig:
			c.syncLeadership()
		case <-t.C:
			c.syncLeadership() // retries a failed take-over
			c.checkSessions()
			c.checkFrontends()
		case <-c.kick:
			c.checkSessions()
		case <-preferred:
			c.electPreferred()
		}
	}
}

// syncLeadership activates the controller after this member became leader:
// barrier, cluster id, session table with a grace period for every alive
// node. The first session check follows at once.
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
	sessions := map[int32]session{}
	expire(c.fsm.Nodes(), sessions, c.now(), c.cfg.SessionTimeout) // grace for everyone
	fsessions := map[int32]session{}
	expireFrontends(c.fsm.Frontends(), fsessions, c.now(), c.cfg.SessionTimeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.wantLeader { // lost it meanwhile
		return
	}
	c.active, c.sessions, c.fsessions = true, sessions, fsessions
	signal(c.kick) // repair what the previous leader left half done
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

// ctx bounds one of the controller's own proposals and ends it at Stop.
func (c *Controller) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.base, c.cfg.ProposeTimeout)
}
