package raftgroup

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Sentinel errors. They name no service: the errors a Node returns wrap them
// with its Config.Service where that helps the reader.
var (
	// ErrNotLeader: the operation needs this member to lead and it does not
	// (or lost leadership while the operation ran).
	ErrNotLeader = errors.New("not the raft leader")
	// ErrNoLeader: no leader is known right now (election in progress).
	ErrNoLeader = errors.New("no raft leader is known")
	// ErrLeaderAddressUnknown: the leader's HTTP address is not in -peers.
	ErrLeaderAddressUnknown = errors.New("the raft leader's HTTP address is unknown")
	// ErrForward: the request could not be relayed to the leader.
	ErrForward = errors.New("forwarding to the raft leader failed")
	// ErrNotStarted: the node is not running (before Start or after Stop).
	ErrNotStarted = errors.New("raft node is not running")
	// ErrTimeout: a proposal or barrier did not finish in time.
	ErrTimeout = errors.New("raft operation timed out")
	// ErrLeadershipLost: the member lost its leadership after it proposed
	// the entry and before the entry committed. The entry is in the log and
	// may still commit under the next leader: the outcome is unknown, as
	// after ErrTimeout (which it wraps), and the command must not be
	// proposed again elsewhere as if it had not been (ErrNotLeader is for
	// proposals never made).
	ErrLeadershipLost = fmt.Errorf("%w: leadership lost before the entry committed", ErrTimeout)
)

// Option adjusts New.
type Option func(*Node)

// WithListener makes the transport serve on ln instead of listening on
// Config.RaftAddr (tests use it to learn every address before any node starts).
func WithListener(ln net.Listener) Option { return func(n *Node) { n.ln = ln } }

// WithReady adds a readiness check that Ready consults after it found a
// leader, such as "the FSM has applied the replicated state". Checks run in
// the order given; the first error is Ready's answer. A check is called from
// whatever goroutine calls Ready and must not block.
func WithReady(check func() error) Option {
	return func(n *Node) { n.ready = append(n.ready, check) }
}

// WithHealth adds a check of this member's ability to serve as leader, such
// as "its state file still takes writes". A leader whose check fails hands
// leadership to another voter (a leadership transfer), checking every
// HealthInterval, so that a member that cannot apply does not go on leading
// while the others could; Ready reports the failure too. The check is called
// from the node's goroutine and must not block.
func WithHealth(check func() error) Option {
	return func(n *Node) {
		n.ready = append(n.ready, check)
		n.health = append(n.health, check)
	}
}

// HealthInterval is how often a leader runs its WithHealth checks.
const HealthInterval = time.Second

// Node is this member of the service's Raft group.
type Node struct {
	cfg  Config
	fsm  raft.FSM
	log  *slog.Logger
	hlog hclog.Logger
	// logMetrics counts the log store's appends; registered by RegisterMetrics.
	logMetrics *logMetrics
	ready      []func() error    // readiness checks after the leader check; read-only after New
	health     []func() error    // the WithHealth checks (also in ready); read-only after New
	self       Peer              // RaftAddr is the advertised transport address
	http       map[string]string // raft server id -> HTTP address; read-only after New
	store      logStore
	snaps      *raft.FileSnapshotStore
	ln         net.Listener
	trans      *raft.NetworkTransport
	hc         *http.Client

	raft atomic.Pointer[raft.Raft] // set by Start, cleared by Stop

	mu        sync.Mutex
	listeners []func(bool) // leadership subscribers; guarded by mu

	stop chan struct{}  // closed by Stop
	wg   sync.WaitGroup // the leadership and health goroutines
}

// New validates cfg and opens the stores and the transport; Start starts
// raft. f is the service's state machine: raft calls it from its own
// goroutines as hashicorp/raft documents.
func New(cfg Config, f raft.FSM, log *slog.Logger, opts ...Option) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, errors.New("raftgroup: nil FSM")
	}
	n := &Node{cfg: cfg, fsm: f, log: log, stop: make(chan struct{}), http: map[string]string{},
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, TLSClientConfig: cfg.ClientTLS}}}
	for _, o := range opts {
		o(n)
	}
	n.hlog = newHCLogger(log, hclog.LevelFromString(cfg.LogLevel))
	n.logMetrics = newLogMetrics(cfg.Service)
	if err := n.open(); err != nil {
		n.closeResources()
		return nil, err
	}
	return n, nil
}

func (n *Node) open() error {
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("raft data dir: %w", err)
	}
	var err error
	if n.store, err = openLogStore(n.cfg.DataDir, n.cfg.NoSync, n.hlog, n.logMetrics, n.log); err != nil {
		return err
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(n.cfg.DataDir, n.cfg.SnapshotRetain, n.hlog.Named("snapshots")); err != nil {
		return fmt.Errorf("raft snapshot store: %w", err)
	}
	if n.ln == nil {
		if n.ln, err = net.Listen("tcp", n.cfg.RaftAddr); err != nil {
			return fmt.Errorf("raft listener: %w", err)
		}
	}
	n.self = n.cfg.self()
	if len(n.cfg.Peers) == 0 {
		// A single voter advertises what it listens on (the port may be :0).
		n.self.RaftAddr = n.ln.Addr().String()
	}
	advertise, err := net.ResolveTCPAddr("tcp", n.self.RaftAddr)
	if err != nil {
		return fmt.Errorf("flag -peers: raft address %q of this member: %w", n.self.RaftAddr, err)
	}
	ln := n.ln
	if n.cfg.ServerTLS != nil {
		ln = tls.NewListener(ln, n.cfg.ServerTLS)
	}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &streamLayer{ln: ln, advertise: advertise, tls: n.cfg.ClientTLS},
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  n.hlog.Named("transport"),
	})
	n.http[n.self.ID] = n.self.HTTPAddr
	for _, p := range n.cfg.Peers {
		n.http[p.ID] = p.HTTPAddr
	}
	return nil
}

// Start creates the raft instance, bootstraps it when asked and there is no
// state, and starts following leadership changes.
func (n *Node) Start() error {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.Logger = n.hlog
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	rc.CommitTimeout = n.cfg.CommitTimeout
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.NoSnapshotRestoreOnStart = n.cfg.NoSnapshotRestoreOnStart
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("raft config: %w", err)
	}
	hasState, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return fmt.Errorf("raft state: %w", err)
	}
	r, err := raft.NewRaft(rc, n.fsm, n.store, n.store, n.snaps, n.trans)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	switch {
	case hasState:
		n.log.Info("raft restarting from existing state", "dir", n.cfg.DataDir)
	case n.cfg.Bootstrap:
		if err := r.BootstrapCluster(n.bootstrapConfiguration()).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = r.Shutdown().Error()
			return fmt.Errorf("raft bootstrap: %w", err)
		}
		n.log.Info("raft bootstrapped", "voters", len(n.bootstrapConfiguration().Servers))
	default:
		n.log.Warn("raft has no state and -bootstrap is not set: waiting to be contacted by a leader")
	}
	n.raft.Store(r)
	n.wg.Add(1)
	go n.watchLeadership(r)
	if len(n.health) > 0 {
		n.wg.Add(1)
		go n.guardHealth(r)
	}
	return nil
}

// guardHealth hands leadership over while this member leads and a WithHealth
// check fails, until Stop.
func (n *Node) guardHealth(r *raft.Raft) {
	defer n.wg.Done()
	t := time.NewTicker(HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if r.State() != raft.Leader {
			continue
		}
		for _, check := range n.health {
			if err := check(); err != nil {
				n.log.Error("this member cannot serve as leader: handing leadership over", "err", err)
				if err := r.LeadershipTransfer().Error(); err != nil {
					n.log.Warn("leadership transfer failed; trying again", "err", err, "in", HealthInterval)
				}
				break
			}
		}
	}
}

func (n *Node) bootstrapConfiguration() raft.Configuration {
	peers := n.cfg.Peers
	if len(peers) == 0 {
		peers = []Peer{n.self}
	}
	var c raft.Configuration
	for _, p := range peers {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	return c
}

// watchLeadership fans leadership changes out to the subscribers.
func (n *Node) watchLeadership(r *raft.Raft) {
	defer n.wg.Done()
	ch := r.LeaderCh()
	for {
		select {
		case isLeader := <-ch:
			n.log.Info("raft leadership changed", "leader", isLeader, "term", r.CurrentTerm())
			n.notify(isLeader)
		case <-n.stop:
			return
		}
	}
}

// notify calls every leadership subscriber with isLeader.
func (n *Node) notify(isLeader bool) {
	n.mu.Lock()
	ls := append([]func(bool){}, n.listeners...)
	n.mu.Unlock()
	for _, l := range ls {
		l(isLeader)
	}
}

// OnLeadership registers fn to be called with true when this member becomes
// leader and false when it stops being leader. fn runs on the node's
// goroutine and must not block.
func (n *Node) OnLeadership(fn func(isLeader bool)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listeners = append(n.listeners, fn)
}

// Stop shuts raft down, waits for the node's goroutine and closes the
// transport and the stores. Subscribers get a final false if we were leader.
func (n *Node) Stop() error {
	r := n.raft.Swap(nil)
	var err error
	if r != nil {
		wasLeader := r.State() == raft.Leader
		err = r.Shutdown().Error()
		close(n.stop)
		n.wg.Wait()
		if wasLeader {
			n.notify(false)
		}
	}
	return errors.Join(err, n.closeResources())
}

func (n *Node) closeResources() error {
	var errs []error
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	} else if n.ln != nil {
		errs = append(errs, n.ln.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	n.hc.CloseIdleConnections()
	return errors.Join(errs...)
}

// ID returns this member's raft server id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the advertised raft address of this member.
func (n *Node) RaftAddr() string { return n.self.RaftAddr }

// HTTPAddr returns this member's HTTP address.
func (n *Node) HTTPAddr() string { return n.self.HTTPAddr }

// IsLeader reports whether this member leads now.
func (n *Node) IsLeader() bool {
	r := n.raft.Load()
	return r != nil && r.State() == raft.Leader
}

// Leader returns the current leader's id and HTTP address ("" when unknown).
func (n *Node) Leader() (id, httpAddr string) {
	r := n.raft.Load()
	if r == nil {
		return "", ""
	}
	_, lid := r.LeaderWithID()
	return string(lid), n.http[string(lid)]
}

// Ready reports why the member cannot serve yet: not started, no leader
// known, or the first failing WithReady check.
func (n *Node) Ready() error {
	r := n.raft.Load()
	if r == nil {
		return ErrNotStarted
	}
	if _, id := r.LeaderWithID(); id == "" {
		return ErrNoLeader
	}
	for _, check := range n.ready {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// streamLayer is raft's TCP stream layer on a listener we opened, advertising
// the address other members dial.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	tls       *tls.Config // dial with TLS when set
}

func (s *streamLayer) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *streamLayer) Close() error              { return s.ln.Close() }
func (s *streamLayer) Addr() net.Addr            { return s.advertise }
func (s *streamLayer) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.tls != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(a), s.tls)
	}
	return net.DialTimeout("tcp", string(a), timeout)
}
